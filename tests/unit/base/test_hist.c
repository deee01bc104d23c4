/* Unit tests: base/hist.c, the histogram /metrics renders (its buckets' edges, the +Inf
 * bucket, sets added up). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/hist.h"

#include <string.h>

/* An observation equal to a bound counts in that bound's bucket (Prometheus' "le"), one just
 * above it in the next, and one past the last bound in +Inf; sum and count follow. */
static void test_hist_edges(void **state)
{
    struct hist h;
    struct hist_counts c;
    memset(&h, 0, sizeof(h));
    memset(&c, 0, sizeof(c));
    hist_observe(&h, 0);
    hist_observe(&h, 25);
    hist_observe(&h, 26);
    hist_observe(&h, 30000000);
    hist_observe(&h, 30000001);
    hist_read(&h, &c);
    assert_int_equal(c.buckets[0], 2); /* 0 and 25: le 25 us */
    assert_int_equal(c.buckets[1], 1); /* 26: le 50 us */
    assert_int_equal(c.buckets[HIST_NBOUNDS - 1], 1);
    assert_int_equal(c.buckets[HIST_NBOUNDS], 1); /* +Inf */
    assert_int_equal(c.count, 5);
    assert_int_equal(c.sum_us, 0 + 25 + 26 + 30000000 + 30000001);
    for (size_t i = 1; i < HIST_NBOUNDS; i++)
        assert_true(hist_bounds_us[i] > hist_bounds_us[i - 1]);
}

/* hist_read adds to what the reader holds: the workers' sets sum up. */
static void test_hist_read_adds(void **state)
{
    struct hist a, b;
    struct hist_counts c;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    memset(&c, 0, sizeof(c));
    hist_observe(&a, 400);
    hist_observe(&b, 400);
    hist_observe(&b, 2000);
    hist_read(&a, &c);
    hist_read(&b, &c);
    assert_int_equal(c.buckets[8], 2);  /* le 400 us */
    assert_int_equal(c.buckets[13], 1); /* le 2500 us */
    assert_int_equal(c.count, 3);
    assert_int_equal(c.sum_us, 2800);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_edges),
        cmocka_unit_test(test_hist_read_adds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
