/* Unit tests: the webhook wire format (proxy/webhook.c) — signatures against known HMAC
 * vectors, the dump body, the retry schedule, Agora notifications as read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proxy/jobs/webhook.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* RFC 2202 / RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?". */
static void test_sign_known_vectors(void **state)
{
    struct webhook_sig sig;
    const char *data = "what do ya want for nothing?";
    webhook_sign("Jefe", data, strlen(data), &sig);
    assert_string_equal(sig.sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
    assert_string_equal(sig.sha256,
                        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void test_verify(void **state)
{
    const char *data = "what do ya want for nothing?";
    size_t n = strlen(data);
    assert_true(webhook_verify("Jefe", data, n,
                               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
    assert_true(webhook_verify("Jefe", data, n,
                               "5BDCC146BF60754E6A042426089575C75A003F089D2739839DEC58B964EC3843"));
    assert_false(webhook_verify(
        "jefe", data, n, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
    assert_false(webhook_verify(
        "Jefe", data, n - 1, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
    assert_false(webhook_verify("Jefe", data, n, "5bdcc146"));
    assert_false(webhook_verify("Jefe", data, n, NULL));
}

static void test_body_mirrors_agora_event_103(void **state)
{
    char *b = webhook_body("abc:103", 103, 1763800190123LL, "room-42", "acme",
                           "{\"agent_id\":\"room-42\",\"contents\":[]}");
    json_t *j = json_loads(b, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "noticeId")), "abc:103");
    assert_int_equal(json_integer_value(json_object_get(j, "productId")), 17);
    assert_int_equal(json_integer_value(json_object_get(j, "eventType")), 103);
    assert_int_equal(json_integer_value(json_object_get(j, "notifyMs")), 1763800190123LL);
    assert_string_equal(json_string_value(json_object_get(j, "sid")), "room-42");
    assert_string_equal(json_string_value(json_object_get(j, "tenant")), "acme");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "payload"), "agent_id")), "room-42");
    json_decref(j);
    free(b);
    assert_null(webhook_body("x", 103, 1, "s", "t", "{not json"));
}

static void test_backoff_doubles_with_jitter_and_caps(void **state)
{
    /* jitter 0 = the lower half's end; the full random range stays in [d/2, d] */
    assert_int_equal(webhook_backoff_ms(1000, 600000, 1, 0), 500);
    assert_int_equal(webhook_backoff_ms(1000, 600000, 2, 0), 1000);
    assert_int_equal(webhook_backoff_ms(1000, 600000, 4, 0), 4000);
    assert_int_equal(webhook_backoff_ms(1000, 600000, 1, 500), 1000);
    assert_int_equal(webhook_backoff_ms(1000, 600000, 1, 501), 500);
    for (uint32_t r = 0; r < 5000; r += 97) {
        int64_t d = webhook_backoff_ms(1000, 600000, 3, r);
        assert_true(d >= 2000 && d <= 4000);
    }
    assert_int_equal(webhook_backoff_ms(1000, 5000, 30, 0), 2500);
    assert_int_equal(webhook_backoff_ms(1000, 5000, 1000000, 2500), 5000); /* no overflow */
}

static void test_parse_notice(void **state)
{
    struct webhook_notice n;
    char *err = NULL;
    const char *agora = "{\"noticeId\":\"1:2:102\",\"eventType\":102,\"payload\":{\"agent_id\":"
                        "\"A\",\"name\":\"room-42-agent\",\"channel\":\"room-42\",\"labels\":"
                        "{\"session_id\":\"s-1\"}}}";
    assert_int_equal(webhook_parse_notice(agora, strlen(agora), "channel", &n, &err), 0);
    assert_null(err);
    assert_int_equal(n.event, 102);
    assert_int_equal(n.nids, 3);
    assert_string_equal(n.ids[0], "s-1");
    assert_string_equal(n.ids[1], "room-42-agent");
    assert_string_equal(n.ids[2], "room-42");
    webhook_notice_clear(&n);
    /* no field configured, a repeated id, an id that is not one */
    const char *dup = "{\"eventType\":103,\"payload\":{\"name\":\"x\",\"labels\":{\"session_id\":"
                      "\"x\"},\"channel\":\"\\u0001\"}}";
    assert_int_equal(webhook_parse_notice(dup, strlen(dup), "channel", &n, &err), 0);
    assert_int_equal(n.nids, 1);
    webhook_notice_clear(&n);
    const char *bad[] = {"", "[]", "{\"eventType\":\"102\"}", "{\"eventType\":102,\"payload\":1}",
                         "{\"eventType\":102,\"eventType\":103}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(webhook_parse_notice(bad[i], strlen(bad[i]), NULL, &n, &err), -1);
        assert_non_null(err);
        free(err);
        err = NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sign_known_vectors),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_body_mirrors_agora_event_103),
        cmocka_unit_test(test_backoff_doubles_with_jitter_and_caps),
        cmocka_unit_test(test_parse_notice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
