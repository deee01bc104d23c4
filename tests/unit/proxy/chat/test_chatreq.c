/* Unit tests: chat request validation and the upstream body (proxy/chatreq.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proxy/chat/chatreq.h"

#include <string.h>

static const struct chatreq_opts lim = {.max_depth = 16, .max_messages = 4};

static int parse(const char *body, struct chatreq *r, struct apierr *e)
{
    return chatreq_parse(body, strlen(body), &lim, r, e);
}

static void expect_error(const char *body, enum apierr_kind kind, const char *param)
{
    struct chatreq r;
    struct apierr e;
    assert_int_equal(parse(body, &r, &e), -1);
    assert_int_equal(e.kind, kind);
    assert_string_equal(e.param, param);
    assert_true(strlen(e.message) > 0);
    assert_null(r.body);
}

static void test_valid_request(void **state)
{
    struct chatreq r;
    struct apierr e;
    const char *body =
        "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"profile\":\"p1\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}";
    assert_int_equal(parse(body, &r, &e), 0);
    assert_true(r.stream);
    assert_true(r.include_usage);
    assert_string_equal(r.profile, "p1");
    assert_int_equal(json_array_size(r.messages), 3);
    chatreq_clear(&r);
}

static void test_invalid_requests(void **state)
{
    expect_error("{bad", APIERR_INVALID_JSON, "");
    expect_error("", APIERR_INVALID_JSON, "");
    expect_error("[]", APIERR_INVALID_REQUEST, "");
    expect_error("{}", APIERR_INVALID_REQUEST, "messages");
    expect_error("{\"messages\":{}}", APIERR_INVALID_REQUEST, "messages");
    expect_error("{\"messages\":[]}", APIERR_INVALID_REQUEST, "messages");
    expect_error("{\"messages\":[1]}", APIERR_INVALID_REQUEST, "messages[0]");
    expect_error("{\"messages\":[{\"content\":\"x\"}]}", APIERR_INVALID_REQUEST,
                 "messages[0].role");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"bot\","
                 "\"content\":\"x\"}]}",
                 APIERR_INVALID_REQUEST, "messages[1].role");
    expect_error("{\"messages\":[{\"role\":\"user\"}]}", APIERR_INVALID_REQUEST,
                 "messages[0].content");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":{}}]}", APIERR_INVALID_REQUEST,
                 "messages[0].content");
    expect_error("{\"model\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 APIERR_INVALID_REQUEST, "model");
    expect_error("{\"stream\":\"yes\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 APIERR_INVALID_REQUEST, "stream");
    expect_error("{\"stream_options\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 APIERR_INVALID_REQUEST, "stream_options");
    expect_error("{\"profile\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 APIERR_INVALID_REQUEST, "profile");
    expect_error("{\"a\":1,\"a\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                 APIERR_INVALID_JSON, "");
}

static void test_limits(void **state)
{
    char deep[128] = "{\"messages\":";
    for (int i = 0; i < 20; i++)
        strcat(deep, "[");
    expect_error(deep, APIERR_INVALID_JSON, "");
    const char *five =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"1\"},"
        "{\"role\":\"user\",\"content\":\"2\"},{\"role\":\"user\",\"content\":\"3\"},"
        "{\"role\":\"user\",\"content\":\"4\"},{\"role\":\"user\",\"content\":\"5\"}]}";
    expect_error(five, APIERR_INVALID_REQUEST, "messages");
}

/* A body of n nested arrays in "messages"' first message's content, closed properly. */
static char *nested_body(int n)
{
    char *b = malloc(64 + 2 * (size_t)n + 64);
    strcpy(b, "{\"messages\":[{\"role\":\"user\",\"content\":\"[[[[\",\"x\":");
    size_t at = strlen(b);
    for (int i = 0; i < n - 3; i++) /* the body object, messages and the message: 3 levels */
        b[at++] = '[';
    for (int i = 0; i < n - 3; i++)
        b[at++] = ']';
    strcpy(b + at, "}]}");
    return b;
}

static void test_depth_is_checked_while_reading(void **state)
{
    struct chatreq r;
    struct apierr e;
    char *ok = nested_body(16), *deep = nested_body(17);
    assert_int_equal(parse(ok, &r, &e), 0); /* lim.max_depth is 16; the string's [ count not */
    chatreq_clear(&r);
    assert_int_equal(parse(deep, &r, &e), -1);
    assert_int_equal(e.kind, APIERR_INVALID_JSON);
    assert_string_equal(e.message, "the body is nested deeper than 16 levels");
    assert_null(r.body);
    deep[strlen(deep) - 1] = ','; /* broken after the deep part: still the depth */
    assert_int_equal(parse(deep, &r, &e), -1);
    assert_string_equal(e.message, "the body is nested deeper than 16 levels");
    assert_int_equal(parse("{\"messages\":[}", &r, &e), -1);
    assert_string_equal(e.message, "the body is not valid JSON (line 1, column 14: invalid token)");
    /* valid JSON to most encoders, refused by memproxy's reader: the message says why */
    assert_int_equal(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000\"}]}", &r, &e),
                     -1);
    assert_int_equal(e.kind, APIERR_INVALID_JSON);
    assert_string_equal(e.message,
                        "the body is not valid JSON (line 1, column 41: \\u0000 is not allowed)");
    assert_int_equal(parse("{\"messages\":[],\"messages\":[]}", &r, &e), -1);
    assert_string_equal(e.message,
                        "the body is not valid JSON (line 1, column 29: duplicate object key)");
    free(ok);
    free(deep);
}

static json_t *upstream_json(const char *body, const char *model)
{
    struct chatreq r;
    struct apierr e;
    size_t len = 0;
    assert_int_equal(parse(body, &r, &e), 0);
    char *s = chatreq_upstream_body(&r, model, &len);
    assert_int_equal(strlen(s), len);
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    chatreq_clear(&r);
    assert_non_null(j);
    return j;
}

static void test_upstream_body(void **state)
{
    json_t *j = upstream_json("{\"model\":\"m\",\"profile\":\"p\",\"temperature\":0.5,"
                              "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                              NULL);
    assert_null(json_object_get(j, "profile"));
    assert_string_equal(json_string_value(json_object_get(j, "model")), "m");
    assert_true(json_real_value(json_object_get(j, "temperature")) == 0.5);
    assert_null(json_object_get(j, "stream_options")); /* not a stream: untouched */
    json_decref(j);

    j = upstream_json("{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"x\":1},"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                      "forced");
    assert_string_equal(json_string_value(json_object_get(j, "model")), "forced");
    json_t *opts = json_object_get(j, "stream_options");
    assert_true(json_is_true(json_object_get(opts, "include_usage")));
    assert_int_equal(json_integer_value(json_object_get(opts, "x")), 1);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_request), cmocka_unit_test(test_invalid_requests),
        cmocka_unit_test(test_limits),        cmocka_unit_test(test_depth_is_checked_while_reading),
        cmocka_unit_test(test_upstream_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
