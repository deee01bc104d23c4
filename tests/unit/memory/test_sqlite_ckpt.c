/* Unit tests: the checkpoint threads (memory/sqlite_ckpt.c). What the writer relies on: the
 * light-load one runs at SCHED_IDLE, so it never takes the CPU from a request, and the other at
 * the writer's priority; a pass asked for or under way can be cut at once, after which the
 * writer's own pass copies every frame (the cut one's half-done work does not stand in its
 * way) and the thread's next pass works; the other thread's pass cuts the idle one's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/sqlite_ckpt.h"
#include "storetest.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A writer as the store opens one (WAL, synchronous=NORMAL, no automatic checkpoint) with
 * rows commits of a 3 KB row each: about rows frames in the WAL. */
static sqlite3 *writer_with_wal(const char *path, int rows)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    storetest_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                       "PRAGMA wal_autocheckpoint=0; CREATE TABLE t (v TEXT)");
    for (int i = 0; i < rows; i++)
        storetest_exec(db, "INSERT INTO t VALUES (printf('%.3000c', 'x'))");
    return db;
}

/* Frames in the WAL and frames copied from it, as a PASSIVE checkpoint by db reports them
 * (it copies what it can first). */
static void wal_state(sqlite3 *db, int *log, int *copied)
{
    assert_int_equal(sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, log, copied),
                     SQLITE_OK);
}

/* Threads of this process at SCHED_IDLE. */
static int idle_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] != '.' && sched_getscheduler(atoi(e->d_name)) == SCHED_IDLE)
            n++;
    }
    closedir(d);
    return n;
}

/* How long the idle thread's whole pass over a WAL of `rows` frames takes here: a cut asked for
 * in less than half of it came before that pass could end. (A busy machine holds this thread
 * past its sleeps and makes passes slower, not faster: the tests below then see the cut come
 * late and leave "it was cut" unasserted rather than fail.) */
static uint64_t full_pass_us(int rows)
{
    char *path = storetest_path();
    sqlite3 *db = writer_with_wal(path, rows);
    char *err = NULL;
    struct sqlite_ckpt *c = sqlite_ckpt_create(path, 1, &err);
    assert_non_null(c);
    uint64_t t0 = util_now_us();
    assert_int_equal(sqlite_ckpt_wake(c), 1);
    sqlite_ckpt_idle(c);
    uint64_t us = util_now_us() - t0;
    assert_int_equal(sqlite_ckpt_count(c), 1);
    sqlite_ckpt_destroy(c);
    sqlite3_close(db);
    storetest_remove(path);
    free(path);
    return us;
}

static void test_runs_at_idle_priority(void **state)
{
    (void)state;
    char *path = storetest_path();
    sqlite3 *db = writer_with_wal(path, 10);
    char *err = NULL;
    struct sqlite_ckpt *c = sqlite_ckpt_create(path, 1, &err);
    assert_non_null(c);
    for (int i = 0; i < 200 && idle_threads() == 0; i++)
        usleep(5000); /* the thread sets its own policy as it starts */
    assert_int_equal(idle_threads(), 1);
    struct sqlite_ckpt *normal = sqlite_ckpt_create(path, 0, &err);
    assert_non_null(normal);
    assert_int_equal(sqlite_ckpt_wake(normal), 1);
    sqlite_ckpt_idle(normal); /* it has started and run a pass: at its creator's priority */
    assert_int_equal(idle_threads(), 1);
    sqlite_ckpt_destroy(normal);
    sqlite_ckpt_destroy(c);
    assert_int_equal(idle_threads(), 0);
    sqlite3_close(db);
    storetest_remove(path);
    free(path);
}

/* Cut before or during a pass (at once, and 1 ms into a pass of ~3,000 frames, which takes
 * far longer: it never counts as done), and after one (most likely): in each case nothing of
 * the thread is left running, the writer's own pass copies every frame, and a pass asked for
 * afterwards works and is counted. */
static void test_cut_then_the_writer_copies(void **state)
{
    (void)state;
    static const int delays_us[] = {0, 1000, 200000};
    uint64_t full_us = full_pass_us(3000);
    for (size_t k = 0; k < sizeof(delays_us) / sizeof(delays_us[0]); k++) {
        char *path = storetest_path();
        sqlite3 *db = writer_with_wal(path, 3000);
        char *err = NULL;
        struct sqlite_ckpt *c = sqlite_ckpt_create(path, 1, &err);
        assert_non_null(c);
        sqlite_ckpt_cut(c); /* nothing asked: returns at once */
        uint64_t t0 = util_now_us();
        assert_int_equal(sqlite_ckpt_wake(c), 1);
        usleep(delays_us[k]);
        uint64_t asked_us = util_now_us() - t0;
        sqlite_ckpt_cut(c);
        assert_false(sqlite_ckpt_busy(c));
        if (delays_us[k] <= 1000 && asked_us < full_us / 2) /* before it could end: cut */
            assert_int_equal(sqlite_ckpt_count(c), 0);
        int failing = 0, log = 0, copied = 0;
        assert_int_equal(sqlite_ckpt_run(db, &failing), 0);
        assert_int_equal(failing, 0);
        wal_state(db, &log, &copied);
        assert_true(log >= 3000);
        assert_int_equal(copied, log);
        storetest_exec(db, "INSERT INTO t VALUES ('after')"); /* the WAL starts over */
        uint64_t before = sqlite_ckpt_count(c);
        assert_int_equal(sqlite_ckpt_wake(c), 1);
        sqlite_ckpt_idle(c);
        assert_int_equal(sqlite_ckpt_count(c), before + 1);
        sqlite_ckpt_destroy(c);
        sqlite3_close(db);
        storetest_remove(path);
        free(path);
    }
}

/* Under load a pass goes to the thread at the writer's priority, which first cuts the idle
 * thread's pass under way (it would hold the checkpoint lock): the idle one never counts that
 * pass as done, the other one does, and every frame is copied. */
static void test_the_busy_thread_cuts_the_idle_one(void **state)
{
    (void)state;
    uint64_t full_us = full_pass_us(3000);
    char *path = storetest_path();
    sqlite3 *db = writer_with_wal(path, 3000);
    char *err = NULL;
    struct sqlite_ckpt *idle = sqlite_ckpt_create(path, 1, &err);
    struct sqlite_ckpt *busy = sqlite_ckpt_create(path, 0, &err);
    assert_non_null(idle);
    assert_non_null(busy);
    uint64_t t0 = util_now_us();
    assert_int_equal(sqlite_ckpt_wake(idle), 1);
    usleep(1000);
    uint64_t asked_us = util_now_us() - t0;
    assert_int_equal(sqlite_ckpt_wake_cut(busy, idle), 1);
    assert_int_equal(sqlite_ckpt_wake_cut(busy, idle), 0); /* one pass at a time */
    sqlite_ckpt_idle(busy);
    assert_false(sqlite_ckpt_busy(idle));
    if (asked_us < full_us / 2) /* before the idle pass could end (full_pass_us) */
        assert_int_equal(sqlite_ckpt_count(idle), 0);
    assert_int_equal(sqlite_ckpt_count(busy), 1);
    int log = 0, copied = 0;
    wal_state(db, &log, &copied);
    assert_true(log >= 3000);
    assert_int_equal(copied, log);
    sqlite_ckpt_destroy(busy);
    sqlite_ckpt_destroy(idle);
    sqlite3_close(db);
    storetest_remove(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_at_idle_priority),
        cmocka_unit_test(test_cut_then_the_writer_copies),
        cmocka_unit_test(test_the_busy_thread_cuts_the_idle_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
