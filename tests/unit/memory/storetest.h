/*
 * storetest: what the store's unit tests (test_store.c, test_store_writer.c, test_walbuf.c,
 * test_sqlite_ckpt.c) share: a fresh database path, SQL run on a connection, a store opened
 * with given options, a turn in the stored shape, and a batch committed synchronously.
 *
 * Ownership: storetest_path() returns a new string (free() it; the file is the caller's to
 * unlink); the stores are the caller's (store_close()); storetest_turn() returns a new
 * reference; storetest_commit() takes b, as store_submit() does.
 */
#ifndef MEMPROXY_TESTS_STORETEST_H
#define MEMPROXY_TESTS_STORETEST_H

#include "memory/store.h"

#include <event2/event.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

/* A completion counter: done and ok count the reports; the base's loop breaks at want. */
struct storetest_waiter {
    int done, ok, want;
    struct event_base *base;
};
void storetest_done(void *arg, int ok);

/* A database path in a new temporary directory. */
char *storetest_path(void);
/* Remove that directory with what SQLite left in it (the database, its WAL and shm). */
void storetest_remove(const char *path);
/* Run sql on db (several statements may be given); fails the test on an error. */
void storetest_exec(sqlite3 *db, const char *sql);
/* A store with o's options (and a 5 s busy timeout); fails the test when it does not open. */
struct store *storetest_open_with(const char *path, struct store_opts o);
struct store *storetest_open_retention(const char *path, int64_t retention_ms);
/* A store whose writer waits up to commit_delay_us for more batches under load. */
struct store *storetest_open_delayed(const char *path, int64_t commit_delay_us);
struct store *storetest_open(const char *path);

json_t *storetest_turn(const char *role, const char *content, int turn_id, int idx, int seq);
/* Submit b and run a loop until it is committed; whether it was. */
int storetest_commit(struct store *st, struct store_batch *b);

#endif
