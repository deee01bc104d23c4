/* Unit tests: the WAL's writeback as it grows (memory/walflush.c): which range is started and
 * when, a WAL that starts over, and the SQLite store starting them as it commits (none when
 * storage.wal_flush_after is 0), with every turn stored across the checkpoints' restarts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "memory/store.h"
#include "memory/walflush.h"
#include "storetest.h"

#include <event2/thread.h>
#include <string.h>

static void test_ranges(void **state)
{
    (void)state;
    int64_t flushed = 0, off = -1, len = -1;
    assert_int_equal(walflush_end(0, 4096), 32);
    assert_int_equal(walflush_end(10, 4096), 32 + 10 * 4120);
    assert_int_equal(walflush_next(&flushed, 1000, 4096, &off, &len), 0); /* not enough yet */
    assert_int_equal(flushed, 0);
    assert_int_equal(walflush_next(&flushed, 5000, 4096, &off, &len), 1);
    assert_int_equal(off, 0);
    assert_int_equal(len, 5000);
    assert_int_equal(flushed, 5000);
    assert_int_equal(walflush_next(&flushed, 9000, 4096, &off, &len), 0); /* 4,000 since */
    assert_int_equal(walflush_next(&flushed, 9096, 4096, &off, &len), 1);
    assert_int_equal(off, 5000);
    assert_int_equal(len, 4096);
    /* the WAL started over after a checkpoint: followed from its start */
    assert_int_equal(walflush_next(&flushed, 2000, 4096, &off, &len), 0);
    assert_int_equal(flushed, 0);
    assert_int_equal(walflush_next(&flushed, 4200, 4096, &off, &len), 1);
    assert_int_equal(off, 0);
    assert_int_equal(len, 4200);
    /* off */
    flushed = 0;
    assert_int_equal(walflush_next(&flushed, 1 << 30, 0, &off, &len), 0);
    assert_null(walflush_create("/nonexistent-wal", 0));
    walflush_grown(NULL, 1 << 20); /* what an "off" store calls: nothing */
    assert_int_equal(walflush_count(NULL), 0);
}

static uint64_t flushes_after(const char *path, int64_t after, int n)
{
    char text[3000];
    memset(text, 'x', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    struct store *st = storetest_open_with(path, (struct store_opts){.wal_flush_after = after});
    for (int i = 1; i <= n; i++) { /* ~3 frames a commit, each a transaction of its own */
        struct store_batch *b = store_batch_new("t", "long");
        json_t *t = storetest_turn(i % 2 ? "user" : "assistant", text, (i + 1) / 2, 0, i);
        store_batch_insert(b, t);
        json_decref(t);
        assert_int_equal(storetest_commit(st, b), 1);
    }
    store_drain(st); /* and the checkpoint passes it set off */
    struct store_counts c;
    store_counts(st, &c);
    char *err = NULL;
    struct store_reader *r = store_reader_open(st, &err);
    json_t *turns = store_turns(r, "t", "long", 0, 0);
    assert_int_equal(json_array_size(turns), n);
    json_decref(turns);
    store_reader_close(r);
    store_close(st);
    assert_true(c.checkpoints >= 1); /* the WAL started over at least once meanwhile */
    return c.wal_flushes;
}

/* 1,500 commits of 3 to 6 frames of WAL each (12 to 25 KiB): a writeback each 256 KiB, whatever
 * the checkpoints' restarts (~120), none when off. */
static void test_store_flushes(void **state)
{
    (void)state;
    char *path = storetest_path();
    uint64_t on = flushes_after(path, 256 * 1024, 1500);
    assert_true(on >= 40);
    assert_true(on <= 1500 / 6); /* a commit writes less than 40 KiB: 256 KiB spans 6 or more */
    storetest_remove(path);
    free(path);
    path = storetest_path();
    assert_int_equal(flushes_after(path, 0, 500), 0);
    storetest_remove(path);
    free(path);
}

int main(void)
{
    evthread_use_pthreads(); /* the writer hands completions to the test's loop */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_store_flushes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
