/* Unit tests: the memo of objects read before (config/jmemo.c, jtext_load_memo). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "jmemo.h"
#include "jtext.h"

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
        cmocka_unit_test(test_errors_say_where),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_no_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
