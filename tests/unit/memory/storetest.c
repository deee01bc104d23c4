/* What the store's unit tests share (storetest.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "storetest.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void storetest_done(void *arg, int ok)
{
    struct storetest_waiter *w = arg;
    w->done++;
    w->ok += ok;
    if (w->done == w->want)
        event_base_loopbreak(w->base);
}

char *storetest_path(void)
{
    char *dir = xstrdup("/tmp/memproxy-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char *path = xasprintf("%s/test.db", dir);
    free(dir);
    return path;
}

void storetest_remove(const char *path)
{
    static const char *const tails[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        char *f = xasprintf("%s%s", path, tails[i]);
        unlink(f);
        free(f);
    }
    char *dir = xstrdup(path);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(rmdir(dir), 0);
    free(dir);
}

void storetest_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, err ? err : sqlite3_errstr(rc));
}

struct store *storetest_open_with(const char *path, struct store_opts o)
{
    char *err = NULL;
    o.busy_timeout_ms = 5000;
    struct store *st = store_open(path, &o, &err);
    if (st == NULL)
        fail_msg("%s", err);
    return st;
}

struct store *storetest_open_retention(const char *path, int64_t retention_ms)
{
    return storetest_open_with(path, (struct store_opts){.retention_ms = retention_ms});
}

struct store *storetest_open_delayed(const char *path, int64_t commit_delay_us)
{
    return storetest_open_with(path, (struct store_opts){.commit_delay_us = commit_delay_us});
}

struct store *storetest_open(const char *path)
{
    return storetest_open_retention(path, 0);
}

json_t *storetest_turn(const char *role, const char *content, int turn_id, int idx, int seq)
{
    return json_pack("{s:i, s:s, s:s, s:i, s:i, s:s, s:b, s:n, s:n, s:{s:s}, s:I, s:f}", "seq", seq,
                     "role", role, "content", content, "turn_id", turn_id, "turn_idx", idx,
                     "source", "asr", "interrupted", 0, "interrupt_timestamp", "original",
                     "metadata", "user", "1002", "timestamp", (json_int_t)1763800104000,
                     "importance", 0.5);
}

int storetest_commit(struct store *st, struct store_batch *b)
{
    struct storetest_waiter w = {.want = 1, .base = event_base_new()};
    store_submit(st, b, w.base, storetest_done, &w);
    event_base_loop(w.base, EVLOOP_NO_EXIT_ON_EMPTY); /* until storetest_done breaks it */
    event_base_free(w.base);
    assert_int_equal(w.done, 1);
    return w.ok;
}
