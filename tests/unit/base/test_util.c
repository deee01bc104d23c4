/* Unit tests: config/util.c's helpers that other tests do not already cover. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"

#include <stdlib.h>
#include <string.h>

/* xgrow: an index past the end grows the array (doubling from 64) and zeroes what is new;
 * an index that fits changes nothing; what was there stays. */
static void test_xgrow(void **state)
{
    int *a = NULL;
    size_t n = 0;
    (void)state;
    a = xgrow(a, &n, 0, sizeof(*a));
    assert_int_equal(n, 64);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(a[i], 0);
    a[5] = 7;
    int *same = xgrow(a, &n, 63, sizeof(*a));
    assert_ptr_equal(same, a);
    assert_int_equal(n, 64);
    a = xgrow(a, &n, 300, sizeof(*a));
    assert_int_equal(n, 512);
    assert_int_equal(a[5], 7);
    for (size_t i = 64; i < n; i++)
        assert_int_equal(a[i], 0);
    a = xgrow(a, &n, 512, sizeof(*a));
    assert_int_equal(n, 1024);
    free(a);
}

/* util_id_valid: the ids sessions and users may have. */
static void test_id_valid(void **state)
{
    char big[UTIL_MAX_ID + 1];
    (void)state;
    assert_true(util_id_valid("call-1", 6));
    assert_false(util_id_valid("", 0));
    assert_false(util_id_valid("a\nb", 3));
    assert_false(util_id_valid("a\0b", 3));
    assert_false(util_id_valid("a\x7f", 2));
    /* text in any script is an id; bytes that are not UTF-8 are not */
    assert_true(util_id_valid("caf\xc3\xa9-\xe4\xbc\x9a\xe8\xad\xb0-\xf0\x9f\x93\x9e", 17));
    assert_false(util_id_valid("\xff", 1));
    assert_false(util_id_valid("a\xc3", 2));            /* cut short */
    assert_false(util_id_valid("\xc0\xaf", 2));         /* overlong '/' */
    assert_false(util_id_valid("\xe0\x80\xaf", 3));     /* overlong '/' */
    assert_false(util_id_valid("\xed\xa0\x80", 3));     /* a surrogate */
    assert_false(util_id_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
    assert_false(util_id_valid("\xc2\x85", 2));         /* C1 control (NEL) */
    assert_false(util_id_valid("\x80"
                               "abc",
                               4)); /* a lone continuation byte */
    memset(big, 'x', sizeof(big));
    assert_true(util_id_valid(big, UTIL_MAX_ID));
    assert_false(util_id_valid(big, UTIL_MAX_ID + 1));
}

/* util_target_path: a request target's path, in origin form or absolute form (RFC 9112). */
static void check_target(const char *uri, const char *path, const char *authority)
{
    size_t len = 99;
    const char *auth = "unset";
    const char *got = util_target_path(uri, &len, &auth);
    assert_int_equal(len, strlen(path));
    assert_memory_equal(got, path, len);
    if (authority == NULL) {
        assert_null(auth);
    } else {
        assert_non_null(auth);
        assert_true(strncmp(auth, authority, strlen(authority)) == 0);
        assert_true(auth + strlen(authority) == got || got[0] == '\0' || got[0] == '?');
    }
}

static void test_target_path(void **state)
{
    (void)state;
    check_target("/v1/models?x=1", "/v1/models", NULL);
    check_target("/v1/models#f", "/v1/models", NULL);
    check_target("http://host:8080/v1/models?x=1", "/v1/models", "host:8080");
    check_target("HTTPS://[::1]:9/healthz", "/healthz", "[::1]:9");
    check_target("http://host", "", "host");
    check_target("http://host?x=/y", "", "host");
    check_target("httpx://host/a", "httpx://host/a", NULL); /* not a scheme we speak */
    check_target("*", "*", NULL);
}

/* util_uridecode: a REST path's id as the client percent-encoded it. */
static void check_decode(const char *in, const char *want, size_t want_len)
{
    size_t n = 99;
    char *got = util_uridecode(in, strlen(in), &n);
    assert_int_equal(n, want_len);
    assert_memory_equal(got, want, want_len + 1);
    free(got);
}

static void test_uridecode(void **state)
{
    (void)state;
    check_decode("session-42", "session-42", 10);
    check_decode("caller%20one%2Fb", "caller one/b", 12);
    check_decode("a%2fb%FFc",
                 "a/b\xff"
                 "c",
                 5);
    check_decode("caf%C3%A9", "caf\xc3\xa9", 5);
    check_decode("a+b", "a+b", 3);       /* a path, not a form: '+' stays */
    check_decode("100%", "100%", 4);     /* a lone '%' at the end */
    check_decode("a%4", "a%4", 3);       /* one digit short */
    check_decode("%zz%4g", "%zz%4g", 6); /* not hex */
    check_decode("%%41", "%A", 2);       /* decoded once, left to right */
    check_decode("x%00y", "x\0y", 3);    /* longer than strlen: util_id_valid refuses it */
    check_decode("", "", 0);
    size_t n = 0;
    char *part = util_uridecode("ab%41cd", 5, &n); /* only the length given is read */
    assert_string_equal(part, "abA");
    assert_int_equal(n, 3);
    free(part);
}

/* The Date header's format, RFC 9110's own example and the ends of the ranges. */
static void test_http_date(void **state)
{
    (void)state;
    char d[UTIL_HTTP_DATE];
    util_http_date(784111777, d);
    assert_string_equal(d, "Sun, 06 Nov 1994 08:49:37 GMT");
    util_http_date(0, d);
    assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    util_http_date(1798761599, d); /* the last second of 2026 */
    assert_string_equal(d, "Thu, 31 Dec 2026 23:59:59 GMT");
    util_http_date(951782400, d); /* a leap day */
    assert_string_equal(d, "Tue, 29 Feb 2000 00:00:00 GMT");
    util_http_date(253402300799, d); /* the last second a four-digit year holds */
    assert_string_equal(d, "Fri, 31 Dec 9999 23:59:59 GMT");
    util_http_date(253402300800, d); /* past it, and before 1970: the epoch's date */
    assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    util_http_date(-1, d);
    assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    util_http_date(INT64_MAX, d);
    assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
}

static void test_join_copy_number(void **state)
{
    (void)state;
    char *k = xjoin("acme", '\x1f', "call-1");
    assert_memory_equal(k,
                        "acme\x1f"
                        "call-1",
                        12);
    free(k);
    k = xjoin("", ':', "");
    assert_string_equal(k, ":");
    free(k);

    char small[8];
    util_copy(small, sizeof(small), "application/json", 16); /* cut to what fits */
    assert_string_equal(small, "applica");
    util_copy(small, sizeof(small), "text/x; more", 6); /* only len bytes are read */
    assert_string_equal(small, "text/x");
    util_copy(small, sizeof(small), "", 0);
    assert_string_equal(small, "");

    char num[24];
    *util_put_u64(num, 0) = '\0';
    assert_string_equal(num, "0");
    *util_put_u64(num, 1234567890) = '\0';
    assert_string_equal(num, "1234567890");
    *util_put_u64(num, UINT64_MAX) = '\0';
    assert_string_equal(num, "18446744073709551615");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xgrow),     cmocka_unit_test(test_id_valid),
        cmocka_unit_test(test_uridecode), cmocka_unit_test(test_target_path),
        cmocka_unit_test(test_http_date), cmocka_unit_test(test_join_copy_number),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
