/* Unit tests: client keys and the error mapping (proxy/auth.c, proxy/apierr.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "proxy/http/apierr.h"
#include "proxy/http/auth.h"

#include <jansson.h>
#include <string.h>

static void test_bearer(void **state)
{
    assert_string_equal(auth_bearer("Bearer abc"), "abc");
    assert_string_equal(auth_bearer("bearer   abc"), "abc");
    assert_null(auth_bearer("Basic abc"));
    assert_null(auth_bearer("Bearer "));
    assert_null(auth_bearer(NULL));
}

static void test_client_keys(void **state)
{
    struct cfg_client_key keys[] = {{"k-one", "t1", "", 1}, {"k-two", "t2", "u-*", 0}};
    struct cfg cfg = {.client_keys = keys, .nclient_keys = 2};
    const struct cfg_client_key *key = NULL;
    assert_int_equal(auth_client(&cfg, "Bearer k-two", &key), 0);
    assert_ptr_equal(key, &keys[1]);
    assert_int_equal(auth_client(&cfg, "Bearer k-tw", &key), -1);
    assert_int_equal(auth_client(&cfg, "Bearer k-two2", &key), -1);
    assert_int_equal(auth_client(&cfg, NULL, &key), -1);
    /* a key bound to users: the ids it may act for */
    assert_true(auth_user_allowed(&keys[1], "u-17"));
    assert_false(auth_user_allowed(&keys[1], "v-17"));
    assert_false(auth_user_allowed(&keys[1], NULL));
    assert_true(auth_user_allowed(&keys[0], NULL));
    assert_true(auth_user_allowed(NULL, "anyone"));
    cfg.nclient_keys = 0; /* open */
    assert_int_equal(auth_client(&cfg, NULL, &key), 0);
    assert_null(key);
}

static void test_ct_equal(void **state)
{
    assert_true(util_ct_equal("abc", 3, "abc", 3));
    assert_false(util_ct_equal("abc", 3, "abd", 3));
    assert_false(util_ct_equal("abc", 3, "abcd", 4));
    assert_true(util_ct_equal("", 0, "", 0));
}

static void test_error_body(void **state)
{
    struct apierr e;
    size_t len = 0;
    apierr_set(&e, APIERR_INVALID_REQUEST, "messages[0].role", "bad \xff role \n%d", 7);
    assert_int_equal(apierr_status(e.kind), 400);
    char *s = apierr_json(&e, &len);
    json_t *j = json_loads(s, 0, NULL);
    assert_non_null(j);
    json_t *err = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(err, "message")), "bad ? role ?7");
    assert_string_equal(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    assert_string_equal(json_string_value(json_object_get(err, "param")), "messages[0].role");
    assert_string_equal(json_string_value(json_object_get(err, "code")), "invalid_request");
    json_decref(j);
    free(s);
    apierr_set(&e, APIERR_UPSTREAM_TIMEOUT, NULL, "slow");
    s = apierr_json(&e, &len);
    assert_non_null(strstr(s, "\"param\":null"));
    free(s);
}

static void test_status_table(void **state)
{
    /* a failed commit (storage) is 503: the client may retry; a busy server too */
    static const int want[APIERR__COUNT] = {400, 400, 401, 401, 403, 404, 405, 501, 409, 421,
                                            408, 413, 415, 500, 503, 502, 502, 503, 503, 504};
    for (int k = 0; k < APIERR__COUNT; k++) {
        assert_int_equal(apierr_status((enum apierr_kind)k), want[k]);
        assert_non_null(apierr_type((enum apierr_kind)k));
        assert_non_null(apierr_code((enum apierr_kind)k));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bearer),       cmocka_unit_test(test_client_keys),
        cmocka_unit_test(test_ct_equal),     cmocka_unit_test(test_error_body),
        cmocka_unit_test(test_status_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
