/* Unit tests: the VFS that writes a transaction's WAL frames in one call (memory/walbuf.c).
 * What a user of the store checks: every commit is in the files when COMMIT returns — for
 * another connection, and for SQLite's recovery after a crash — whatever the transaction's
 * size, a rolled-back one leaves nothing, and the frames did go out in fewer writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/walbuf.h"
#include "storetest.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct dir {
    char path[64];
    char db[96];
};

static void dir_make(struct dir *d)
{
    snprintf(d->path, sizeof(d->path), "/tmp/memproxy-walbuf-XXXXXX");
    assert_non_null(mkdtemp(d->path));
    snprintf(d->db, sizeof(d->db), "%s/t.db", d->path);
}

static void dir_remove(struct dir *d)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
    assert_int_equal(system(cmd), 0);
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* The writer, on walbuf, in WAL mode as the store opens it; no checkpoint unless asked, so
 * the WAL holds every commit. */
static sqlite3 *open_writer(const char *path)
{
    sqlite3 *db = NULL;
    assert_int_equal(walbuf_register(), 0);
    assert_int_equal(
        sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, WALBUF_VFS),
        SQLITE_OK);
    storetest_exec(
        db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0;"
            "CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB NOT NULL);");
    return db;
}

static sqlite3 *open_plain(const char *path, int flags)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, flags, NULL), SQLITE_OK);
    return db;
}

/* Rows [from, from + n) with blobs of size bytes, in one transaction. */
static void insert_rows(sqlite3 *db, int from, int n, int size)
{
    char sql[160];
    snprintf(sql, sizeof(sql),
             "WITH RECURSIVE c(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM c WHERE i < %d) "
             "INSERT INTO t SELECT i, zeroblob(%d) FROM c",
             from, from + n - 1, size);
    storetest_exec(db, "BEGIN");
    storetest_exec(db, sql);
    storetest_exec(db, "COMMIT");
}

/* What SQLite's recovery makes of the files as they are on disk now (the database and its
 * WAL, copied while the writer still has them open): a crash at this point. */
static int64_t rows_after_crash(const struct dir *d)
{
    char cmd[640], copy[128];
    snprintf(copy, sizeof(copy), "%s/crash.db", d->path);
    snprintf(cmd, sizeof(cmd), "rm -f %s*; cp '%s' '%s' && cp '%s-wal' '%s-wal'", copy, d->db, copy,
             d->db, copy);
    assert_int_equal(system(cmd), 0);
    sqlite3 *db = open_plain(copy, SQLITE_OPEN_READWRITE);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    int64_t n = query_int(db, "SELECT count(*) FROM t");
    sqlite3_close(db);
    return n;
}

/* Each commit, small or past the buffer, is read by another connection at once, and is in
 * the files on disk as a crash would leave them. */
static void test_commits_are_in_the_file(void **state)
{
    (void)state;
    struct dir d;
    dir_make(&d);
    sqlite3 *w = open_writer(d.db);
    sqlite3 *r = open_plain(d.db, SQLITE_OPEN_READONLY);
    static const int sizes[] = {10, 3000, 9000, 200, 60000, 1};
    int total = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            insert_rows(w, total + 1, 8, sizes[i]); /* up to ~120 pages: several writes */
            total += 8;
            assert_int_equal(query_int(r, "SELECT count(*) FROM t"), total);
        }
        assert_int_equal(rows_after_crash(&d), total);
    }
    sqlite3_close(r);
    sqlite3_close(w);
    dir_remove(&d);
}

/* A transaction larger than the writer's page cache spills to the WAL before it commits,
 * then writes some of those pages again in place and rewrites the checksums of the frames
 * after them at the commit: recovery, which checks every checksum, still finds it all. */
static void test_spilled_transaction(void **state)
{
    (void)state;
    struct dir d;
    dir_make(&d);
    sqlite3 *w = open_writer(d.db);
    storetest_exec(w, "PRAGMA cache_size=8; PRAGMA cache_spill=1");
    insert_rows(w, 1, 10, 100);
    storetest_exec(w, "BEGIN");
    for (int pass = 0; pass < 4; pass++) { /* every pass writes the same pages again */
        char sql[200];
        snprintf(sql, sizeof(sql),
                 "WITH RECURSIVE c(i) AS (SELECT 1000 UNION ALL SELECT i + 1 FROM c WHERE i < "
                 "1199) INSERT OR REPLACE INTO t SELECT i, randomblob(%d) FROM c",
                 700 + pass);
        storetest_exec(w, sql);
    }
    storetest_exec(w, "UPDATE t SET v = zeroblob(50) WHERE k <= 10");
    storetest_exec(w, "COMMIT");
    sqlite3 *r = open_plain(d.db, SQLITE_OPEN_READONLY);
    assert_int_equal(query_int(r, "SELECT count(*) FROM t"), 210);
    assert_int_equal(query_int(r, "SELECT sum(length(v)) FROM t"), 10 * 50 + 200 * 703);
    assert_int_equal(rows_after_crash(&d), 210);
    sqlite3_close(r);
    sqlite3_close(w);
    dir_remove(&d);
}

/* A rolled-back transaction, spilled or not, leaves nothing: not for a reader, not after the
 * next commit, not after a crash. */
static void test_rollback_leaves_nothing(void **state)
{
    (void)state;
    struct dir d;
    dir_make(&d);
    sqlite3 *w = open_writer(d.db);
    storetest_exec(w, "PRAGMA cache_size=8");
    insert_rows(w, 1, 5, 10);
    storetest_exec(w, "BEGIN; INSERT INTO t SELECT k + 100, randomblob(4000) FROM t;"
                      "INSERT INTO t SELECT k + 1000, randomblob(4000) FROM t; ROLLBACK");
    sqlite3 *r = open_plain(d.db, SQLITE_OPEN_READONLY);
    assert_int_equal(query_int(r, "SELECT count(*) FROM t"), 5);
    insert_rows(w, 6, 1, 10);
    assert_int_equal(query_int(r, "SELECT count(*) FROM t"), 6);
    assert_int_equal(rows_after_crash(&d), 6);
    sqlite3_close(r);
    sqlite3_close(w);
    dir_remove(&d);
}

/* A process that dies without closing its connection (no flush at close, no checkpoint)
 * loses none of its commits. */
static void test_process_death_keeps_commits(void **state)
{
    (void)state;
    struct dir d;
    dir_make(&d);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sqlite3 *w = open_writer(d.db);
        for (int i = 0; i < 40; i++)
            insert_rows(w, i * 3 + 1, 3, 1500);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sqlite3 *db = open_plain(d.db, SQLITE_OPEN_READWRITE);
    assert_int_equal(query_int(db, "SELECT count(*) FROM t"), 120);
    assert_int_equal(query_int(db, "SELECT sum(length(v)) FROM t"), 120 * 1500);
    sqlite3_close(db);
    dir_remove(&d);
}

/* The point of it: a transaction of many pages takes a few writes, not two per page. */
static void test_frames_go_out_together(void **state)
{
    (void)state;
    struct dir d;
    dir_make(&d);
    sqlite3 *w = open_writer(d.db);
    insert_rows(w, 1, 1, 10);
    struct walbuf_stats a, b;
    walbuf_stats(&a);
    insert_rows(w, 2, 20, 3000); /* 20 leaf pages and their parent: ~21 frames, 42 writes */
    walbuf_stats(&b);
    uint64_t asked = b.asked - a.asked, made = b.made - a.made;
    assert_true(asked >= 40);
    assert_int_equal(made, 1); /* ~87 KB: the frames, the commit's header and its page at once */
    sqlite3_close(w);
    dir_remove(&d);
}

/* A commit of one frame whose header follows a read of the WAL (a writer with a cold page
 * cache reads the page it changes from the WAL): the header goes out at once, as a rewritten
 * checksum's must (no page follows one), and the page straight after it, so the commit is
 * in the file when SQLite publishes it. */
static void test_one_frame_commit_after_a_read(void **state)
{
    (void)state;
    struct dir d;
    dir_make(&d);
    sqlite3 *w = open_writer(d.db);
    insert_rows(w, 1, 5, 10);
    sqlite3 *r = open_plain(d.db, SQLITE_OPEN_READONLY); /* keeps the WAL past the close */
    assert_int_equal(query_int(r, "SELECT count(*) FROM t"), 5);
    sqlite3_close(w);
    w = open_writer(d.db); /* a cold cache: the table's page is read from the WAL */
    struct walbuf_stats a, b;
    walbuf_stats(&a);
    storetest_exec(w, "UPDATE t SET v = zeroblob(20) WHERE k = 3");
    walbuf_stats(&b);
    assert_int_equal(b.asked - a.asked, 2); /* one frame: its header, its page */
    assert_int_equal(b.made - a.made, 2);
    assert_int_equal(query_int(r, "SELECT length(v) FROM t WHERE k = 3"), 20);
    assert_int_equal(rows_after_crash(&d), 5);
    sqlite3_close(r);
    sqlite3_close(w);
    dir_remove(&d);
}

/* Files other than a WAL are the default VFS's own; a database without WAL works as ever. */
static void test_rollback_journal_database(void **state)
{
    (void)state;
    struct dir d;
    dir_make(&d);
    sqlite3 *db = NULL;
    assert_int_equal(walbuf_register(), 0);
    assert_int_equal(
        sqlite3_open_v2(d.db, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, WALBUF_VFS),
        SQLITE_OK);
    storetest_exec(db, "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)");
    insert_rows(db, 1, 50, 2000);
    sqlite3_close(db);
    db = open_plain(d.db, SQLITE_OPEN_READONLY);
    assert_int_equal(query_int(db, "SELECT count(*) FROM t"), 50);
    sqlite3_close(db);
    dir_remove(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commits_are_in_the_file),
        cmocka_unit_test(test_spilled_transaction),
        cmocka_unit_test(test_rollback_leaves_nothing),
        cmocka_unit_test(test_process_death_keeps_commits),
        cmocka_unit_test(test_frames_go_out_together),
        cmocka_unit_test(test_one_frame_commit_after_a_read),
        cmocka_unit_test(test_rollback_journal_database),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
