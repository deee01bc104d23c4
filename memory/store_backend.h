/*
 * store_backend: what a database must do for the store (store.h). The store owns the queue,
 * the writer thread, group commit and the hand-back of completions to the submitting
 * threads; a backend owns the database: its connection for the writer, the transaction that
 * applies a group of batches (store_batch.h), the upkeep between groups, and the readers.
 * SQLite (sqlite.h) is the default; PostgreSQL (pgsql.h) is the backend for replicas.
 *
 * Threads: open, close, transaction, settle and purge run on the writer thread only (open
 * and close on the caller's, before the writer starts and after it stopped). A reader is
 * used by one thread at a time, the one that opened it. Everything returned as JSON is new.
 */
#ifndef MEMPROXY_STORE_BACKEND_H
#define MEMPROXY_STORE_BACKEND_H

#include "memory/store_batch.h"

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct recall_pick;
struct store_backend;

/* A session's updated_ms (idle time, retention) is refreshed at most this often by default:
 * writing it with every batch would rewrite an indexed column each time. */
#define STORE_TOUCH_MS 60000

struct store_opts {
    const char *url;           /* PostgreSQL (pgsql.h) when set; else where is a SQLite file */
    long statement_timeout_ms; /* PostgreSQL: a statement running longer fails (0: none) */
    int64_t lease_ms;          /* PostgreSQL: how long a queue item taken is a replica's */
    int prepared_statements;   /* PostgreSQL: named statements (pgsql_conn_set_prepare) */
    long busy_timeout_ms;      /* every connection waits this long for a lock */
    int64_t retention_ms;      /* > 0: sessions idle longer are deleted, at start and hourly */
    int64_t touch_ms;          /* a session's updated_ms lags its last write by at most this
                                  (0: STORE_TOUCH_MS); idle stops need it finer than a minute */
    /* Group commit under load: when awaited batches (with a completion) arrive less than
     * this far apart while other replies are on their way (store_expect), the writer holds
     * a group's transaction until this long after its first awaited batch arrived, so that
     * the batches arriving meanwhile share the commit; 0 commits each group at once. One
     * request at a time and replies ending far apart are never held. See store_gather() in
     * store.c. */
    int64_t commit_delay_us;
    /* One request at a time, a worker's loop waits this long at most for its awaited batch's
     * completion, yielding its CPU, instead of sleeping until the writer wakes it: a wake-up
     * is a system call and, where the loop's CPU went idle, the VM's wake-up of that CPU
     * (bench/floor: ~5-20 us). Only when no other reply is expected, nothing else is ready
     * on the loop and the loop's awaited batches come more than twice this apart (under load
     * they come closer, and a loop waiting here would leave its sockets unread); SQLite only
     * (a shared database's commit is hundreds of microseconds). 0: never. See
     * store_inbox_spin() in store.c. */
    int64_t commit_spin_us;
    /* SQLite: the WAL's writeback is started each time this many bytes were committed to it
     * (memory/walflush.h), so the checkpoints' syncs find little left to write; 0: off. */
    int64_t wal_flush_after;
};

/* A reader as the store sees it: the backend's own reader starts with this. */
struct store_reader {
    const struct store_backend *be;
    int failed; /* the last read got no answer from the database (store_reader_failed) */
};

struct store_delivery_query {
    const char *tenant, *status, *session_id, *notice_id;
    int64_t before; /* a previous page's next, or 0 */
    size_t limit;
};

/* What a session's cache is made of, read in one go (store_async_load): the session's version
 * (0: none), its row as session_get gives it (NULL: none), its latest turns, and its user's
 * memory as user_memory gives it. Borrowed for the callback's duration. */
struct store_loaded {
    int64_t version;
    json_t *session, *turns, *memory;
};
typedef void (*store_version_cb)(void *arg, int64_t version);             /* -1: the read failed */
typedef void (*store_loaded_cb)(void *arg, const struct store_loaded *l); /* NULL: failed */

struct store_backend {
    const char *name;
    /* Several processes (replicas) may write the database: a working set must check a
     * session's version before it trusts what it holds of it (session_version). */
    int shared;
    /* The writer's connection to where (a SQLite file, a PostgreSQL URL): created and migrated
     * as needed. NULL with *err set on failure. */
    void *(*open)(const char *where, const struct store_opts *opts, char **err);
    void (*close)(void *db);
    /* Apply list's batches (linked through next) in one transaction, setting each one's ok:
     * 0 when it committed; -1 when a batch or the commit failed and it was rolled back. */
    int (*transaction)(void *db, struct store_batch *list);
    /* After a group's completions were handed over, and after a purge: upkeep that must not
     * delay a commit (SQLite's WAL checkpoint; PostgreSQL's deletion of an erased user's
     * sessions, a chunk at a time). 1 when more is left: called again once the groups queued
     * meanwhile are committed, without waiting for the next group. */
    int (*settle)(void *db);
    /* Optional, from any thread (store_drain): wait for upkeep settle set off beside the
     * writer (SQLite's checkpointer thread) to be done. */
    void (*settled)(void *db);
    /* Retention: one short transaction of the pass that deletes sessions idle past
     * opts.retention_ms (memory/purge.h); 1 when the pass goes on (called again once the
     * groups queued meanwhile are committed), 0 when it is over. */
    int (*purge)(void *db);
    /* Upkeep runs so far, for /metrics: beside the writer (*aside) and on it, holding the
     * commits behind them (*held). */
    void (*checkpoints)(void *db, uint64_t *aside, uint64_t *held);
    /* Optional, from any thread: the WAL writebacks started (opts.wal_flush_after). */
    uint64_t (*wal_flushes)(void *db);

    struct store_reader *(*reader_open)(void *db, char **err);
    void (*reader_close)(struct store_reader *r);
    /* The reads, as store.h describes them. */
    /* Shared backends: the session's version (counted up by every batch of it and by changes
     * of what it injects), 0 when there is no such session, -1 when the read failed. */
    int64_t (*session_version)(struct store_reader *r, const char *tenant, const char *session_id);
    json_t *(*session_get)(struct store_reader *r, const char *tenant, const char *session_id);
    json_t *(*turns)(struct store_reader *r, const char *tenant, const char *session_id,
                     int64_t min_turn, size_t limit);
    json_t *(*turns_of)(struct store_reader *r, const char *tenant, const char *session_id,
                        const int64_t *turn_ids, size_t n, size_t limit);
    json_t *(*sessions)(struct store_reader *r, const char *tenant, const char *user_id,
                        const char *status, int64_t before, size_t limit);
    json_t *(*user_memory)(struct store_reader *r, const char *tenant, const char *user_id,
                           size_t max_facts);
    json_t *(*deliveries)(struct store_reader *r, const struct store_delivery_query *q);
    json_t *(*outbox_due)(struct store_reader *r, int64_t now_ms, size_t limit);
    int64_t (*outbox_next)(struct store_reader *r);
    json_t *(*to_summarize)(struct store_reader *r, int64_t now_ms, size_t limit);
    int64_t (*summary_next)(struct store_reader *r);
    json_t *(*running_to_summarize)(struct store_reader *r, const char *profile, long threshold,
                                    size_t limit);
    json_t *(*cache_get)(struct store_reader *r, const char *key, int64_t now_ms);
    json_t *(*to_embed)(struct store_reader *r, int64_t now_ms, size_t limit);
    int64_t (*embed_next)(struct store_reader *r);
    int (*recall_embedded)(struct store_reader *r, const char *tenant, const char *user_id,
                           const char *session_id);
    void (*recall)(struct store_reader *r, const char *tenant, const char *user_id,
                   const char *session_id, size_t limit, struct recall_pick *p);
    json_t *(*idle_sessions)(struct store_reader *r, int64_t before_ms, size_t limit);

    /* Reads that never wait on the calling loop (store_async_*), or NULL: the backend's reads
     * are quick enough to make in place (SQLite's, from the page cache). async_open runs on
     * base's thread, and so do the callbacks. */
    void *(*async_open)(void *db, struct event_base *base);
    void (*async_close)(void *a);
    void (*async_version)(void *a, const char *tenant, const char *session_id, store_version_cb cb,
                          void *arg);
    void (*async_load)(void *a, const char *tenant, const char *session_id, const char *user_id,
                       size_t turns, size_t max_facts, store_loaded_cb cb, void *arg);
};

#endif
