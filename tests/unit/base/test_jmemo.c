/* Unit tests: the memo of objects read before (config/jmemo.c, jtext_load_memo). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/jmemo.h"
#include "base/jsize.h"
#include "base/jtext.h"

#include <stdlib.h>
#include <string.h>

#define FLAGS JSON_REJECT_DUPLICATES

static const char window1[] =
    "{\"model\":\"m\",\"messages\":["
    "{\"role\":\"user\",\"content\":\"hello\",\"turn_id\":1,\"metadata\":{\"source\":\"asr\"}},"
    "{\"role\":\"assistant\",\"content\":\"hi, how can I help?\",\"turn_id\":1}]}";
/* the next turn: the same two messages, byte for byte, and a new one */
static const char window2[] =
    "{\"model\":\"m\",\"messages\":["
    "{\"role\":\"user\",\"content\":\"hello\",\"turn_id\":1,\"metadata\":{\"source\":\"asr\"}},"
    "{\"role\":\"assistant\",\"content\":\"hi, how can I help?\",\"turn_id\":1},"
    "{\"role\":\"user\",\"content\":\"book a table\",\"turn_id\":2}]}";

static json_t *load(struct jmemo *m, const char *text, uint64_t seed, size_t nest,
                    json_error_t *err)
{
    return jtext_load_memo(text, strlen(text), FLAGS, nest, m, seed, err);
}

static json_t *message(json_t *body, size_t i)
{
    return json_array_get(json_object_get(body, "messages"), i);
}

static void test_a_resent_window_shares_its_messages(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    struct jmemo_stats st;
    json_t *a = load(m, window1, 7, 64, NULL), *b = load(m, window2, 7, 64, NULL);
    json_t *plain = jtext_load(window2, strlen(window2), FLAGS, NULL);
    assert_true(json_equal(b, plain));
    assert_ptr_equal(message(a, 0), message(b, 0)); /* the same tree, not read again */
    assert_ptr_equal(message(a, 1), message(b, 1));
    jmemo_stats(m, &st);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.misses, 3);
    assert_int_equal(st.entries, 3);
    /* what the memo hands out outlives the request that read it */
    json_decref(a);
    json_decref(b);
    json_t *c = load(m, window2, 7, 64, NULL);
    assert_true(json_equal(c, plain));
    json_decref(c);
    json_decref(plain);
    jmemo_destroy(m);
}

static void test_tenants_and_flags_are_kept_apart(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    struct jmemo_stats st;
    json_t *a = load(m, window1, 1, 64, NULL), *b = load(m, window1, 2, 64, NULL);
    assert_ptr_not_equal(message(a, 0), message(b, 0));
    json_t *c = jtext_load_memo(window1, strlen(window1), 0, 64, m, 1, NULL);
    assert_ptr_not_equal(message(a, 0), message(c, 0));
    jmemo_stats(m, &st);
    assert_int_equal(st.hits, 0);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    jmemo_destroy(m);
}

static void test_one_byte_apart_is_not_the_same(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    json_t *a = load(m, window1, 0, 64, NULL);
    char *other = strdup(window1);
    *strstr(other, "hello") = 'j'; /* same length, same hash bucket or not: compared in full */
    json_t *b = load(m, other, 0, 64, NULL);
    assert_string_equal(json_string_value(json_object_get(message(b, 0), "content")), "jello");
    assert_ptr_equal(message(a, 1), message(b, 1));
    json_decref(a);
    json_decref(b);
    free(other);
    jmemo_destroy(m);
}

/* A message kept under a high cap is still refused under a lower one, as jtext says. */
static void test_caps_hold_for_kept_messages(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    json_error_t err;
    json_t *a = load(m, window1, 0, 64, NULL); /* metadata: nested 4 deep in the body */
    assert_non_null(a);
    assert_null(load(m, window1, 0, 3, &err));
    assert_int_equal(json_error_code(&err), json_error_stack_overflow);
    json_decref(a);
    jmemo_destroy(m);
}

/* "{"messages":[...]}" of n of msgs, in the order idx gives; the caller frees it. */
static char *window_of(const char *const *msgs, const int *idx, size_t n)
{
    size_t len = 32;
    for (size_t i = 0; i < n; i++)
        len += strlen(msgs[idx[i]]) + 1;
    char *w = malloc(len);
    strcpy(w, "{\"messages\":[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            strcat(w, ",");
        strcat(w, msgs[idx[i]]);
    }
    strcat(w, "]}");
    return w;
}

/* Read w with the memo: the same tree as without it (or the same refusal). */
static json_t *load_checked(struct jmemo *m, const char *w, size_t nest)
{
    json_error_t e1, e2;
    json_t *plain = jtext_load_nested(w, strlen(w), FLAGS, nest, &e1);
    json_t *v = load(m, w, 0, nest, &e2);
    assert_int_equal(v == NULL, plain == NULL);
    if (v != NULL)
        assert_true(json_equal(v, plain));
    else
        assert_int_equal(json_error_code(&e2), json_error_code(&e1));
    json_decref(plain);
    return v;
}

/* A resent window is found message after message by what followed each the last time
 * (jmemo_next); a window whose order or messages changed is read as it would be without the
 * memo, and so is one whose next message the caps refuse. */
static void test_successors(void **state)
{
    static const char *const msgs[] = {
        "{\"role\":\"system\",\"content\":\"be brief\"}",
        "{\"role\":\"user\",\"content\":\"hello\"}",
        "{\"role\":\"assistant\",\"content\":\"hi\",\"metadata\":{\"source\":{\"x\":1}}}",
        "{\"role\":\"user\",\"content\":\"hello!\"}", /* msgs[1] but for its last bytes */
    };
    struct jmemo *m = jmemo_create(1024 * 1024);
    struct jmemo_stats st;
    char *w = window_of(msgs, (const int[]){0, 1, 2}, 3);
    json_t *a = load_checked(m, w, 64), *b = load_checked(m, w, 64);
    jmemo_stats(m, &st);
    assert_int_equal(st.misses, 3);
    assert_int_equal(st.hits, 3);
    for (size_t i = 0; i < 3; i++)
        assert_ptr_equal(message(a, i), message(b, i));
    assert_null(load_checked(m, w, 4)); /* msgs[2], found as msgs[1]'s successor, is too deep */
    free(w);
    int orders[][3] = {{0, 2, 1}, {0, 3, 2}, {1, 0, 2}, {0, 1, 2}, {0, 1, 3}, {2, 1, 0}};
    for (size_t k = 0; k < sizeof(orders) / sizeof(orders[0]); k++) {
        w = window_of(msgs, orders[k], 3);
        json_decref(load_checked(m, w, 64));
        free(w);
    }
    w = window_of(msgs, (const int[]){0, 1, 3}, 3);
    json_t *c = load_checked(m, w, 64);
    assert_string_equal(json_string_value(json_object_get(message(c, 2), "content")), "hello!");
    json_decref(a);
    json_decref(b);
    json_decref(c);
    free(w);
    jmemo_destroy(m);
}

/* An error after kept messages is reported where it is, as without the memo. */
static void test_errors_say_where(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    json_error_t err;
    json_t *a = load(m, window1, 0, 64, NULL);
    char *broken = strdup(window2);
    broken[strlen(broken) - 3] = '\x01'; /* the last message's closing brace */
    assert_null(load(m, broken, 0, 64, &err));
    json_error_t want;
    assert_null(jtext_load(broken, strlen(broken), FLAGS, &want));
    assert_int_equal(err.line, want.line);
    assert_int_equal(err.column, want.column);
    assert_string_equal(err.text, want.text);
    json_decref(a);
    free(broken);
    jmemo_destroy(m);
}

/* The budget holds: the oldest go first, and a text too large for it is not kept. */
static void test_budget(void **state)
{
    struct jmemo *m = jmemo_create(16 * 1024);
    struct jmemo_stats st;
    char body[512];
    for (int i = 0; i < 200; i++) {
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"message number %d\"}]}", i);
        json_decref(load(m, body, 0, 64, NULL));
        jmemo_stats(m, &st);
        assert_true(st.bytes <= 16 * 1024);
    }
    assert_true(st.evictions > 0);
    assert_int_equal(st.entries + st.evictions, 200);
    /* the newest is still there, the first is gone */
    json_decref(load(m, body, 0, 64, NULL));
    snprintf(body, sizeof(body),
             "{\"messages\":[{\"role\":\"user\",\"content\":\"message number 0\"}]}");
    json_decref(load(m, body, 0, 64, NULL));
    jmemo_stats(m, &st);
    assert_int_equal(st.hits, 1);
    /* 16 KiB / 16 is the most one text may take */
    char *big = malloc(4096);
    snprintf(big, 4096, "{\"messages\":[{\"role\":\"user\",\"content\":\"%03000d\"}]}", 1);
    uint64_t before = st.entries + st.evictions;
    json_decref(load(m, big, 0, 64, NULL));
    jmemo_stats(m, &st);
    assert_int_equal(st.entries + st.evictions, before);
    free(big);
    jmemo_destroy(m);
}

/* A short text of many small values is a large tree: the budget counts the tree (jsize). */
static void test_budget_counts_the_tree_not_the_text(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024); /* one entry may take 64 KiB */
    struct jmemo_stats st;
    char *body = malloc(8192);
    strcpy(body, "{\"messages\":[{\"role\":\"user\",\"content\":[");
    for (int i = 0; i < 1500; i++) /* 4.5 KB of text, ~100 KB of tree */
        strcat(body, i ? ",[]" : "[]");
    strcat(body, "]}]}");
    json_t *j = load(m, body, 0, 64, NULL);
    assert_non_null(j);
    assert_true(jsize_tree(message(j, 0)) > 64 * 1500);
    json_decref(j);
    jmemo_stats(m, &st);
    assert_int_equal(st.entries, 0); /* not kept: its tree is over the entry cap */
    free(body);
    jmemo_destroy(m);
}

/* What is learned of a kept tree is found by its address, and only for the memo's trees. */
static void test_what_is_learned_is_kept(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    json_t *a = load(m, window1, 0, 64, NULL), *msg = message(a, 0);
    struct jmemo_tree *t = jmemo_find(m, msg);
    assert_non_null(t);
    assert_int_equal(*jmemo_note(t), 0);
    *jmemo_note(t) |= JMEMO_NOTE_CHECKED;
    json_t *d = json_pack("{s:s, s:s}", "role", "user", "content", "hello");
    assert_null(jmemo_derived(t));
    jmemo_set_derived(m, t, d);
    json_t *b = load(m, window1, 0, 64, NULL); /* the next request has the same tree */
    t = jmemo_find(m, message(b, 0));
    assert_int_equal(*jmemo_note(t), JMEMO_NOTE_CHECKED);
    assert_ptr_equal(jmemo_derived(t), d);
    struct jmemo_tree *dt = jmemo_find(m, d); /* a derived tree is the memo's too, */
    assert_non_null(dt);
    assert_null(jmemo_derived(dt)); /* with no derived tree of its own */
    json_t *dd = json_object();
    jmemo_set_derived(m, dt, dd);
    assert_null(jmemo_derived(dt));
    json_decref(dd);
    /* a tree that is not the memo's: nothing known, nothing kept */
    json_t *other = json_pack("{s:s}", "role", "user");
    assert_null(jmemo_find(m, other));
    assert_null(jmemo_note(jmemo_find(m, other)));
    assert_null(jmemo_find(NULL, msg));
    json_decref(other);
    json_decref(d);
    json_decref(a);
    json_decref(b);
    jmemo_destroy(m);
}

/* Texts: jtext_dump_memo writes what jtext_dump writes; a compact message's own bytes serve
 * as its text (nothing more counted), a spaced one's text is kept apart. */
static void test_texts(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    struct jmemo_stats st0, st1;
    const char *spaced = "{\"messages\": [ {\"role\": \"user\", \"content\": \"hello\"} ]}";
    json_t *a = load(m, window1, 0, 64, NULL), *b = load(m, spaced, 0, 64, NULL);
    jmemo_stats(m, &st0);
    char *want = jtext_dump(a, NULL), *got = jtext_dump_memo(a, m, NULL);
    assert_string_equal(got, want);
    jmemo_stats(m, &st1);
    assert_int_equal(st1.bytes, st0.bytes);
    size_t n;
    const char *text = jmemo_text(jmemo_find(m, message(a, 1)), &n);
    assert_non_null(text);
    assert_int_equal(n, strlen("{\"role\":\"assistant\",\"content\":\"hi, how can I help?\","
                               "\"turn_id\":1}"));
    free(want);
    free(got);
    want = jtext_dump(b, NULL);
    got = jtext_dump_memo(b, m, NULL);
    assert_string_equal(got, want);
    jmemo_stats(m, &st0);
    assert_int_equal(st0.bytes, st1.bytes + strlen("{\"role\":\"user\",\"content\":\"hello\"}"));
    free(got);
    got = jtext_dump_memo(b, m, NULL); /* now from the memo */
    assert_string_equal(got, want);
    free(want);
    free(got);
    json_decref(a);
    json_decref(b);
    jmemo_destroy(m);
}

/* A held tree (not read from text) is found by its address, never by its text. */
static void test_held_trees(void **state)
{
    struct jmemo *m = jmemo_create(1024 * 1024);
    struct jmemo_stats st;
    json_t *turn = json_pack("{s:s, s:s}", "role", "user", "content", "hello");
    jmemo_hold(m, turn, 10);
    jmemo_hold(m, turn, 10); /* once */
    jmemo_stats(m, &st);
    assert_int_equal(st.entries, 1);
    assert_non_null(jmemo_find(m, turn));
    json_t *a = load(m, "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}", 0, 64, NULL);
    assert_ptr_not_equal(message(a, 0), turn);
    json_decref(turn); /* the memo keeps it: its address stays its own */
    assert_string_equal(json_string_value(json_object_get(turn, "content")), "hello");
    /* its text, once written, counts as text and tree instead of the estimate */
    struct jmemo_stats before;
    jmemo_stats(m, &before);
    json_t *up = json_pack("{s:[O]}", "messages", turn);
    free(jtext_dump_memo(up, m, NULL));
    jmemo_stats(m, &st);
    size_t len = strlen("{\"role\":\"user\",\"content\":\"hello\"}");
    assert_int_equal(st.bytes, before.bytes + (len - 10) * (1 + JMEMO_TREE_FACTOR));
    size_t n;
    assert_non_null(jmemo_text(jmemo_find(m, turn), &n));
    assert_int_equal(n, len);
    /* a tree said to be larger than the largest text kept is not held */
    json_t *big = json_pack("{s:s}", "role", "user");
    jmemo_hold(m, big, 1024 * 1024);
    assert_null(jmemo_find(m, big));
    json_decref(big);
    json_decref(up);
    json_decref(a);
    jmemo_destroy(m);
}

static int aux_freed;
static void aux_free(void *p)
{
    aux_freed++;
    free(p);
}

/* A caller's attachment goes with its tree: one per tree, counted, freed when the entry goes
 * (or at once when there is nowhere to keep it). */
static void test_attachments(void **state)
{
    struct jmemo *m = jmemo_create(16 * 1024);
    struct jmemo_stats before, st;
    aux_freed = 0;
    json_t *a = load(m, "{\"messages\":[{\"role\":\"user\",\"content\":\"one\"}]}", 0, 64, NULL);
    struct jmemo_tree *t = jmemo_find(m, message(a, 0));
    assert_null(jmemo_aux(t));
    jmemo_stats(m, &before);
    int *x = malloc(sizeof(*x));
    *x = 42;
    jmemo_set_aux(m, t, x, 100, aux_free);
    jmemo_stats(m, &st);
    assert_int_equal(st.bytes, before.bytes + 100);
    assert_int_equal(*(int *)jmemo_aux(jmemo_find(m, message(a, 0))), 42);
    jmemo_set_aux(m, t, malloc(1), 1, aux_free); /* it has one: the new one is freed */
    assert_int_equal(aux_freed, 1);
    assert_int_equal(*(int *)jmemo_aux(t), 42);
    jmemo_set_aux(m, NULL, malloc(1), 1, aux_free);
    assert_int_equal(aux_freed, 2);
    json_t *kept = json_incref(message(a, 0));
    json_decref(a);
    for (int i = 0; aux_freed == 2 && i < 1000; i++) { /* others push its entry out */
        char text[96];
        snprintf(text, sizeof(text), "{\"messages\":[{\"role\":\"user\",\"content\":\"%d\"}]}", i);
        json_decref(load(m, text, 0, 64, NULL));
    }
    assert_int_equal(aux_freed, 3);
    assert_null(jmemo_find(m, kept));
    json_decref(kept);
    jmemo_destroy(m);
}

/* What is learned counts against the budget: entries go, oldest first, and a tree handed
 * out before its entry went stays its holder's. */
static void test_budget_counts_what_is_learned(void **state)
{
    struct jmemo *m = jmemo_create(16 * 1024);
    struct jmemo_stats st;
    char body[512];
    json_t *kept[100];
    for (int i = 0; i < 100; i++) {
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"role\":\"user\", \"content\":\"message number %d\"}]}", i);
        json_t *a = load(m, body, 0, 64, NULL);
        struct jmemo_tree *t = jmemo_find(m, message(a, 0));
        kept[i] = json_pack("{s:s}", "content", body);
        jmemo_set_derived(m, t, kept[i]);
        free(jtext_dump_memo(a, m, NULL));
        jmemo_stats(m, &st);
        assert_true(st.bytes <= 16 * 1024);
        json_decref(a);
    }
    assert_true(st.evictions > 0);
    assert_null(jmemo_find(m, kept[0]));
    for (int i = 0; i < 100; i++) {
        assert_non_null(strstr(json_string_value(json_object_get(kept[i], "content")), "number"));
        json_decref(kept[i]);
    }
    jmemo_destroy(m);
}

static void test_no_memo(void **state)
{
    assert_null(jmemo_create(0));
    json_t *a = load(NULL, window1, 0, 64, NULL);
    assert_non_null(a);
    json_decref(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_resent_window_shares_its_messages),
        cmocka_unit_test(test_tenants_and_flags_are_kept_apart),
        cmocka_unit_test(test_one_byte_apart_is_not_the_same),
        cmocka_unit_test(test_caps_hold_for_kept_messages),
        cmocka_unit_test(test_successors),
        cmocka_unit_test(test_errors_say_where),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_budget_counts_the_tree_not_the_text),
        cmocka_unit_test(test_what_is_learned_is_kept),
        cmocka_unit_test(test_texts),
        cmocka_unit_test(test_held_trees),
        cmocka_unit_test(test_attachments),
        cmocka_unit_test(test_budget_counts_what_is_learned),
        cmocka_unit_test(test_no_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
