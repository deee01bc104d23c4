/* Unit tests: the JSON text reader and writer (config/jtext.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/jtext.h"

#include <stdlib.h>
#include <string.h>

static json_t *load(const char *text, size_t flags, json_error_t *err)
{
    return jtext_load(text, strlen(text), flags, err);
}

/* text is refused, with the error at line:column. */
static void expect_refused(const char *text, size_t flags, int line, int column)
{
    json_error_t err;
    assert_null(load(text, flags, &err));
    assert_true(strlen(err.text) > 0);
    assert_int_equal(err.line, line);
    assert_int_equal(err.column, column);
}

/* text is read and written back as want. */
static void expect_round_trip(const char *text, const char *want)
{
    json_error_t err;
    size_t len = 0;
    json_t *j = load(text, 0, &err);
    assert_non_null(j);
    char *out = jtext_dump(j, &len);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    free(out);
    json_decref(j);
}

static void test_reads_a_chat_request(void **state)
{
    json_t *j = load("{\"model\": \"m\",\n \"messages\": [{\"role\": \"user\", \"content\": "
                     "\"caf\\u00e9 \\ud83d\\ude00\", \"turn_id\": 3}], \"temperature\": 0.5}",
                     JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(j);
    json_t *m = json_array_get(json_object_get(j, "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "content")),
                        "caf\xc3\xa9 \xf0\x9f\x98\x80");
    assert_int_equal(json_integer_value(json_object_get(m, "turn_id")), 3);
    assert_true(json_is_real(json_object_get(j, "temperature")));
    const char *keys[] = {"model", "messages", "temperature"}, *k;
    size_t i = 0;
    json_t *v;
    json_object_foreach(j, k, v)
        assert_string_equal(k, keys[i++]); /* insertion order */
    json_decref(j);
}

static void test_numbers(void **state)
{
    json_t *j = load("[9223372036854775807, -9223372036854775808, -0, 1e2, 2.5E-1]", 0, NULL);
    assert_non_null(j);
    assert_true(json_integer_value(json_array_get(j, 0)) == INT64_MAX);
    assert_true(json_integer_value(json_array_get(j, 1)) == INT64_MIN);
    assert_true(json_is_integer(json_array_get(j, 2)));
    assert_true(json_real_value(json_array_get(j, 3)) == 100.0);
    assert_true(json_real_value(json_array_get(j, 4)) == 0.25);
    json_decref(j);
    expect_refused("[9223372036854775808]", 0, 1, 2);
    expect_refused("[-9223372036854775809]", 0, 1, 2);
    expect_refused("[1e999]", 0, 1, 2);
    expect_refused("[01]", 0, 1, 2);
    expect_refused("[1.]", 0, 1, 2);
    expect_refused("[.5]", 0, 1, 2);
    expect_refused("[1e+]", 0, 1, 2);
    expect_refused("[-]", 0, 1, 2);
}

static void test_refusals_say_where(void **state)
{
    expect_refused("", 0, 1, 1);
    expect_refused("  \"scalar\"", 0, 1, 3);
    expect_refused("{\"a\": 1,\n \"b\" 2}", 0, 2, 6);
    expect_refused("{\"a\": 1} x", 0, 1, 10);
    expect_refused("[\"\xc3\xa9\", \"\xc3\x28\"]", 0, 1, 8); /* invalid UTF-8 */
    expect_refused("[\"\xc0\xaf\"]", 0, 1, 3);               /* overlong */
    expect_refused("[\"\xed\xa0\x80\"]", 0, 1, 3);           /* an encoded surrogate */
    expect_refused("[\"a\tb\"]", 0, 1, 4);                   /* a raw control character */
    expect_refused("[\"\\x\"]", 0, 1, 3);                    /* an unknown escape */
    expect_refused("[\"\\ud800\"]", 0, 1, 3);                /* a lone high surrogate */
    expect_refused("[\"\\udc00\"]", 0, 1, 3);                /* a lone low surrogate */
    expect_refused("[\"a\\u0000\"]", 0, 1, 4);               /* NUL */
    expect_refused("{\"a\\u0000\": 1}", 0, 1, 4);            /* NUL in a key */
    expect_refused("[\"open", 0, 1, 7);
    expect_refused("[true false]", 0, 1, 7);
    expect_refused("[truex]", 0, 1, 2);
    expect_refused("[nul]", 0, 1, 2);
    expect_refused("[1,]", 0, 1, 4);
    expect_refused("{\"a\":1,}", 0, 1, 8);
    expect_refused("{1:2}", 0, 1, 2);
}

static void test_flags(void **state)
{
    json_t *j = load("{\"a\": 1, \"a\": 2}", 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "a")), 2); /* the last one wins */
    json_decref(j);
    expect_refused("{\"a\": 1, \"a\": 2}", JSON_REJECT_DUPLICATES, 1, 16);
    j = load(" 42 ", JSON_DECODE_ANY, NULL);
    assert_int_equal(json_integer_value(j), 42);
    json_decref(j);
}

static void test_depth_is_capped(void **state)
{
    size_t n = JTEXT_MAX_DEPTH + 1;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    json_error_t err;
    assert_null(load(deep, 0, &err));
    assert_string_equal(err.text, "maximum parsing depth reached");
    deep[n - 1] = deep[n] = ' '; /* one level less: read */
    json_t *j = load(deep, 0, NULL);
    assert_non_null(j);
    json_decref(j);
    free(deep);
}

static void test_nesting_cap(void **state)
{
    json_error_t err;
    json_t *j = jtext_load_nested("[[], {\"a\": [\"[[[\"]}]", 20, 0, 3, &err);
    assert_non_null(j); /* three levels; brackets in strings are text */
    json_decref(j);
    assert_null(jtext_load_nested("[[], {\"a\": [[1]]}]", 18, 0, 3, &err));
    assert_string_equal(err.text, "maximum parsing depth reached");
    assert_int_equal(json_error_code(&err), json_error_stack_overflow);
    assert_int_equal(err.position, 12);                   /* at the fourth level's bracket */
    assert_null(jtext_load_nested("[[]", 3, 0, 3, &err)); /* any other failure: no code */
    assert_int_equal(json_error_code(&err), json_error_unknown);
    j = jtext_load_nested("7", 1, JSON_DECODE_ANY, 0, &err); /* a scalar nests nothing */
    assert_int_equal(json_integer_value(j), 7);
    json_decref(j);
}

static void test_depth_ignores_brackets_in_strings(void **state)
{
    const char *s = "{\"a\":\"[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[[[[[\"}";
    assert_false(jtext_too_deep(s, strlen(s), 2));
    assert_true(jtext_too_deep("[[[", 3, 2));
    assert_false(jtext_too_deep("[[]]", 4, 2));
    /* escaped backslashes before a quote: the string ends there */
    const char *t = "[\"a\\\\\",[[\"x\\\\\\\"[[[\"]";
    assert_true(jtext_too_deep(t, strlen(t), 2));
    assert_false(jtext_too_deep(t, strlen(t), 3));
    assert_false(jtext_too_deep("\"[[[", 4, 0)); /* an unterminated string */
}

/* The scan takes 64 bytes a block: an escape or a string may fall across a block's edge at
 * any offset, and must not be mistaken for one that ends there. */
static void test_depth_across_blocks(void **state)
{
    char buf[512];
    for (int k = 0; k < 200; k++) {
        /* an escaped quote, then brackets still inside the string; nests 3 deep after it */
        snprintf(buf, sizeof(buf), "[\"%*s\\\"[[[[\",[[]]]", k, "");
        assert_true(jtext_too_deep(buf, strlen(buf), 2));
        assert_false(jtext_too_deep(buf, strlen(buf), 3));
        /* an escaped backslash, then the closing quote: the brackets after it count */
        snprintf(buf, sizeof(buf), "[\"%*s\\\\\",[[[]]]]", k, "");
        assert_true(jtext_too_deep(buf, strlen(buf), 3));
        assert_false(jtext_too_deep(buf, strlen(buf), 4));
        /* a long string with a bracket in it, ending past the block its quote opened */
        snprintf(buf, sizeof(buf), "[%*s\"[%*s\",[]]", k % 70, "", k, "");
        assert_false(jtext_too_deep(buf, strlen(buf), 2));
        assert_true(jtext_too_deep(buf, strlen(buf), 1));
    }
}

static void test_writes_what_jansson_writes(void **state)
{
    expect_round_trip("{ \"b\" : [ 1 , -2 , true , false , null ] , \"a\" : { } , \"c\" : [ ] }",
                      "{\"b\":[1,-2,true,false,null],\"a\":{},\"c\":[]}");
    expect_round_trip("[\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u0001\\u001F \\u00e9 \x7f\"]",
                      "[\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t \\u0001\\u001F \xc3\xa9 \x7f\"]");
    expect_round_trip("[0.1, 1.0, 1e16, 1e17, 1e300, 1e-7, -0.0, 0.0001]",
                      "[0.10000000000000001,1.0,10000000000000000.0,1e17,"
                      "1.0000000000000001e300,9.9999999999999995e-8,-0.0,0.0001]");
    json_t *s = json_stringn_nocheck("\xc3", 1); /* not UTF-8: jansson refuses it too */
    assert_null(jtext_dump(s, NULL));
    json_decref(s);
    json_t *i = json_integer(INT64_MIN);
    char *out = jtext_dump(i, NULL);
    assert_string_equal(out, "-9223372036854775808");
    free(out);
    json_decref(i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_a_chat_request),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_refusals_say_where),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_depth_is_capped),
        cmocka_unit_test(test_nesting_cap),
        cmocka_unit_test(test_depth_ignores_brackets_in_strings),
        cmocka_unit_test(test_depth_across_blocks),
        cmocka_unit_test(test_writes_what_jansson_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
