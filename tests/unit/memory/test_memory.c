/* Unit tests: the working set in front of the store (memory/memory.c): sessions pushed out
 * of memory, windows that reach back further than it holds, retried requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/memory.h"

#include <event2/thread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct env {
    char *path;
    struct memory *m;
    struct memory_reader *rd;
    struct event_base *base;
    int done, ok;
};

/* storage.commit_delay_us for env_open (0: none) */
static int64_t env_commit_delay_us;

static void env_open(struct env *v, size_t session_turns, size_t max_turns)
{
    char *dir = xstrdup("/tmp/memproxy-memory-XXXXXX"), *err = NULL;
    assert_non_null(mkdtemp(dir));
    v->path = xasprintf("%s/m.db", dir);
    free(dir);
    struct memory_opts o = {.path = v->path,
                            .busy_timeout_ms = 5000,
                            .session_turns = session_turns,
                            .max_turns = max_turns,
                            .commit_delay_us = env_commit_delay_us};
    v->m = memory_open(&o, &err);
    assert_non_null(v->m);
    v->rd = memory_reader_open(v->m, &err);
    assert_non_null(v->rd);
    v->base = event_base_new();
}

static void env_close(struct env *v)
{
    memory_reader_close(v->rd);
    memory_close(v->m);
    event_base_free(v->base);
    unlink(v->path);
    free(v->path);
}

static void on_done(void *arg, int ok)
{
    struct env *v = arg;
    v->done++;
    v->ok = ok;
    event_base_loopbreak(v->base);
}

/* One request as p says, answered with reply; waits for the commit. With history, the
 * history the upstream request would get (memory_rec_context) as "role:content" lines. */
static void exchange_as(struct env *v, const struct memory_rec_params *p, const char *reply,
                        char **history)
{
    struct memory_reply r = {.content = reply, .finish_reason = "stop", .ttft_us = 1};
    struct memory_rec *rec = memory_rec_new(v->rd, p);
    if (history != NULL) {
        struct memory_context mc = {0};
        size_t i;
        json_t *t;
        memory_rec_context(rec, 1, &mc);
        *history = xstrdup("");
        json_array_foreach(mc.history, i, t) {
            char *n =
                xasprintf("%s%s:%s\n", *history, json_string_value(json_object_get(t, "role")),
                          json_string_value(json_object_get(t, "content")));
            free(*history);
            *history = n;
        }
        json_decref(mc.history);
        json_decref(mc.inject);
        json_decref(mc.params);
        json_decref(mc.user_info);
        json_decref(mc.system);
    }
    memory_rec_request(rec);
    int before = v->done;
    memory_rec_reply(rec, &r, v->base, on_done, v);
    while (v->done == before)
        event_base_loop(v->base, EVLOOP_ONCE);
    assert_int_equal(v->ok, 1);
    memory_rec_free(rec);
    struct memory_stats st;
    memory_stats(v->m, &st);
    assert_int_equal(st.replies_pending, 0);
}

/* One request of session sid with these messages, answered with reply; waits for the commit. */
static void exchange(struct env *v, const char *sid, json_t *messages, const char *reply)
{
    struct memory_rec_params p = {
        .tenant = "t", .session_id = sid, .profile = "default", .messages = messages};
    exchange_as(v, &p, reply, NULL);
}

/* The rows of a query of the database (?1 the session id, ?2 turn_id when it has one): each
 * row's columns joined by "|", each row ended by a newline. */
static char *query(struct env *v, const char *sql, const char *sid, int turn_id)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    char *out = xstrdup("");
    sqlite3_open_v2(v->path, &db, SQLITE_OPEN_READONLY, NULL);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    sqlite3_bind_text(s, 1, sid, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(s) > 1)
        sqlite3_bind_int(s, 2, turn_id);
    while (sqlite3_step(s) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(s); c++) {
            char *n =
                xasprintf("%s%s%s", out, c ? "|" : "", (const char *)sqlite3_column_text(s, c));
            free(out);
            out = n;
        }
        char *n = xasprintf("%s\n", out);
        free(out);
        out = n;
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return out;
}

/* How many rows rows() gave. */
static int lines_of(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* "turn_id|role|content|interrupted" of the session's rows in seq order. */
static char *rows(struct env *v, const char *sid)
{
    return query(v,
                 "SELECT m.turn_id, m.role, m.content, m.interrupted FROM messages m "
                 "JOIN sessions s ON s.sid = m.sid WHERE s.id = ?1 ORDER BY m.seq",
                 sid, 0);
}

static void add(json_t *msgs, const char *role, const char *content, int turn_id)
{
    json_t *m = json_pack("{s:s, s:s}", "role", role, "content", content);
    if (turn_id >= 0)
        json_object_set_new(m, "turn_id", json_integer(turn_id));
    json_array_append_new(msgs, m);
}

/* Exchanges from..to-1 of session sid, each asking "q<t>" with the window so far and
 * answered "a<t>"; both are added to msgs. */
static void converse(struct env *v, const char *sid, json_t *msgs, int from, int to)
{
    char text[64];
    for (int t = from; t < to; t++) {
        snprintf(text, sizeof(text), "q%d", t);
        add(msgs, "user", text, -1);
        snprintf(text, sizeof(text), "a%d", t);
        exchange(v, sid, msgs, text);
        add(msgs, "assistant", text, -1);
    }
}

/* What rows() gives for turns 0..n-1 of converse(). */
static void converse_rows(char *want, size_t size, int n)
{
    want[0] = '\0';
    for (int t = 0; t < n; t++) {
        size_t k = strlen(want);
        snprintf(want + k, size - k, "%d|user|q%d|0\n%d|assistant|a%d|0\n", t + 1, t, t + 1, t);
    }
}

/* A session pushed out of the working set is read back from the database: its next window
 * (the whole history again) adds only what is new. */
static void test_evicted_session_reloads(void **state)
{
    struct env v = {0};
    env_open(&v, 8, 64);
    json_t *msgs = json_array();
    converse(&v, "s0", msgs, 0, 10);
    for (int i = 1; i <= 40; i++) { /* 40 other sessions push s0 out */
        char sid[16];
        snprintf(sid, sizeof(sid), "s%d", i);
        json_t *one = json_array();
        add(one, "user", "hello", -1);
        exchange(&v, sid, one, "hi");
        json_decref(one);
    }
    converse(&v, "s0", msgs, 10, 11);
    char *got = rows(&v, "s0"), want[1024];
    converse_rows(want, sizeof(want), 11);
    assert_string_equal(got, want);
    free(got);
    json_decref(msgs);
    env_close(&v);
}

/* In turn-id mode a window reaching back past the working set is matched against the
 * database: an interruption reported for an old turn updates its row, nothing is doubled. */
static void test_window_older_than_working_set(void **state)
{
    struct env v = {0};
    env_open(&v, 8, 1000);
    json_t *msgs = json_array();
    char text[64];
    for (int t = 1; t <= 12; t++) {
        snprintf(text, sizeof(text), "q%d", t);
        add(msgs, "user", text, t);
        snprintf(text, sizeof(text), "a%d long answer", t);
        exchange(&v, "agora", msgs, text);
        add(msgs, "assistant", text, t);
    }
    /* turn 2's answer was cut short: the window says so, 11 turns later */
    json_t *a2 = json_array_get(msgs, 3);
    json_object_set_new(a2, "content", json_string("a2"));
    json_object_set_new(a2, "metadata", json_pack("{s:b}", "interrupted", 1));
    add(msgs, "user", "q13", 13);
    exchange(&v, "agora", msgs, "a13 long answer");
    char *got = rows(&v, "agora");
    assert_non_null(strstr(got, "1|user|q1|0\n1|assistant|a1 long answer|0\n2|user|q2|0\n"
                                "2|assistant|a2|1\n3|user|q3|0\n"));
    assert_non_null(strstr(got, "13|user|q13|0\n13|assistant|a13 long answer|0\n"));
    assert_int_equal(lines_of(got), 26);
    free(got);
    json_decref(msgs);
    env_close(&v);
}

/* A turn-id window reaching back past the working set reads only the stored turns of its own
 * turn ids, however long the session: here 4 rows of a 400-row session, where it read every
 * row from the window's oldest turn on (a restarted agent under the same session id, whose
 * turn ids begin again at 1, made every request read the whole session). */
static void test_window_reaching_back_reads_its_span(void **state)
{
    struct env v = {0};
    env_open(&v, 8, 1000);
    char q[64], a[64];
    for (int t = 1; t <= 200; t++) { /* Agora's window, shortened: the last turn and the new */
        json_t *msgs = json_array();
        if (t > 1) {
            snprintf(q, sizeof(q), "q%d", t - 1);
            snprintf(a, sizeof(a), "a%d", t - 1);
            add(msgs, "user", q, t - 1);
            add(msgs, "assistant", a, t - 1);
        }
        snprintf(q, sizeof(q), "q%d", t);
        snprintf(a, sizeof(a), "a%d", t);
        add(msgs, "user", q, t);
        exchange(&v, "long", msgs, a);
        json_decref(msgs);
    }
    struct memory_stats before, after;
    memory_stats(v.m, &before);
    assert_int_equal(before.reach_back_turns,
                     0); /* a sliding window stays within the working set */
    json_t *back = json_array();
    add(back, "user", "q1", 1);
    add(back, "assistant", "a1", 1);
    add(back, "user", "q2", 2);
    exchange(&v, "long", back, "a2");
    memory_stats(v.m, &after);
    assert_int_equal(after.reach_back_turns, 4); /* turns 1 and 2: their questions and answers */
    char *got = rows(&v, "long");
    assert_int_equal(lines_of(got), 400); /* matched, not stored again */
    assert_non_null(strstr(got, "1|user|q1|0\n1|assistant|a1|0\n2|user|q2|0\n2|assistant|a2|0\n"));
    free(got);
    json_decref(back);
    back = json_array(); /* turn ids far apart: their rows only, not the 150 turns between */
    add(back, "user", "q1", 1);
    add(back, "assistant", "a1", 1);
    add(back, "user", "q150", 150);
    exchange(&v, "long", back, "a150");
    memory_stats(v.m, &before);
    assert_int_equal(before.reach_back_turns - after.reach_back_turns, 4);
    got = rows(&v, "long");
    assert_int_equal(lines_of(got), 400);
    free(got);
    json_decref(back);
    env_close(&v);
}

/* The same window again after its reply was recorded is a retry: the new reply replaces the
 * old one instead of adding a second answer to the turn. */
static void test_retry_replaces_reply(void **state)
{
    struct env v = {0};
    env_open(&v, 64, 1000);
    json_t *msgs = json_array();
    add(msgs, "user", "hello", 1);
    exchange(&v, "r", msgs, "first");
    exchange(&v, "r", msgs, "second");
    char *got = rows(&v, "r");
    assert_string_equal(got, "1|user|hello|0\n1|assistant|second|0\n");
    free(got);
    json_decref(msgs);
    env_close(&v);
}

/* Stored history mode (the client sends only its new message): a request of text with the
 * request's turn_id (turn; < 0 none) and the message's own (own; < 0 none), answered reply;
 * history, when not NULL, is what exchange_as() must give as the upstream's history. */
struct stored_step {
    const char *text;
    int turn, own;
    const char *reply, *history;
};

static void stored_exchange(struct env *v, const struct stored_step *s)
{
    json_t *msgs = json_array(), *tid = s->turn >= 0 ? json_integer(s->turn) : NULL;
    char *h = NULL;
    add(msgs, "user", s->text, s->own);
    struct memory_rec_params p = {.tenant = "t",
                                  .session_id = "st",
                                  .profile = "default",
                                  .messages = msgs,
                                  .turn_id = tid,
                                  .append = 1};
    exchange_as(v, &p, s->reply, s->history ? &h : NULL);
    if (s->history != NULL)
        assert_string_equal(h, s->history);
    free(h);
    json_decref(tid);
    json_decref(msgs);
}

/* Stored mode keeps the platform's turn numbers: the request's turn_id is its user message's
 * as well as its reply's, and a message's own turn_id is kept. A request sent again for its
 * turn is a retry: its message is not stored twice, its reply replaces the first, and the
 * upstream is asked as the first time (the history ends before that turn). A new message
 * under a turn already stored is recorded, and sees the whole history. Without turn ids,
 * the same text twice is two turns: nothing tells a retry from a caller saying it again. */
static void test_stored_mode_turn_ids(void **state)
{
    static const char first[] = "user:first\nassistant:a1\n";
    static const struct stored_step steps[] = {
        {"first", 7, -1, "a1", ""},
        {"second", 8, -1, "a2", first},
        {"second", 8, -1, "a2 again", first},
        {"more", 8, -1, "a3", "user:first\nassistant:a1\nuser:second\nassistant:a2 again\n"},
        {"own", -1, 20, "a4", NULL},
        {"own", -1, 20, "a4 again", NULL},
        {"plain", -1, -1, "a5", NULL},
        {"plain", -1, -1, "a6", NULL},
    };
    struct env v = {0};
    env_open(&v, 64, 1000);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        stored_exchange(&v, &steps[i]);
    char *got = rows(&v, "st");
    assert_string_equal(got, "7|user|first|0\n7|assistant|a1|0\n"
                             "8|user|second|0\n8|assistant|a2 again|0\n"
                             "8|user|more|0\n8|assistant|a3|0\n"
                             "20|user|own|0\n20|assistant|a4 again|0\n"
                             "21|user|plain|0\n21|assistant|a5|0\n"
                             "22|user|plain|0\n22|assistant|a6|0\n");
    free(got);
    env_close(&v);
}

/* Session sid's turns as "turn_id|role|content|interrupted|original or -" lines. */
static char *heard_rows(struct env *v, const char *sid)
{
    return query(v,
                 "SELECT m.turn_id, m.role, m.content, m.interrupted, COALESCE(m.original, '-') "
                 "FROM messages m JOIN sessions s ON s.sid = m.sid WHERE s.id = ?1 "
                 "ORDER BY m.seq",
                 sid, 0);
}

/* Stored mode, a client that says its last reply was cut short (the heard part, flagged, with
 * its new question): the reply is updated — content heard, original generated — not stored a
 * second time, and the history the model gets has it as heard. Without the context asked
 * first (no history built) the record is the same. */
static void test_stored_mode_heard(void **state)
{
    static const struct stored_step first = {"joke", 1, -1, "A cat walks into a library", ""};
    for (int with_history = 0; with_history < 2; with_history++) {
        struct env v = {0};
        char *h = NULL;
        env_open(&v, 64, 1000);
        stored_exchange(&v, &first);
        json_t *msgs = json_pack("[{s:s, s:s, s:i, s:{s:b}}, {s:s, s:s, s:i}]", "role", "assistant",
                                 "content", "A cat walks", "turn_id", 1, "metadata", "interrupted",
                                 1, "role", "user", "content", "stop", "turn_id", 2);
        struct memory_rec_params p = {
            .tenant = "t", .session_id = "st", .profile = "default", .messages = msgs, .append = 1};
        exchange_as(&v, &p, "ok", with_history ? &h : NULL);
        if (with_history)
            assert_string_equal(h, "user:joke\nassistant:A cat walks\n");
        free(h);
        char *got = heard_rows(&v, "st");
        assert_string_equal(got, "1|user|joke|0|-\n"
                                 "1|assistant|A cat walks|1|A cat walks into a library\n"
                                 "2|user|stop|0|-\n2|assistant|ok|0|-\n");
        free(got);
        json_decref(msgs);
        env_close(&v);
    }
}

/* Stored mode, the heard part of the last reply (no turn id of its own) sent with a question
 * numbered by the request, and that request sent again: the second time the question's turn
 * is stored already, with a reply that begins as the heard part does. The heard part speaks
 * of the reply before that turn, which it updated the first time; the retry changes nothing
 * else, its reply replaces the turn's first, and the model is asked as the first time. (It
 * was taken as what was heard of the retried turn's reply, which then stayed beside the new
 * one.) */
static void test_stored_mode_heard_sent_again(void **state)
{
    static const struct stored_step first = {"joke", 1, -1, "Answer: a cat walks in", ""};
    static const char *replies[] = {"Answer: sure", "Answer: sure, again"};
    for (int with_history = 0; with_history < 2; with_history++) {
        struct env v = {0};
        env_open(&v, 64, 1000);
        stored_exchange(&v, &first);
        json_t *msgs =
            json_pack("[{s:s, s:s, s:{s:b}}, {s:s, s:s}]", "role", "assistant", "content",
                      "Answer:", "metadata", "interrupted", 1, "role", "user", "content", "again?");
        json_t *tid = json_integer(2);
        for (int i = 0; i < 2; i++) {
            char *h = NULL;
            json_t *copy = json_deep_copy(msgs);
            struct memory_rec_params p = {.tenant = "t",
                                          .session_id = "st",
                                          .profile = "default",
                                          .messages = copy,
                                          .turn_id = tid,
                                          .append = 1};
            exchange_as(&v, &p, replies[i], with_history ? &h : NULL);
            if (with_history)
                assert_string_equal(h, "user:joke\nassistant:Answer:\n");
            free(h);
            json_decref(copy);
        }
        char *got = heard_rows(&v, "st");
        assert_string_equal(got, "1|user|joke|0|-\n"
                                 "1|assistant|Answer:|1|Answer: a cat walks in\n"
                                 "2|user|again?|0|-\n2|assistant|Answer: sure, again|0|-\n");
        free(got);
        json_decref(tid);
        json_decref(msgs);
        env_close(&v);
    }
}

/* The reply of rec, generated as far as reply: recorded, waited for. */
static void reply_to(struct env *v, struct memory_rec *rec, const char *reply, int cut)
{
    struct memory_reply r = {
        .content = reply, .finish_reason = cut ? "client_disconnected" : "stop", .ttft_us = 1};
    r.interrupted = cut;
    int before = v->done;
    memory_rec_reply(rec, &r, v->base, on_done, v);
    while (v->done == before)
        event_base_loop(v->base, EVLOOP_ONCE);
    memory_rec_free(rec);
}

/* A caller barges in while a reply streams, and the platform's next request (the reply as
 * heard, flagged, and the new question) is read before the first stream's hang-up: the
 * window stores the heard part first. When the first reply is then recorded, it takes that
 * row's place (content heard, original generated) instead of storing the turn's reply twice,
 * after the next question. A greeting of the same turn before the question is not a heard
 * reply, and stays. */
static void test_reply_recorded_after_its_heard_part(void **state)
{
    struct env v = {0};
    env_open(&v, 64, 1000);
    json_t *w1 = json_pack("[{s:s, s:s, s:i, s:{s:s}}, {s:s, s:s, s:i}]", "role", "assistant",
                           "content", "Hello!", "turn_id", 1, "metadata", "source", "greeting",
                           "role", "user", "content", "q1", "turn_id", 1);
    struct memory_rec_params p1 = {
        .tenant = "t", .session_id = "b", .profile = "default", .messages = w1};
    struct memory_rec *first = memory_rec_new(v.rd, &p1);
    memory_rec_request(first); /* its reply streams on */
    json_t *w2 = json_deep_copy(w1);
    json_array_append_new(w2, json_pack("{s:s, s:s, s:i, s:{s:b, s:s}}", "role", "assistant",
                                        "content", "Hello! w0 w1", "turn_id", 1, "metadata",
                                        "interrupted", 1, "source", "llm"));
    json_array_append_new(
        w2, json_pack("{s:s, s:s, s:i}", "role", "user", "content", "q2", "turn_id", 2));
    struct memory_rec_params p2 = {
        .tenant = "t", .session_id = "b", .profile = "default", .messages = w2};
    struct memory_rec *second = memory_rec_new(v.rd, &p2);
    memory_rec_request(second);
    reply_to(&v, second, "a2", 0);
    reply_to(&v, first, "Hello! w0 w1 w2 w3", 1);
    char *got = query(&v,
                      "SELECT m.turn_id, m.role, m.content, m.interrupted, "
                      "COALESCE(m.original, '-'), m.latency_us IS NOT NULL FROM messages m "
                      "JOIN sessions s ON s.sid = m.sid WHERE s.id = ?1 ORDER BY m.seq",
                      "b", 0);
    assert_string_equal(got, "1|assistant|Hello!|0|-|0\n1|user|q1|0|-|0\n"
                             "1|assistant|Hello! w0 w1|1|Hello! w0 w1 w2 w3|1\n"
                             "2|user|q2|0|-|0\n2|assistant|a2|0|-|1\n");
    free(got);
    json_decref(w1);
    json_decref(w2);
    env_close(&v);
}

static void on_prepared(void *arg)
{
    (void)arg;
}

/* A stale entry (here a REST change made it so; on replicas another replica's write) is read
 * again before it is used, but never while a batch of its own is on its way: the read would
 * lack that batch's turns and replace the entry's copy of them. A barge-in, as memproxy met it
 * on replicas: request 2 (its reply cut, never heard) is recorded after request 3, which was
 * read first and stored question 2 and question 3; request 3's turns wait in the store for a
 * reply's commit when request 2 comes to be recorded. Read then, the entry lost question 3; a
 * later reply of turn 3 made it look as if question 3 were turn 4's, and the next window
 * stored question 3 a second time. */
static void test_no_read_over_turns_in_flight(void **state)
{
    struct env v = {0};
    env_commit_delay_us = 30000000; /* a request's turns wait for a reply's commit */
    env_open(&v, 64, 1000);
    env_commit_delay_us = 0;
    json_t *msgs = json_array(), *other = json_array();
    converse(&v, "f", msgs, 1, 2);
    json_t *labels = json_pack("{s:{s:s}}", "labels", "k", "v");
    int before = v.done;
    memory_change(v.m, "t", "f", MEMORY_PATCH, labels, v.base, on_done, &v);
    while (v.done == before)
        event_base_loop(v.base, EVLOOP_ONCE);
    json_decref(labels);
    add(other, "user", "elsewhere", -1); /* another call's request, its reply streaming */
    struct memory_rec_params po = {
        .tenant = "t", .session_id = "o", .profile = "default", .messages = other};
    struct memory_rec *elsewhere = memory_rec_new(v.rd, &po);
    memory_rec_request(elsewhere);
    add(msgs, "user", "q2", -1);
    json_t *w2 = json_deep_copy(msgs);
    struct memory_rec_params p2 = {
        .tenant = "t", .session_id = "f", .profile = "default", .messages = w2};
    struct memory_rec *second = memory_rec_new(v.rd, &p2);
    memory_rec_prepare(second, on_prepared, NULL); /* the entry is stale: to be read again */
    add(msgs, "user", "q3", -1);
    struct memory_rec_params p3 = {
        .tenant = "t", .session_id = "f", .profile = "default", .messages = msgs};
    struct memory_rec *third = memory_rec_new(v.rd, &p3);
    memory_rec_request(third); /* read first: q2 and q3, waiting in the store */
    memory_rec_request(second);
    reply_to(&v, second, "a2 cut", 1);
    reply_to(&v, third, "a3", 0);
    memory_rec_free(elsewhere);
    add(msgs, "assistant", "a3", -1);
    add(msgs, "user", "q4", -1);
    exchange(&v, "f", msgs, "a4");
    char *got = rows(&v, "f");
    assert_string_equal(got, "1|user|q1|0\n1|assistant|a1|0\n2|user|q2|0\n3|user|q3|0\n"
                             "2|assistant|a2 cut|1\n3|assistant|a3|0\n4|user|q4|0\n"
                             "4|assistant|a4|0\n");
    free(got);
    json_decref(w2);
    json_decref(msgs);
    json_decref(other);
    env_close(&v);
}

/* A window without turn ids from a client that numbers its requests (a top-level turn_id):
 * the user message the request brings is of the request's turn, as its reply is; the turns
 * before it keep the numbers memproxy gave them. */
static void test_request_turn_id_numbers_the_new_turn(void **state)
{
    struct env v = {0};
    env_open(&v, 64, 1000);
    json_t *msgs = json_array(), *tid = json_integer(5);
    struct memory_rec_params p = {
        .tenant = "t", .session_id = "n", .profile = "default", .messages = msgs, .turn_id = tid};
    add(msgs, "assistant", "hi there", -1);
    add(msgs, "user", "hello", -1);
    exchange_as(&v, &p, "a5", NULL);
    add(msgs, "assistant", "a5", -1);
    add(msgs, "user", "more", -1);
    json_integer_set(tid, 6);
    exchange_as(&v, &p, "a6", NULL);
    char *got = rows(&v, "n");
    assert_string_equal(got, "1|assistant|hi there|0\n5|user|hello|0\n5|assistant|a5|0\n"
                             "6|user|more|0\n6|assistant|a6|0\n");
    free(got);
    json_decref(tid);
    json_decref(msgs);
    env_close(&v);
}

static int64_t pending(struct env *v)
{
    struct memory_stats st;
    memory_stats(v->m, &st);
    return st.replies_pending;
}

/* The store's count of replies on their way (what its group commit waits for) follows each
 * recorded request: up when its transfer starts, down when its reply is written or when it
 * ends without one (an upstream that failed). */
static void test_replies_pending(void **state)
{
    struct env v = {0};
    env_open(&v, 64, 1000);
    json_t *msgs = json_array();
    add(msgs, "user", "hello", 1);
    struct memory_rec_params p = {
        .tenant = "t", .session_id = "p", .profile = "default", .messages = msgs};
    struct memory_rec *a = memory_rec_new(v.rd, &p), *b = memory_rec_new(v.rd, &p);
    assert_int_equal(pending(&v), 0);
    memory_rec_request(a);
    memory_rec_request(a); /* once per request */
    memory_rec_request(b);
    assert_int_equal(pending(&v), 2);
    struct memory_reply r = {.content = "hi", .finish_reason = "stop"};
    memory_rec_reply(a, &r, NULL, NULL, NULL);
    assert_int_equal(pending(&v), 1);
    memory_rec_free(b); /* no reply */
    assert_int_equal(pending(&v), 0);
    memory_rec_free(a);
    assert_int_equal(pending(&v), 0);
    memory_drain(v.m);
    json_decref(msgs);
    env_close(&v);
}

/* The contents of the session's turns in the working set, joined by commas. */
static char *working_set(struct env *v, const char *sid)
{
    struct memory_rec_params p = {.tenant = "t", .session_id = sid, .profile = "default"};
    struct memory_rec *rec = memory_rec_new(v->rd, &p);
    struct memory_context ctx = {0};
    memory_rec_context(rec, 1, &ctx);
    memory_rec_free(rec);
    char *out = xstrdup("");
    size_t i;
    json_t *t;
    json_array_foreach(ctx.history, i, t) {
        char *n = xasprintf("%s%s%s", out, i ? "," : "",
                            json_string_value(json_object_get(t, "content")));
        free(out);
        out = n;
    }
    json_decref(ctx.history);
    json_decref(ctx.inject);
    json_decref(ctx.params);
    json_decref(ctx.user_info);
    return out;
}

/* A session's entry keeps its newest memory.session_turns turns, in order, both when a long
 * window arrives at once and when each exchange adds one turn or two; the database keeps
 * them all, once. */
static void test_working_set_keeps_newest(void **state)
{
    struct env v = {0};
    env_open(&v, 8, 1000);
    json_t *msgs = json_array();
    char text[64];
    for (int t = 0; t < 10; t++) {
        snprintf(text, sizeof(text), "q%d", t);
        add(msgs, "user", text, -1);
        if (t < 9) {
            snprintf(text, sizeof(text), "a%d", t);
            add(msgs, "assistant", text, -1);
        }
    }
    exchange(&v, "w", msgs, "a9"); /* 20 turns at once */
    char *got = working_set(&v, "w");
    assert_string_equal(got, "q6,a6,q7,a7,q8,a8,q9,a9");
    free(got);
    add(msgs, "assistant", "a9", -1);
    converse(&v, "w", msgs, 10, 13); /* one turn over at each request and each reply */
    got = working_set(&v, "w");
    assert_string_equal(got, "q9,a9,q10,a10,q11,a11,q12,a12");
    free(got);
    struct memory_stats st;
    memory_stats(v.m, &st);
    assert_int_equal(st.turns, 8);
    got = rows(&v, "w");
    char want[1024];
    converse_rows(want, sizeof(want), 13);
    assert_string_equal(got, want);
    free(got);
    json_decref(msgs);
    env_close(&v);
}

/* A call as Agora sends it: a window of the last few items, one turn further each request,
 * much longer than the working set keeps. Every turn is recorded once, in order; an
 * interruption the window reports for the previous reply updates that row; a turn whose
 * reply is a tool call, the tool's result and a second reply numbers its two replies. */
static void test_sliding_window_call(void **state)
{
    struct env v = {0};
    env_open(&v, 6, 1000);
    json_t *all = json_array();
    char text[64];
    for (int t = 1; t <= 40; t++) {
        snprintf(text, sizeof(text), "q%d", t);
        add(all, "user", text, t);
        if (t == 30) { /* the reply before was cut short: the caller heard "a29" */
            json_t *a29 = json_array_get(all, json_array_size(all) - 2);
            json_object_set_new(a29, "content", json_string("a29"));
            json_object_set_new(a29, "metadata", json_pack("{s:b}", "interrupted", 1));
        }
        if (t == 35) { /* the model called a tool, whose result came back, in turn 35 */
            add(all, "assistant", "looking it up", t);
            add(all, "tool", "42", t);
        }
        size_t n = json_array_size(all), from = n > 5 ? n - 5 : 0;
        json_t *window = json_array();
        for (size_t i = from; i < n; i++)
            json_array_append(window, json_array_get(all, i));
        snprintf(text, sizeof(text), "a%d long answer", t);
        exchange(&v, "call", window, text);
        json_decref(window);
        add(all, "assistant", text, t);
    }
    char *got = rows(&v, "call");
    assert_non_null(strstr(got, "28|assistant|a28 long answer|0\n29|user|q29|0\n"
                                "29|assistant|a29|1\n30|user|q30|0\n"));
    assert_non_null(strstr(got, "35|user|q35|0\n35|assistant|looking it up|0\n35|tool|42|0\n"
                                "35|assistant|a35 long answer|0\n36|user|q36|0\n"));
    assert_non_null(strstr(got, "40|user|q40|0\n40|assistant|a40 long answer|0\n"));
    assert_int_equal(lines_of(got), 82);
    free(got);
    got = working_set(&v, "call"); /* nothing doubled there either */
    assert_string_equal(got, "q38,a38 long answer,q39,a39 long answer,q40,a40 long answer");
    free(got);
    got = query(&v,
                "SELECT m.role, m.turn_idx FROM messages m JOIN sessions s ON s.sid = m.sid "
                "WHERE s.id = ?1 AND m.turn_id = ?2 ORDER BY m.seq",
                "call", 35);
    assert_string_equal(got, "user|0\nassistant|0\ntool|0\nassistant|1\n");
    free(got);
    json_decref(all);
    env_close(&v);
}

/* What a window writes for its session: the client's system messages when they change (in
 * the session's row); the window's fingerprint (in session_windows, not the row) only in
 * alignment mode (no turn ids), where it keeps a replay after a restart from being matched
 * as new turns. A turn-id call writes neither on every request. */
static char *session_row(struct env *v, const char *sid)
{
    return query(v,
                 "SELECT (SELECT hash FROM session_windows w WHERE w.sid = s.sid), "
                 "system_messages FROM sessions s WHERE id = ?1",
                 sid, 0);
}

static void window_of(json_t *msgs, const char *system, int t, int turn_ids)
{
    char text[64];
    json_array_clear(msgs);
    add(msgs, "system", system, -1);
    for (int i = 1; i <= t; i++) {
        snprintf(text, sizeof(text), "q%d", i);
        add(msgs, "user", text, turn_ids ? i : -1);
        if (i < t) {
            snprintf(text, sizeof(text), "a%d", i);
            add(msgs, "assistant", text, turn_ids ? i : -1);
        }
    }
}

static void test_session_row_writes(void **state)
{
    struct env v = {0};
    env_open(&v, 256, 1000);
    json_t *msgs = json_array();
    char text[64], *first = NULL, *got;
    for (int t = 1; t <= 4; t++) {
        window_of(msgs, t < 4 ? "Be brief." : "Be kind.", t, 1);
        snprintf(text, sizeof(text), "a%d", t);
        exchange(&v, "ids", msgs, text);
        got = session_row(&v, "ids");
        if (t == 1)
            first = xstrdup(got);
        else if (t < 4)
            assert_string_equal(got, first); /* the same system message: row untouched */
        free(got);
    }
    got = session_row(&v, "ids");
    assert_non_null(strstr(got, "Be kind.")); /* a change is written */
    free(got);
    free(first);
    first = NULL;
    for (int t = 1; t <= 3; t++) {
        window_of(msgs, "Be brief.", t, 0);
        snprintf(text, sizeof(text), "a%d", t);
        exchange(&v, "plain", msgs, text);
        got = session_row(&v, "plain");
        assert_true(first == NULL || strcmp(got, first) != 0); /* each fingerprint kept */
        free(first);
        first = got;
    }
    free(first);
    json_decref(msgs);
    env_close(&v);
}

int main(void)
{
    evthread_use_pthreads(); /* completions arrive from the writer thread */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evicted_session_reloads),
        cmocka_unit_test(test_window_older_than_working_set),
        cmocka_unit_test(test_window_reaching_back_reads_its_span),
        cmocka_unit_test(test_retry_replaces_reply),
        cmocka_unit_test(test_stored_mode_turn_ids),
        cmocka_unit_test(test_stored_mode_heard),
        cmocka_unit_test(test_stored_mode_heard_sent_again),
        cmocka_unit_test(test_reply_recorded_after_its_heard_part),
        cmocka_unit_test(test_request_turn_id_numbers_the_new_turn),
        cmocka_unit_test(test_replies_pending),
        cmocka_unit_test(test_no_read_over_turns_in_flight),
        cmocka_unit_test(test_working_set_keeps_newest),
        cmocka_unit_test(test_sliding_window_call),
        cmocka_unit_test(test_session_row_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
