/* Unit tests: the pace of retention's pass (memory/purge.c) — a chunk sized by how long the
 * last one took, sessions then finished deliveries, and a pass that ends on a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "memory/purge.h"

/* Slow chunks halve the next one, quick full ones double it, within its bounds. */
static void test_the_chunk_follows_the_time_a_transaction_took(void **state)
{
    (void)state;
    struct purge_pass p = {0};
    assert_int_equal(purge_next(&p, 86400000), 1);
    long first = p.chunk;
    assert_true(first > 1);
    assert_int_equal(purge_done(&p, first, 5 * PURGE_SLOW_US), 1); /* full and slow */
    assert_int_equal(p.chunk, first / 2);
    for (int i = 0; i < 20; i++) { /* slow every time: down to one session a transaction */
        purge_next(&p, 86400000);
        purge_done(&p, p.chunk, 10 * PURGE_SLOW_US);
    }
    assert_int_equal(p.chunk, 1);
    for (int i = 0; i < 20; i++) { /* quick and full: up to the cap, not past it */
        purge_next(&p, 86400000);
        purge_done(&p, p.chunk, PURGE_SLOW_US / 10);
    }
    assert_int_equal(p.chunk, PURGE_MAX_CHUNK);
    assert_int_equal(p.stage, 1);
}

/* A short chunk ends a stage: sessions, then deliveries, then the pass, with its totals. */
static void test_a_pass_deletes_sessions_then_deliveries_then_ends(void **state)
{
    (void)state;
    struct purge_pass p = {0};
    assert_int_equal(purge_next(&p, 1000), 1);
    int64_t before = p.before_ms;
    long first = p.chunk;
    assert_int_equal(purge_done(&p, first, 100), 1);
    assert_int_equal(purge_next(&p, 1000), 1);
    assert_int_equal(purge_done(&p, 3, 100), 1); /* fewer than asked: sessions are done */
    assert_int_equal(purge_next(&p, 1000), 2);
    assert_int_equal(p.before_ms, before); /* one cut-off for the whole pass */
    assert_int_equal(purge_done(&p, 0, 100), 0);
    assert_int_equal(p.stage, 0);
    assert_int_equal(p.done[0], first + 3);
    assert_int_equal(p.done[1], 0);
    assert_int_equal(purge_next(&p, 1000), 1); /* the next pass starts afresh */
    assert_int_equal(p.done[0], 0);
}

static void test_a_failed_chunk_ends_the_pass(void **state)
{
    (void)state;
    struct purge_pass p = {0};
    purge_next(&p, 1000);
    assert_int_equal(purge_done(&p, -1, 100), 0);
    assert_int_equal(p.stage, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_chunk_follows_the_time_a_transaction_took),
        cmocka_unit_test(test_a_pass_deletes_sessions_then_deliveries_then_ends),
        cmocka_unit_test(test_a_failed_chunk_ends_the_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
