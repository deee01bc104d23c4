/* Unit tests: session and user resolution, routing-field stripping (proxy/session.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proxy/chat/session.h"

#include <string.h>

static char *fields_v[] = {"channel"};
static const struct cfg_strlist fields = {.v = fields_v, .n = 1};

/* Resolve with body text; returns 0/-1 and fills ids (caller clears) or e. */
static int resolve(const char *hs, const char *hu, const char *query, const char *body_text,
                   struct session_ids *ids, struct apierr *e)
{
    json_t *body = json_loads(body_text, 0, NULL);
    assert_non_null(body);
    struct session_input in = {
        .h_session = hs, .h_user = hu, .query = query, .body = body, .id_fields = &fields};
    int rc = session_resolve(&in, ids, e);
    json_decref(body);
    return rc;
}

static void expect(const char *hs, const char *hu, const char *query, const char *body,
                   const char *want_sid, const char *want_user)
{
    struct session_ids ids;
    struct apierr e;
    assert_int_equal(resolve(hs, hu, query, body, &ids, &e), 0);
    if (want_sid)
        assert_string_equal(ids.session_id, want_sid);
    else
        assert_null(ids.session_id);
    if (want_user)
        assert_string_equal(ids.user_id, want_user);
    else
        assert_null(ids.user_id);
    session_ids_clear(&ids);
}

static void test_sources_in_order(void **state)
{
    const char *all = "{\"session_id\":\"body\",\"call\":{\"id\":\"vapi\"},\"channel\":\"ch\"}";
    expect("hdr", NULL, "session_id=q", all, "hdr", NULL);
    expect(NULL, NULL, "session_id=q", all, "q", NULL);
    expect(NULL, NULL, "x=1", all, "body", NULL);
    expect(NULL, NULL, NULL, "{\"call\":{\"id\":\"vapi\"},\"channel\":\"ch\"}", "vapi", NULL);
    expect(NULL, NULL, NULL, "{\"channel\":\"ch\"}", "ch", NULL);
    expect(NULL, NULL, NULL, "{\"channel\":null}", NULL, NULL);
    expect(NULL, NULL, NULL, "{}", NULL, NULL);
}

static void test_query_decoding_and_numbers(void **state)
{
    expect(NULL, NULL, "a=b&session_id=room%2042+x&c", "{}", "room 42 x", NULL);
    expect(NULL, NULL, "xsession_id=no&session_id=yes", "{}", "yes", NULL);
    expect(NULL, NULL, NULL, "{\"session_id\":42}", "42", NULL);
    expect(NULL, NULL, NULL, "{\"session_id\":\"s\",\"user_uid\":1002}", "s", "1002");
}

static void test_user_sources(void **state)
{
    const char *all = "{\"user_id\":\"uid\",\"user\":\"oai\",\"user_uid\":\"agora\"}";
    expect(NULL, "hdr", NULL, all, NULL, "hdr");
    expect(NULL, NULL, NULL, all, NULL, "uid");
    expect(NULL, NULL, NULL, "{\"user\":\"oai\",\"user_uid\":\"agora\"}", NULL, "oai");
    expect(NULL, NULL, NULL,
           "{\"messages\":[{\"role\":\"user\",\"content\":\"a\",\"metadata\":{\"user\":\"old\"}},"
           "{\"role\":\"assistant\",\"content\":\"b\"},"
           "{\"role\":\"user\",\"content\":\"c\",\"metadata\":{\"user\":\"latest\"}}]}",
           NULL, "latest");
}

static void expect_400(const char *hs, const char *query, const char *body, const char *param)
{
    struct session_ids ids;
    struct apierr e;
    assert_int_equal(resolve(hs, NULL, query, body, &ids, &e), -1);
    assert_int_equal(apierr_status(e.kind), 400);
    assert_string_equal(e.param, param);
    assert_null(ids.session_id);
}

static void test_bad_ids(void **state)
{
    char longq[400] = "session_id=";
    memset(longq + 11, 'x', 300);
    longq[311] = '\0';
    expect_400("", NULL, "{}", "X-Session-Id");
    expect_400("a\tb", NULL, "{}", "X-Session-Id");
    expect_400(NULL, "session_id=", "{}", "session_id");
    expect_400(NULL, "session_id=a%00b", "{}", "session_id");
    expect_400(NULL, longq, "{}", "session_id");
    expect_400(NULL, NULL, "{\"session_id\":{\"a\":1}}", "session_id");
    expect_400(NULL, NULL, "{\"session_id\":1.5}", "session_id");
    expect_400(NULL, NULL, "{\"call\":{\"id\":[]}}", "call.id");
    expect_400(NULL, NULL, "{\"channel\":true}", "channel");
    expect_400(NULL, NULL, "{\"session_id\":\"s\",\"user_id\":[1]}", "user_id");
}

static void test_strip(void **state)
{
    json_t *body = json_loads("{\"model\":\"m\",\"session_id\":\"s\",\"user_id\":\"u\","
                              "\"user_uid\":\"1\",\"user\":\"oai\",\"channel\":\"c\","
                              "\"call\":{\"id\":\"v\"},\"messages\":[]}",
                              0, NULL);
    session_strip(body, &fields);
    json_t *want = json_loads("{\"model\":\"m\",\"user\":\"oai\",\"messages\":[]}", 0, NULL);
    assert_true(json_equal(body, want));
    json_decref(body);
    json_decref(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sources_in_order),
        cmocka_unit_test(test_query_decoding_and_numbers),
        cmocka_unit_test(test_user_sources),
        cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_strip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
