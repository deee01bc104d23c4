/* Unit tests: config/util.c's helpers that other tests do not already cover. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util.h"

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
    memset(big, 'x', sizeof(big));
    assert_true(util_id_valid(big, UTIL_MAX_ID));
    assert_false(util_id_valid(big, UTIL_MAX_ID + 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xgrow),
        cmocka_unit_test(test_id_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
