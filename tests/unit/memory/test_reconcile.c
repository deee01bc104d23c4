/* Unit tests: reconciling incoming windows with stored turns (memory/reconcile.c). The
 * conversation is the Agora custom-mode fixture (tests/fixtures), replayed as the growing and
 * sliding windows the platform sends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/msg.h"
#include "base/util.h"
#include "memory/reconcile.h"

#include <string.h>

static const char *fixture_path;
static const int64_t NOW = 1763800200000;

/* A toy store: apply a result the way the store will. */
static void apply(json_t *store, struct reconcile_result *r)
{
    size_t i, j;
    json_t *u, *s;
    json_array_foreach(r->updates, i, u) {
        json_array_foreach(store, j, s) {
            if (json_integer_value(json_object_get(s, "seq")) ==
                json_integer_value(json_object_get(u, "seq")))
                json_object_update(s, u);
        }
    }
    json_array_extend(store, r->inserts);
}

/* Each test passes the fingerprint back like the store will; alignment must also work
 * without it (a restarted process has none), so every other call drops it. */
static uint64_t last_hash;
static int calls;

static struct reconcile_result run(json_t *store, json_t *window)
{
    struct reconcile_result r;
    reconcile_run(store, window, calls++ % 2 ? last_hash : 0, NOW, &r);
    last_hash = r.window_hash;
    apply(store, &r);
    return r;
}

static void record_reply(json_t *store, const char *text, int64_t turn, int interrupted)
{
    json_t *t = reconcile_reply_turn(text, NULL, turn, 0, interrupted, NOW);
    json_object_set_new(t, "seq", json_integer((json_int_t)json_array_size(store) + 1));
    json_array_append_new(store, t);
}

static json_t *window(json_t *msgs, size_t from, size_t to)
{
    json_t *w = json_array();
    json_array_append(w, json_array_get(msgs, 0)); /* the system message stays in front */
    for (size_t i = from; i < to; i++)
        json_array_append(w, json_array_get(msgs, i));
    return w;
}

static json_t *find(json_t *store, int64_t turn, const char *role, int64_t idx)
{
    size_t i;
    json_t *s, *hit = NULL;
    int n = 0;
    json_array_foreach(store, i, s) {
        if (json_integer_value(json_object_get(s, "turn_id")) == turn &&
            strcmp(json_string_value(json_object_get(s, "role")), role) == 0 &&
            json_integer_value(json_object_get(s, "turn_idx")) == idx) {
            hit = s;
            n++;
        }
    }
    assert_int_equal(n, 1);
    return hit;
}

static const char *str(json_t *t, const char *k)
{
    return json_string_value(json_object_get(t, k));
}

static void test_normalize(void **state)
{
    json_t *m =
        json_loads("{\"role\":\"user\",\"turn_id\":\"7\",\"timestamp\":1763800104,"
                   "\"content\":[{\"type\":\"text\",\"text\":\"look\"},{\"type\":"
                   "\"image_url\",\"image_url\":{\"url\":\"data:x\"}},{\"type\":\"text\","
                   "\"text\":\"here\"}],\"metadata\":{\"source\":\"asr\",\"user\":\"1002\"}}",
                   0, NULL);
    json_t *t = reconcile_normalize(m, NOW);
    assert_string_equal(str(t, "content"), "look\nhere");
    assert_int_equal(json_integer_value(json_object_get(t, "turn_id")), 7);
    assert_int_equal(json_integer_value(json_object_get(t, "timestamp")), 1763800104000);
    assert_string_equal(str(t, "source"), "asr");
    json_t *meta = json_object_get(t, "metadata");
    assert_int_equal(json_integer_value(json_object_get(meta, "dropped_parts")), 1);
    assert_string_equal(str(meta, "user"), "1002");
    assert_null(json_object_get(meta, "source"));
    assert_true(json_real_value(json_object_get(t, "importance")) == 0.5);
    json_decref(t);
    json_decref(m);
    json_t *one = json_integer(1), *ms = json_integer(1763800104000), *x = json_string("x");
    assert_null(reconcile_normalize(one, NOW));
    assert_int_equal(msg_timestamp_ms(ms), 1763800104000);
    assert_int_equal(msg_timestamp_ms(one), 1000);
    assert_int_equal(msg_turn_id(x), -1);
    json_decref(one);
    json_decref(ms);
    json_decref(x);
}

static void test_agora_custom_conversation(void **state)
{
    json_t *req = json_load_file(fixture_path, 0, NULL);
    assert_non_null(req);
    json_t *msgs = json_object_get(req, "messages"); /* 0 system, 1..8 turns */
    json_t *store = json_array();
    struct reconcile_result r;

    /* turn 2 asked: greeting + question */
    json_t *w = window(msgs, 1, 3);
    r = run(store, w);
    assert_int_equal(json_array_size(r.inserts), 2);
    assert_int_equal(json_array_size(r.system), 1);
    reconcile_result_clear(&r);
    json_decref(w);
    json_t *orig =
        json_object_get(json_object_get(json_array_get(msgs, 3), "metadata"), "original");
    record_reply(store, json_string_value(orig), 2, 0); /* what memproxy streamed */

    /* turn 3 asked: the reply comes back cut, with what was heard */
    w = window(msgs, 1, 5);
    r = run(store, w);
    assert_int_equal(json_array_size(r.inserts), 1);
    assert_int_equal(json_array_size(r.updates), 1);
    reconcile_result_clear(&r);
    r = run(store, w); /* the same request again: nothing */
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    r = run(store, w);
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    json_decref(w);
    record_reply(store, "I can't look up live weather, but Oslo is usually cool in November.", 3,
                 0);

    /* turn 4: silence reminder and follow-up */
    r = run(store, msgs);
    assert_int_equal(json_array_size(r.inserts), 2);
    assert_int_equal(json_array_size(r.updates), 0);
    reconcile_result_clear(&r);

    /* the window slides past the greeting and the first question: nothing changes */
    w = window(msgs, 3, 9);
    r = run(store, w);
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    json_decref(w);

    assert_int_equal(json_array_size(store), 7);
    assert_string_equal(str(find(store, 1, "assistant", 0), "source"), "greeting");
    json_t *cut = find(store, 2, "assistant", 0);
    assert_string_equal(str(cut, "content"), "A cat walks into a");
    assert_string_equal(str(cut, "original"), json_string_value(orig));
    assert_true(json_is_true(json_object_get(cut, "interrupted")));
    assert_int_equal(json_integer_value(json_object_get(cut, "interrupt_timestamp")),
                     1763800106500);
    assert_string_equal(str(find(store, 3, "assistant", 1), "source"), "silence");
    assert_string_equal(str(find(store, 3, "assistant", 0), "source"), "llm");
    assert_string_equal(str(find(store, 4, "user", 0), "content"),
                        "Yes. Remind me what I asked first?");
    json_decref(store);
    json_decref(req);
}

static json_t *msgs_of(const char *json)
{
    return json_loads(json, 0, NULL);
}

static void test_normal_mode_alignment(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    json_t *w1 = msgs_of("[{\"role\":\"system\",\"content\":\"s\"},"
                         "{\"role\":\"assistant\",\"content\":\"Hello! How can I help?\"},"
                         "{\"role\":\"user\",\"content\":\"A name for a goldfish?\"}]");
    r = run(store, w1);
    assert_int_equal(json_array_size(r.inserts), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(r.inserts, 0), "turn_id")),
                     1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(r.inserts, 1), "turn_id")),
                     2);
    reconcile_result_clear(&r);
    record_reply(store, "Bubbles is a classic.", 2, 0);

    json_t *w2 = msgs_of("[{\"role\":\"assistant\",\"content\":\"Hello! How can I help?\"},"
                         "{\"role\":\"user\",\"content\":\"A name for a goldfish?\"},"
                         "{\"role\":\"assistant\",\"content\":\"Bubbles is\"},"
                         "{\"role\":\"user\",\"content\":\"Another?\"}]");
    r = run(store, w2);
    assert_int_equal(json_array_size(r.inserts), 1); /* only the new question */
    assert_int_equal(json_array_size(r.updates), 1); /* the reply was heard only in part */
    json_t *q = json_array_get(r.inserts, 0);
    assert_int_equal(json_integer_value(json_object_get(q, "turn_id")), 3);
    reconcile_result_clear(&r);
    r = run(store, w2);
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    r = run(store, w2); /* with and without the fingerprint */
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    json_t *cut = json_array_get(store, 2);
    assert_string_equal(str(cut, "content"), "Bubbles is");
    assert_string_equal(str(cut, "original"), "Bubbles is a classic.");
    assert_true(json_is_true(json_object_get(cut, "interrupted")));
    assert_int_equal(json_integer_value(json_object_get(cut, "interrupt_timestamp")), NOW);

    /* the window slid: only its tail is sent, nothing is new */
    json_t *w3 = msgs_of("[{\"role\":\"assistant\",\"content\":\"Bubbles is\"},"
                         "{\"role\":\"user\",\"content\":\"Another?\"}]");
    r = run(store, w3);
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    assert_int_equal(json_array_size(store), 4);
    json_decref(w1);
    json_decref(w2);
    json_decref(w3);
    json_decref(store);
}

static void test_hangup_then_heard(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    json_t *w = msgs_of("[{\"role\":\"user\",\"content\":\"hi\",\"turn_id\":1}]");
    r = run(store, w);
    reconcile_result_clear(&r);
    json_decref(w);
    record_reply(store, "Hello there, how", 1, 1); /* client hung up mid-stream */
    json_t *t = json_array_get(store, 1);
    assert_string_equal(str(t, "original"), "Hello there, how");
    assert_int_equal(json_integer_value(json_object_get(t, "interrupt_timestamp")), NOW);
    w = msgs_of("[{\"role\":\"user\",\"content\":\"hi\",\"turn_id\":1},"
                "{\"role\":\"assistant\",\"content\":\"Hello\",\"turn_id\":1,\"metadata\":"
                "{\"interrupted\":true,\"interrupt_timestamp\":1763800199}}]");
    r = run(store, w);
    assert_int_equal(json_array_size(r.updates), 1);
    reconcile_result_clear(&r);
    assert_string_equal(str(t, "content"), "Hello");
    assert_string_equal(str(t, "original"), "Hello there, how");
    assert_int_equal(json_integer_value(json_object_get(t, "interrupt_timestamp")), NOW);
    json_decref(w);
    json_decref(store);
}

/* Stored history mode matches no window, but a client may still say what was heard of a
 * reply: its start, or its text flagged interrupted. Either is the update a window would
 * make; another text, or a message that is no reply, is not; an interruption already
 * recorded keeps its original and first time. */
static void test_heard(void **state)
{
    json_t *reply = reconcile_reply_turn("A cat walks into a library", "llm", 1, 0, 0, NOW);
    json_object_set_new(reply, "seq", json_integer(2));
    json_t *cut = json_pack("{s:s, s:s, s:{s:b}}", "role", "assistant", "content", "A cat walks",
                            "metadata", "interrupted", 1);
    json_t *u = reconcile_heard(reply, cut, NOW + 5);
    assert_non_null(u);
    assert_int_equal(json_integer_value(json_object_get(u, "seq")), 2);
    assert_string_equal(str(u, "content"), "A cat walks");
    assert_string_equal(str(u, "original"), "A cat walks into a library");
    assert_int_equal(json_integer_value(json_object_get(u, "interrupt_timestamp")), NOW + 5);
    json_t *flagged = json_pack("{s:s, s:s, s:{s:b}}", "role", "assistant", "content",
                                "A cat walks into a library", "metadata", "interrupted", 1);
    json_t *f = reconcile_heard(reply, flagged, NOW);
    assert_non_null(f);
    assert_string_equal(str(f, "original"), "A cat walks into a library");
    json_t *other = json_pack("{s:s, s:s}", "role", "assistant", "content", "Something else");
    json_t *same =
        json_pack("{s:s, s:s}", "role", "assistant", "content", "A cat walks into a library");
    json_t *user = json_pack("{s:s, s:s}", "role", "user", "content", "A cat walks");
    assert_null(reconcile_heard(reply, other, NOW));
    assert_null(reconcile_heard(reply, same, NOW));
    assert_null(reconcile_heard(reply, user, NOW));
    json_t *kept = json_copy(reply);
    json_object_update(kept, u);
    json_t *again = json_pack("{s:s, s:s}", "role", "assistant", "content", "A cat");
    json_t *u2 = reconcile_heard(kept, again, NOW + 50);
    assert_non_null(u2);
    assert_string_equal(str(u2, "original"), "A cat walks into a library");
    assert_int_equal(json_integer_value(json_object_get(u2, "interrupt_timestamp")), NOW + 5);
    /* as a platform's text-to-speech sends it back (base/spoken.h) */
    json_t *md = reconcile_reply_turn("A **cat** walks\ninto a library", "llm", 1, 0, 0, NOW);
    json_object_set_new(md, "seq", json_integer(3));
    json_t *said =
        json_pack("{s:s, s:s}", "role", "assistant", "content", "A cat walks into a library");
    json_t *spoken_cut = json_pack("{s:s, s:s}", "role", "assistant", "content", "A cat walks");
    assert_null(reconcile_heard(md, said, NOW));
    json_t *u3 = reconcile_heard(md, spoken_cut, NOW);
    assert_non_null(u3);
    assert_string_equal(str(u3, "content"), "A cat walks");
    assert_string_equal(str(u3, "original"), "A **cat** walks\ninto a library");
    json_t *list[] = {reply, cut,   u,  flagged, f,    other,      same, user,
                      kept,  again, u2, md,      said, spoken_cut, u3};
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
        json_decref(list[i]);
}

/* Reconciles the window given as JSON text into store; the result is the caller's. */
static struct reconcile_result run_text(json_t *store, const char *window_json)
{
    json_t *w = msgs_of(window_json);
    struct reconcile_result r = run(store, w);
    json_decref(w);
    return r;
}

static void run_text_clear(json_t *store, const char *window_json)
{
    struct reconcile_result r = run_text(store, window_json);
    reconcile_result_clear(&r);
}

#define Q(n)    "{\"role\":\"user\",\"content\":\"q" #n "\"}"
#define A(text) "{\"role\":\"assistant\",\"content\":\"" text "\"}"

/* r brought exactly one new message, new, of turn turn, and changed nothing stored. */
static void assert_one_new(struct reconcile_result *r, const char *new, int64_t turn)
{
    assert_int_equal(json_array_size(r->inserts), 1);
    assert_int_equal(json_array_size(r->updates), 0);
    assert_string_equal(str(json_array_get(r->inserts, 0), "content"), new);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(r->inserts, 0), "turn_id")),
                     turn);
    reconcile_result_clear(r);
}

/* Reconciling window into store brings one new message and one update: turn's reply, now
 * content heard, original generated, interrupted. */
static void assert_heard(json_t *store, const char *window, int64_t turn, const char *heard,
                         const char *generated)
{
    struct reconcile_result r = run_text(store, window);
    assert_int_equal(json_array_size(r.inserts), 1);
    assert_int_equal(json_array_size(r.updates), 1);
    reconcile_result_clear(&r);
    json_t *cut = find(store, turn, "assistant", 0);
    assert_string_equal(str(cut, "content"), heard);
    assert_string_equal(str(cut, "original"), generated);
    assert_true(json_is_true(json_object_get(cut, "interrupted")));
}

/* A platform sends back what its text-to-speech said (base/spoken.h): the reply's words with
 * single spaces and no markdown marks, cut where the caller barged in. A copy of a whole
 * reply is that reply, not a new one and not an interruption; a cut copy is what was heard.
 * Test fails if a reply is stored twice or a whole one is taken for an interruption. */
static void test_replies_as_spoken(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "**Bubbles** is a classic.\n\nFinn suits a fast one.  \n", 1, 0);
    r = run_text(store,
                 "[" Q(1) "," A("Bubbles is a classic. Finn suits a fast one.") "," Q(2) "]");
    assert_one_new(&r, "q2", 2);
    json_t *whole = find(store, 1, "assistant", 0);
    assert_string_equal(str(whole, "content"),
                        "**Bubbles** is a classic.\n\nFinn suits a fast one.  \n");
    assert_false(json_is_true(json_object_get(whole, "interrupted")));

    record_reply(store, "Try **Goldie**, or\nperhaps *Nemo*.", 2, 0);
    assert_heard(store,
                 "[" Q(1) "," A("Bubbles is a classic. Finn suits a fast one.") "," Q(2) "," A(
                     "Try Goldie, or perh") "," Q(3) "]",
                 2, "Try Goldie, or perh", "Try **Goldie**, or\nperhaps *Nemo*.");
    assert_int_equal(json_array_size(store), 5);
    json_decref(store);
}

/* The caller barged in before the reply's first word: the platform sends it back empty (or
 * only marks), flagged or not. That is what was heard of the reply (content empty, generated
 * as original), not a second reply; a message that calls tools says nothing and is none. */
static void test_nothing_heard(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "Bubbles is a classic.", 1, 0);
    assert_heard(store, "[" Q(1) "," A(" ** ") "," Q(2) "]", 1, " ** ", "Bubbles is a classic.");

    record_reply(store, "Finn.", 2, 0);
    r = run_text(
        store, "[" Q(1) "," A(" ** ") "," Q(
                   2) ","
                      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\","
                      "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}"
                      "]");
    assert_int_equal(json_array_size(r.inserts), 1); /* the call: a message of its own */
    assert_int_equal(json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    assert_false(json_is_true(json_object_get(find(store, 2, "assistant", 0), "interrupted")));
    json_decref(store);
}

/* An audio reply (its transcript the content, its id in metadata.audio) comes back by
 * reference, {role: assistant, audio: {id}}: that is the reply, heard whole, not a reply
 * heard as nothing; a reference to audio of no stored turn is a message of its own, and a
 * window that repeats the reference writes nothing. */
static void test_audio_by_reference(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "It is sunny.", 1, 0);
    json_object_set_new(json_object_get(json_array_get(store, 1), "metadata"), "audio",
                        json_pack("{s:s}", "id", "audio_1"));
    const char *ref = "{\"role\":\"assistant\",\"audio\":{\"id\":\"audio_1\"}}";
    const char *other = "{\"role\":\"assistant\",\"audio\":{\"id\":\"audio_9\"}}";
    char *w = xasprintf("[" Q(1) ",%s," Q(2) "]", ref);
    r = run_text(store, w);
    assert_int_equal(json_array_size(r.inserts), 1); /* q2 */
    assert_int_equal(json_array_size(r.updates), 0); /* not heard as nothing */
    reconcile_result_clear(&r);
    free(w);
    record_reply(store, "Bring a jacket.", 2, 0);
    w = xasprintf("[" Q(1) ",%s," Q(2) "," A("Bring a jacket.") ",%s," Q(3) "]", ref, other);
    r = run_text(store, w);
    assert_int_equal(json_array_size(r.inserts), 2); /* the foreign reference, q3 */
    assert_int_equal(json_array_size(r.updates), 0);
    json_t *foreign = json_array_get(r.inserts, 0);
    assert_string_equal(str(foreign, "content"), "");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(foreign, "metadata"), "audio"), "id")),
                        "audio_9");
    reconcile_result_clear(&r);
    r = run_text(store, w); /* the same window again */
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    free(w);
    assert_false(json_is_true(json_object_get(find(store, 1, "assistant", 0), "interrupted")));
    json_decref(store);
}

/* A plain client (no turn ids) that leaves out a reply the caller never heard: the reply stays
 * stored, and only the new question is new. Each reply here begins "Answer", as does what was
 * heard of an older one, so a stored reply the window lacks "matches" that heard part; the
 * run through the window's end must win over that one message. Twice in a row, with a gap
 * before the stored end. Test fails if a window's older turns are stored again. */
static void test_unheard_reply_left_out(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "Answer 1: yes.", 1, 0);
    run_text_clear(store, "[" Q(1) "," A("Answer") "," Q(2) "]");
    record_reply(store, "Answer 2: no.", 2, 1); /* hung up; the caller heard none of it */
    r = run_text(store, "[" Q(1) "," A("Answer") "," Q(2) "," Q(3) "]");
    assert_one_new(&r, "q3", 3);
    record_reply(store, "Answer 3: maybe.", 3, 1); /* unheard again */
    r = run_text(store, "[" Q(1) "," A("Answer") "," Q(2) "," Q(3) "," Q(4) "]");
    assert_one_new(&r, "q4", 4);
    assert_int_equal(json_array_size(store), 7);
    assert_string_equal(str(json_array_get(store, 5), "content"), "Answer 3: maybe.");
    json_decref(store);
}

/* A barge-in's reply recorded after the next question (the next request was read before the
 * stream's hang-up) and left out of the window, then:
 * - the reply to that question in the window: the window's messages pair with the stored
 *   ones, passing over the reply it lacks, and only the newest question is new (a run allowed
 *   to end short of the stored end, at a longer match, would store the second reply again);
 * - what was heard of the reply to that question, cut short and not yet recorded: it begins
 *   as the late reply does, but follows the next question, so it is that question's reply
 *   (new, of its turn), and the late reply stays as recorded. */
static void test_reply_recorded_after_next_question(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "," Q(2) "]");
    record_reply(store, "Answer 1: the first", 1, 1);
    record_reply(store, "And the second.", 2, 0);
    r = run_text(store, "[" Q(1) "," Q(2) "," A("And the second.") "," Q(3) "]");
    assert_one_new(&r, "q3", 3);
    assert_int_equal(json_array_size(store), 5);
    json_decref(store);

    store = json_array();
    run_text_clear(store, "[" Q(1) "," Q(2) "]");
    record_reply(store, "Answer 1: the first", 1, 1); /* after q2: the caller heard none */
    r = run_text(store, "[" Q(1) "," Q(2) "," A("Answer") "," Q(3) "]");
    assert_int_equal(json_array_size(r.updates), 0);
    assert_int_equal(json_array_size(r.inserts), 2);
    json_t *heard = json_array_get(r.inserts, 0);
    assert_string_equal(str(heard, "content"), "Answer");
    assert_int_equal(json_integer_value(json_object_get(heard, "turn_id")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(r.inserts, 1), "turn_id")),
                     3);
    reconcile_result_clear(&r);
    assert_string_equal(str(json_array_get(store, 2), "content"), "Answer 1: the first");
    json_decref(store);
}

/* On replicas, a request recorded after the next one: the next request (another replica's)
 * is stored already, up to its question, when this request's window comes to be recorded.
 * That window lies inside what is stored, and it left out a reply the caller never heard:
 * nothing in it is new, and its reply is of its own question's turn, not the newest. A run
 * that could not pass over that reply matched only the window's first question and stored
 * every later message a second time. */
static void test_older_window_inside_with_a_reply_left_out(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "Answer 1: unheard.", 1, 1);
    run_text_clear(store, "[" Q(1) "," Q(2) "]");
    record_reply(store, "Answer 2: yes.", 2, 0);
    run_text_clear(store, "[" Q(1) "," Q(2) "," A("Answer 2: yes.") "," Q(3) "]");
    run_text_clear(store, "[" Q(1) "," Q(2) "," A("Answer 2: yes.") "," Q(3) "," Q(4) "]");
    assert_int_equal(json_array_size(store), 6);
    r = run_text(store, "[" Q(1) "," Q(2) "," A("Answer 2: yes.") "," Q(3) "]");
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    assert_int_equal(r.reply_turn, 3); /* its reply is of q3's turn, not q4's */
    reconcile_result_clear(&r);
    r = run_text(store, "[" Q(1) "," Q(2) "," A("Answer") "," Q(3) "]"); /* and heard in part */
    assert_int_equal(json_array_size(r.inserts), 0);
    assert_int_equal(json_array_size(r.updates), 1);
    assert_int_equal(r.reply_turn, 3);
    reconcile_result_clear(&r);
    r = run_text(store, "[" Q(1) "," Q(2) "," A("Answer") "," Q(3) "," Q(4) "," Q(5) "]");
    assert_int_equal(json_array_size(r.inserts), 1);
    assert_int_equal(r.reply_turn, 5);
    reconcile_result_clear(&r);
    json_array_remove(store, json_array_size(store) - 1);
    assert_int_equal(json_array_size(store), 6);
    assert_string_equal(str(json_array_get(store, 3), "content"), "Answer");
    json_decref(store);
}

/* On replicas, a request recorded after later turns were (another replica answered the next
 * requests meanwhile): its window lies inside what is stored, and what was heard of an old
 * reply ("Answer") also begins the newest stored reply, a later turn's. That one message
 * pairing with the newest reply is a run from the end of what is stored, but not the same
 * text, and it leaves the window's start unexplained: the window's run from its start, which
 * pairs every message, wins, and nothing is new. */
static void test_window_inside_beats_a_heard_part_at_the_end(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "Answer 1: cut short here.", 1, 1);
    run_text_clear(store, "[" Q(1) "," A("Answer") "," Q(2) "]");
    record_reply(store, "Answer 2: yes.", 2, 0);
    run_text_clear(store, "[" Q(1) "," A("Answer") "," Q(2) "," A("Answer 2: yes.") "," Q(3) "]");
    record_reply(store, "Answer 3: maybe.", 3, 0);
    assert_int_equal(json_array_size(store), 6);
    r = run_text(store, "[" Q(1) "," A("Answer") "," Q(2) "]");
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    assert_int_equal(r.reply_turn, 2);
    reconcile_result_clear(&r);
    /* a client that sends only its newest messages: the heard part, then its question */
    r = run_text(store, "[" A("Answer") "," Q(2) "]");
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    assert_int_equal(r.reply_turn, 2);
    reconcile_result_clear(&r);
    assert_string_equal(str(json_array_get(store, 5), "content"), "Answer 3: maybe.");
    json_decref(store);
}

/* A client that rewrote an earlier reply in its copy (here a summary of it): the window's end
 * lines up with what is stored, and only its new question is new, however long the run from
 * the window's start is (it breaks at the rewritten reply too). */
static void test_rewritten_reply_keeps_the_end(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "Answer 1: yes.", 1, 0);
    run_text_clear(store, "[" Q(1) "," A("Answer 1: yes.") "," Q(2) "]");
    record_reply(store, "Answer 2: no.", 2, 0);
    run_text_clear(store,
                   "[" Q(1) "," A("Answer 1: yes.") "," Q(2) "," A("Answer 2: no.") "," Q(3) "]");
    record_reply(store, "Answer 3: maybe.", 3, 0);
    r = run_text(store, "[" Q(1) "," A("Answer 1: yes.") "," Q(2) "," A("(a summary)") "," Q(
                            3) "," A("Answer 3: maybe.") "," Q(4) "]");
    assert_one_new(&r, "q4", 4);
    json_decref(store);
}

/* On replicas, a reply recorded after a later turn's (its stream ended while another replica
 * answered the next request), left out of the window as never heard; the later reply heard
 * in part ("Answer", as both begin). Walked back from the window's end, that heard part
 * reaches the late reply first: it is the later turn's, whose question follows, so it pairs
 * with the later reply, and the late one stays as recorded. */
static void test_heard_part_passes_a_late_reply(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    run_text_clear(store, "[" Q(1) "]");
    record_reply(store, "Answer 1: yes.", 1, 0);
    run_text_clear(store, "[" Q(1) "," A("Answer 1: yes.") "," Q(2) "]");
    run_text_clear(store, "[" Q(1) "," A("Answer 1: yes.") "," Q(2) "," Q(3) "]");
    record_reply(store, "Answer 3: maybe.", 3, 1);
    record_reply(store, "Answer 2: no.", 2, 1); /* the late one, never heard */
    r = run_text(store,
                 "[" Q(1) "," A("Answer 1: yes.") "," Q(2) "," Q(3) "," A("Answer") "," Q(4) "]");
    assert_int_equal(json_array_size(r.inserts), 1);
    assert_int_equal(json_array_size(r.updates), 1); /* reply 3, heard in part */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(r.updates, 0), "turn_id")),
                     3);
    reconcile_result_clear(&r);
    record_reply(store, "Answer 4: fine.", 4, 0);
    r = run_text(store, "[" Q(1) "," A("Answer 1: yes.") "," Q(2) "," Q(3) "," A("Answer") "," Q(
                            4) "," A("Answer 4: fine.") "," Q(5) "]");
    assert_one_new(&r, "q5", 5);
    assert_string_equal(str(json_array_get(store, 4), "content"), "Answer");
    assert_string_equal(str(json_array_get(store, 4), "original"), "Answer 3: maybe.");
    assert_string_equal(str(json_array_get(store, 5), "content"), "Answer 2: no.");
    assert_int_equal(json_array_size(store), 9);
    json_decref(store);
}

/* The original an interruption keeps is the longer of memproxy's record and the platform's
 * when one begins the other (the tokens memproxy had when it saw the hang-up may be more than
 * the platform had received), else the platform's. */
static void test_original_the_longer(void **state)
{
    json_t *reply = reconcile_reply_turn("Answer: one two three", "llm", 1, 0, 1, NOW);
    json_object_set_new(reply, "seq", json_integer(2));
    json_t *fewer = json_pack("{s:s, s:s, s:{s:b, s:s}}", "role", "assistant", "content",
                              "Answer:", "metadata", "interrupted", 1, "original", "Answer: one");
    json_t *more =
        json_pack("{s:s, s:s, s:{s:b, s:s}}", "role", "assistant", "content", "Answer:", "metadata",
                  "interrupted", 1, "original", "Answer: one two three four");
    json_t *other = json_pack("{s:s, s:s, s:{s:b, s:s}}", "role", "assistant", "content",
                              "Answer:", "metadata", "interrupted", 1, "original", "Answer: uno");
    json_t *u1 = reconcile_heard(reply, fewer, NOW);
    json_t *u2 = reconcile_heard(reply, more, NOW);
    json_t *u3 = reconcile_heard(reply, other, NOW);
    assert_string_equal(str(u1, "original"), "Answer: one two three");
    assert_string_equal(str(u2, "original"), "Answer: one two three four");
    assert_string_equal(str(u3, "original"), "Answer: uno");
    assert_string_equal(str(u1, "content"), "Answer:");
    json_t *list[] = {reply, fewer, more, other, u1, u2, u3};
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
        json_decref(list[i]);
}

/* A platform that sends memproxy's replies back in words of its own (its rendering of the
 * text, not a cut): each reply stays the one row recorded, in the window that first shows it
 * and in the ones where its turn is the oldest, cut at its start or whole; an assistant
 * message past the stored ones in the oldest turn is still new. */
static void test_reworded_replies(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    static const char *const windows[] = {
        "[{\"role\":\"user\",\"content\":\"q1\",\"turn_id\":1}]",
        "[{\"role\":\"user\",\"content\":\"q1\",\"turn_id\":1},"
        "{\"role\":\"assistant\",\"content\":\"Answer one.\",\"turn_id\":1},"
        "{\"role\":\"user\",\"content\":\"q2\",\"turn_id\":2}]",
        "[{\"role\":\"assistant\",\"content\":\"Answer one.\",\"turn_id\":1},"
        "{\"role\":\"user\",\"content\":\"q2\",\"turn_id\":2},"
        "{\"role\":\"assistant\",\"content\":\"Answer two.\",\"turn_id\":2},"
        "{\"role\":\"user\",\"content\":\"q3\",\"turn_id\":3}]",
        "[{\"role\":\"assistant\",\"content\":\"Answer two.\",\"turn_id\":2},"
        "{\"role\":\"assistant\",\"content\":\"Still there?\",\"turn_id\":2},"
        "{\"role\":\"user\",\"content\":\"q3\",\"turn_id\":3}]",
    };
    static const size_t inserts[] = {1, 1, 1, 1};
    for (size_t i = 0; i < 4; i++) {
        json_t *w = msgs_of(windows[i]);
        r = run(store, w);
        assert_int_equal(json_array_size(r.inserts), inserts[i]);
        assert_int_equal(json_array_size(r.updates), 0);
        reconcile_result_clear(&r);
        json_decref(w);
        if (i < 2)
            record_reply(store, i ? "The generated answer two." : "The generated answer one.",
                         (int64_t)i + 1, 0);
    }
    assert_int_equal(json_array_size(store), 6); /* q1 a1 q2 a2 q3, and turn 2's reminder */
    assert_string_equal(str(find(store, 1, "assistant", 0), "content"),
                        "The generated answer one.");
    assert_string_equal(str(find(store, 2, "assistant", 0), "content"),
                        "The generated answer two.");
    assert_string_equal(str(find(store, 2, "assistant", 1), "content"), "Still there?");
    json_decref(store);
}

/* A window that repeats an exchange word for word: both copies are kept, and replaying the
 * window (with its fingerprint) adds nothing. */
static void test_repeated_exchange(void **state)
{
    json_t *store = json_array();
    struct reconcile_result r;
    json_t *w1 = msgs_of("[{\"role\":\"user\",\"content\":\"yes\"},"
                         "{\"role\":\"assistant\",\"content\":\"ok\"}]");
    json_t *w2 = msgs_of("[{\"role\":\"user\",\"content\":\"yes\"},"
                         "{\"role\":\"assistant\",\"content\":\"ok\"},"
                         "{\"role\":\"user\",\"content\":\"yes\"},"
                         "{\"role\":\"assistant\",\"content\":\"ok\"}]");
    reconcile_run(store, w1, 0, NOW, &r);
    apply(store, &r);
    reconcile_result_clear(&r);
    reconcile_run(store, w2, 0, NOW, &r);
    assert_int_equal(json_array_size(r.inserts), 2);
    uint64_t h = r.window_hash;
    apply(store, &r);
    reconcile_result_clear(&r);
    reconcile_run(store, w2, h, NOW, &r);
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    assert_int_equal(json_array_size(store), 4);
    json_decref(w1);
    json_decref(w2);
    json_decref(store);
}

/* An older window sent again while newer turns are stored (a request replayed while its reply
 * was being recorded): it lies wholly inside the stored turns, nothing is new. Starting with a
 * question it is found by its content; starting with a reply the caller heard only in part,
 * by what was heard of it, and that reply is marked cut. Without the fingerprint, alignment
 * alone decides (reconcile_align's third step). */
static void test_older_window_replayed(void **state)
{
    (void)state;
    json_t *store = json_array();
    struct reconcile_result r;
    json_t *w1 = msgs_of("[{\"role\":\"user\",\"content\":\"Is the shop open?\"}]");
    reconcile_run(store, w1, 0, NOW, &r);
    apply(store, &r);
    reconcile_result_clear(&r);
    record_reply(store, "Yes, until six tonight.", 1, 0);
    json_t *w2 = msgs_of("[{\"role\":\"user\",\"content\":\"Is the shop open?\"},"
                         "{\"role\":\"assistant\",\"content\":\"Yes, until six tonight.\"},"
                         "{\"role\":\"user\",\"content\":\"And tomorrow?\"}]");
    reconcile_run(store, w2, 0, NOW, &r);
    assert_int_equal(json_array_size(r.inserts), 1);
    apply(store, &r);
    reconcile_result_clear(&r);
    record_reply(store, "Tomorrow from nine.", 2, 0);
    assert_int_equal(json_array_size(store), 4);

    reconcile_run(store, w1, 0, NOW, &r); /* the first question alone, again */
    assert_int_equal(json_array_size(r.inserts) + json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    json_t *w3 = msgs_of("[{\"role\":\"assistant\",\"content\":\"Yes, until\"},"
                         "{\"role\":\"user\",\"content\":\"And tomorrow?\"}]");
    reconcile_run(store, w3, 0, NOW, &r);
    assert_int_equal(json_array_size(r.inserts), 0);
    assert_int_equal(json_array_size(r.updates), 1);
    apply(store, &r);
    reconcile_result_clear(&r);
    json_t *cut = json_array_get(store, 1);
    assert_string_equal(str(cut, "content"), "Yes, until");
    assert_string_equal(str(cut, "original"), "Yes, until six tonight.");
    assert_int_equal(json_array_size(store), 4);
    json_decref(w1);
    json_decref(w2);
    json_decref(w3);
    json_decref(store);
}

/* Five exchanges as a whole-conversation client sends them, each window reconciled into store
 * and each reply recorded; reply `cut` (0: none) heard as "Answer" only. The last window, with
 * the fifth reply, is returned. */
static json_t *five_exchanges(json_t *store, int cut)
{
    struct reconcile_result r;
    json_t *w = json_array();
    char text[64];
    for (int t = 1; t <= 5; t++) {
        snprintf(text, sizeof(text), "Question %d?", t);
        json_array_append_new(w, json_pack("{s:s, s:s}", "role", "user", "content", text));
        reconcile_run(store, w, 0, NOW, &r);
        apply(store, &r);
        reconcile_result_clear(&r);
        snprintf(text, sizeof(text), "Answer %d.", t);
        record_reply(store, text, t, 0);
        json_array_append_new(
            w, json_pack("{s:s, s:s}", "role", "assistant", "content", t == cut ? "Answer" : text));
    }
    return w;
}

/* a[from..to) as a new array (its items shared). */
static json_t *slice(json_t *a, size_t from, size_t to)
{
    json_t *out = json_array();
    for (size_t i = from; i < to; i++)
        json_array_append(out, json_array_get(a, i));
    return out;
}

/* A window that begins before the stored turns it is matched against (the working set keeps
 * the newest only) and ends inside them: on replicas, a whole-conversation client's request
 * recorded after the next ones. Nothing in it is new; it used to be stored again whole. With
 * a question after what it shares with them, only that question is new. */
static void test_older_window_beginning_before_the_working_set(void **state)
{
    (void)state;
    json_t *store = json_array();
    struct reconcile_result r;
    json_t *w = five_exchanges(store, 0);
    assert_int_equal(json_array_size(store), 10);
    json_t *ws = slice(store, 3, 10); /* what a working set of 7 holds: from answer 2 on */
    json_t *late = slice(w, 0, 7);    /* turn 4's request: questions 1 to 4, three answers */
    reconcile_run(ws, late, 0, NOW, &r);
    assert_int_equal(json_array_size(r.inserts), 0);
    assert_int_equal(r.reply_turn, 4);
    reconcile_result_clear(&r);
    json_array_append_new(late, json_pack("{s:s, s:s}", "role", "user", "content", "Now?"));
    reconcile_run(ws, late, 0, NOW, &r); /* the same with a question the store does not have */
    assert_int_equal(json_array_size(r.inserts), 1);
    assert_string_equal(str(json_array_get(r.inserts, 0), "content"), "Now?");
    reconcile_result_clear(&r);
    json_decref(late);
    json_decref(ws);
    json_decref(w);
    json_decref(store);
}

/* The same when the window holds what was heard of a reply, "Answer", which also begins the
 * newest stored reply: ending the window there is not where it lines up (it paired that
 * message with the newest reply and stored the rest of the window again). */
static void test_older_window_with_a_heard_part_before_the_working_set(void **state)
{
    (void)state;
    json_t *store = json_array();
    struct reconcile_result r;
    json_t *w = five_exchanges(store, 3);
    assert_string_equal(str(json_array_get(store, 5), "content"), "Answer");
    json_t *ws = slice(store, 3, 10), *late = slice(w, 0, 7); /* as above */
    reconcile_run(ws, late, 0, NOW, &r);
    assert_int_equal(json_array_size(r.inserts), 0);
    assert_int_equal(r.reply_turn, 4);
    reconcile_result_clear(&r);
    json_decref(late);
    json_decref(ws);
    json_decref(w);
    json_decref(store);
}

/* Many messages of one turn (a tool-heavy turn, or a client that gives every message the same
 * id): each gets its own index among its turn's messages of its role, in order, whether it
 * is new, already stored, or new after stored ones; a window that says them again adds
 * nothing. Matching groups the messages by turn and role rather than scanning them all for
 * each one. */
static void test_many_messages_of_one_turn(void **state)
{
    (void)state;
    json_t *store = json_array(), *msgs = json_array();
    char text[32];
    for (int i = 0; i < 300; i++) {
        snprintf(text, sizeof(text), "%s %d", i % 2 ? "answer" : "question", i / 2);
        json_array_append_new(msgs,
                              json_pack("{s:s, s:s, s:i}", "role", i % 2 ? "assistant" : "user",
                                        "content", text, "turn_id", 7));
    }
    json_t *first = json_array();
    for (int i = 0; i < 200; i++)
        json_array_append(first, json_array_get(msgs, (size_t)i));
    struct reconcile_result r = run(store, first);
    assert_int_equal(json_array_size(r.inserts), 200);
    reconcile_result_clear(&r);
    r = run(store, msgs); /* the 200 again, then 100 more */
    assert_int_equal(json_array_size(r.inserts), 100);
    assert_int_equal(json_array_size(r.updates), 0);
    reconcile_result_clear(&r);
    r = run(store, msgs);
    assert_int_equal(json_array_size(r.inserts), 0);
    reconcile_result_clear(&r);
    assert_int_equal(json_array_size(store), 300);
    for (int i = 0; i < 150; i++) {
        snprintf(text, sizeof(text), "question %d", i);
        assert_string_equal(str(find(store, 7, "user", i), "content"), text);
        snprintf(text, sizeof(text), "answer %d", i);
        assert_string_equal(str(find(store, 7, "assistant", i), "content"), text);
    }
    json_decref(first);
    json_decref(msgs);
    json_decref(store);
}

static int64_t oldest_of(json_t *msgs)
{
    struct reconcile_window *w = reconcile_window_read(msgs, NULL);
    int64_t oldest = reconcile_window_oldest(w);
    reconcile_window_free(w);
    return oldest;
}

/* What memory reads older turns for: the window's oldest turn, its system messages aside. */
static void test_window_oldest(void **state)
{
    json_t *m = msgs_of("[{\"role\":\"system\",\"content\":\"s\"},"
                        "{\"role\":\"user\",\"content\":\"a\",\"turn_id\":\"7\"},"
                        "{\"role\":\"assistant\",\"content\":\"b\",\"turn_id\":9},"
                        "{\"role\":\"developer\",\"content\":\"d\",\"turn_id\":2},"
                        "{\"content\":\"no role\"}]");
    assert_int_equal(oldest_of(m), 7);
    json_array_append_new(m, json_pack("{s:s, s:s}", "role", "user", "content", "c"));
    assert_int_equal(oldest_of(m), -1); /* a turn without an id: not turn-id mode */
    json_decref(m);
    m = msgs_of("[{\"role\":\"system\",\"content\":\"s\"}]");
    assert_int_equal(oldest_of(m), -1);
    json_decref(m);
    m = msgs_of("[{\"role\":\"user\",\"content\":\"a\",\"turn_id\":1.5}]");
    assert_int_equal(oldest_of(m), -1); /* not an integer */
    json_decref(m);
}

/* The window fingerprint is stored with each session (window_hash): a new version computing
 * other values would take every session's next request for a changed window (one full
 * reconciliation each; a replayed window is then matched by content alone). These are the
 * values memproxy stores for these windows since 0.1.2 (each turn's hash, kept with its
 * message in the worker's memo, chained; 0.1.1 chained the turns' fields through util_hash64,
 * and before that FNV-1a). */
static void test_window_hash_is_stable(void **state)
{
    static const struct {
        const char *window;
        uint64_t hash;
    } cases[] = {
        {"[{\"role\":\"user\",\"content\":\"hi\"}]", 0x137847ff83e80767ULL},
        {"[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"assistant\",\"content\":"
         "\"Hi, what can I do?\",\"turn_id\":1},{\"role\":\"user\",\"content\":\"Where is my "
         "order \\u00e9?\",\"turn_id\":12345678901},{\"role\":\"assistant\",\"content\":\"It "
         "is\",\"turn_id\":\"12345678901\",\"metadata\":{\"interrupted\":true,\"original\":\"It "
         "is on its way\"}}]",
         0x71be144642408a71ULL},
        {"[{\"role\":\"tool\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"tool_call_id\":"
         "\"c1\"},{\"role\":\"user\",\"content\":\"\",\"turn_id\":0}]",
         0x94aec78ee209f52cULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *store = json_array(), *w = msgs_of(cases[i].window);
        struct reconcile_result r;
        reconcile_run(store, w, 0, NOW, &r);
        assert_true(r.window_hash == cases[i].hash);
        reconcile_result_clear(&r);
        json_decref(w);
        json_decref(store);
    }
}

int main(int argc, char **argv)
{
    fixture_path = argc > 1 ? argv[1] : "tests/fixtures/agora-custom-request.json";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_agora_custom_conversation),
        cmocka_unit_test(test_normal_mode_alignment),
        cmocka_unit_test(test_hangup_then_heard),
        cmocka_unit_test(test_heard),
        cmocka_unit_test(test_unheard_reply_left_out),
        cmocka_unit_test(test_replies_as_spoken),
        cmocka_unit_test(test_nothing_heard),
        cmocka_unit_test(test_audio_by_reference),
        cmocka_unit_test(test_reply_recorded_after_next_question),
        cmocka_unit_test(test_older_window_inside_with_a_reply_left_out),
        cmocka_unit_test(test_heard_part_passes_a_late_reply),
        cmocka_unit_test(test_window_inside_beats_a_heard_part_at_the_end),
        cmocka_unit_test(test_rewritten_reply_keeps_the_end),
        cmocka_unit_test(test_original_the_longer),
        cmocka_unit_test(test_repeated_exchange),
        cmocka_unit_test(test_older_window_replayed),
        cmocka_unit_test(test_older_window_beginning_before_the_working_set),
        cmocka_unit_test(test_older_window_with_a_heard_part_before_the_working_set),
        cmocka_unit_test(test_reworded_replies),
        cmocka_unit_test(test_window_hash_is_stable),
        cmocka_unit_test(test_window_oldest),
        cmocka_unit_test(test_many_messages_of_one_turn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
