/*
 * sqlite_schema: the SQLite backend's schema, its migrations and the statements it prepares,
 * and the two connections that hold them: the writer's (struct sqlite_db) and a reader's
 * (struct sqlite_reader). The schema version lives in PRAGMA user_version; the migrations
 * run in order at open, each in its own transaction, and a database newer than this binary
 * is refused.
 *
 * Settings: journal_mode=WAL, synchronous=NORMAL, busy_timeout, foreign_keys=ON,
 * journal_size_limit.
 */
#ifndef MEMPROXY_SQLITE_SCHEMA_H
#define MEMPROXY_SQLITE_SCHEMA_H

#include "memory/purge.h"
#include "memory/store_backend.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdatomic.h>

#define STORE_SCHEMA_VERSION 12

enum sqlite_stmt {
    ST_SESSION_ENSURE,
    ST_SESSION_SID,
    ST_SESSION_SET,
    ST_SESSION_SYSTEM,
    ST_SESSION_WINDOW,
    ST_WINDOW_TURNS,
    ST_INSERT,
    ST_UPDATE,
    ST_REPLACE,
    ST_STOP,
    ST_REOPEN,
    ST_DELETE,
    ST_RUNTIME,
    ST_PATCH,
    ST_PURGE,
    ST_PURGE_OUTBOX,
    ST_OUTBOX_ADD,
    ST_OUTBOX_RESULT,
    ST_OUTBOX_RETRY,
    ST_IMPORT,
    ST_USER_SESSIONS,
    ST_USER_SUMMARY_DEL,
    ST_USER_FACTS_DEL,
    ST_USER_OUTBOX_DEL,
    ST_USER_CACHE_DEL,
    ST_CACHE_PUT,
    ST_CACHE_EXPIRE,
    ST_SUMMARY_SET,
    ST_FACT_SET,
    ST_SUMMARY_FOLD,
    ST_FACT_SEEN,
    ST_FACT_DECAY,
    ST_FACT_FORGET,
    ST_SUMMARIZED,
    ST_SUMMARIZED_SEQ,
    ST_SUMMARY_RETRY,
    ST_OUTBOX_SUMMARY,
    ST_EMBED_QUEUE,
    ST_EMBED_FORGET,
    ST_EMBED_PUT,
    ST_EMBED_DONE,
    ST_EMBED_RETRY,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST__COUNT
};

enum sqlite_rstmt {
    RS_TURNS,
    RS_TURNS_OF,
    RS_SESSION,
    RS_SUMMARY,
    RS_FACTS,
    RS_LIST,
    RS_OUTBOX_DUE,
    RS_OUTBOX_NEXT,
    RS_DELIVERIES,
    RS_IDLE,
    RS_TO_SUMMARIZE,
    RS_SUMMARY_NEXT,
    RS_RUNNING_TO_SUMMARIZE,
    RS_CACHE_GET,
    RS_TO_EMBED,
    RS_EMBED_NEXT,
    RS_SESSION_USER,
    RS_RECALL_USER, /* each *_USER statement is followed by its *_SESSION twin */
    RS_RECALL_SESSION,
    RS_EMBEDDED_USER,
    RS_EMBEDDED_SESSION,
    RS__COUNT
};

/* The writer's connection, the writer thread's alone once open. */
struct sqlite_ckpt;
struct walflush;

struct sqlite_db {
    char *path;
    struct store_opts opts;
    sqlite3 *db;
    sqlite3_stmt *stmt[ST__COUNT];
    json_t *sids;             /* the writer's session cache (sqlite_exec.h) */
    int embedded;             /* the embeddings table may hold a row */
    struct sqlite_reader *wr; /* reads inside the writer's transaction (the stop-time dump) */
    /* frames in the WAL after the last commit (the WAL hook), and whether the writer's last
     * checkpoint failed (logged once, until one succeeds again) */
    int wal_frames, ckpt_failing;
    int ckpt_next;                  /* frames at which the checkpointer is asked again */
    struct sqlite_ckpt *ckpt_bulk;  /* past the bound: the thread asked for the bulk's pass */
    long ckpt_groups, ckpt_batches; /* the writer's transactions and their batches since */
    struct sqlite_ckpt *ckpt;       /* the checkpointer thread under load (memory/sqlite_ckpt.h) */
    struct sqlite_ckpt *ckpt_idle;  /* and the one at SCHED_IDLE, for the passes of light load */
    atomic_uint_fast64_t n_ckpt;    /* the writer's own checkpoints; read by /metrics */
    struct purge_pass purge;        /* retention's pass under way (purge.h) */
    struct walflush *flush;         /* the WAL's writeback as it grows (walflush.h), or NULL */
    int64_t page_size;              /* the bytes of a page, as a WAL frame holds one */
};

/* A reader's connection; the writer's own reader borrows the write connection. */
struct sqlite_reader {
    struct store_reader base; /* first: the store hands readers around as this */
    sqlite3 *db;
    int own_db;
    sqlite3_stmt *stmt[RS__COUNT];
};

/* The pragmas above, on a new connection. -1 on failure (sqlite3_errmsg says why). */
int sqlite_schema_setup(sqlite3 *db);
/* Apply the missing migrations; -1 with *err set when one fails or the database is newer. */
int sqlite_schema_migrate(sqlite3 *db, char **err);
/* Prepare every writer statement; -1 with *err set. */
int sqlite_schema_prepare(struct sqlite_db *st, char **err);
/* Prepare every reader statement on r->db; -1 on failure. */
int sqlite_schema_prepare_reader(struct sqlite_reader *r);
/* Run sql on db, logging a failure; 0 or -1. */
int sqlite_schema_exec(sqlite3 *db, const char *sql);

#endif
