/*
 * pgsql_schema: the PostgreSQL backend's schema, its migrations and its statements' text.
 *
 * Migrations: the schema version lives in the table memproxy_schema. Every replica that
 * starts applies the missing migrations in one transaction that first takes a
 * transaction-scoped advisory lock (pg_advisory_xact_lock: released by the COMMIT, so it
 * holds behind PgBouncer's transaction pooling too), so that replicas starting together
 * migrate once; a database whose version is newer than this binary's is refused.
 *
 * The tables mirror SQLite's (sqlite_schema.c) column for column: the same JSON comes out of
 * both. What differs: ids are identity columns, embeddings bytea, and the webhook outbox and
 * the job queues carry a lease owner (with the item's next try as the lease's end) so that
 * one replica works each item (pgsql_read.h).
 */
#ifndef MEMPROXY_PGSQL_SCHEMA_H
#define MEMPROXY_PGSQL_SCHEMA_H

#include "memory/pgsql_conn.h"
#include "memory/purge.h"
#include "memory/store_backend.h"

#include <stdatomic.h>

#define PGSQL_SCHEMA_VERSION 2

enum pgsql_stmt {
    PG_SESSION_ENSURE,
    PG_SESSION_SID,
    PG_SESSION_SET,
    PG_SESSION_SYSTEM,
    PG_SESSION_WINDOW,
    PG_WINDOW_TURNS,
    PG_INSERT,
    PG_UPDATE,
    PG_REPLACE,
    PG_STOP,
    PG_REOPEN,
    PG_DELETE,
    PG_RUNTIME,
    PG_PATCH,
    PG_PURGE,
    PG_PURGE_OUTBOX,
    PG_OUTBOX_ADD,
    PG_OUTBOX_RESULT,
    PG_OUTBOX_RETRY,
    PG_IMPORT,
    PG_USER_SESSIONS,
    PG_USER_BUMP,
    PG_PURGE_ERASED,
    PG_USER_EMBED_DEL, /* before PG_USER_SESSIONS: nothing of theirs is embedded meanwhile */
    PG_USER_SUMMARY_DEL,
    PG_USER_FACTS_DEL,
    PG_USER_OUTBOX_DEL,
    PG_USER_CACHE_DEL,
    PG_CACHE_PUT,
    PG_CACHE_EXPIRE,
    PG_SUMMARY_SET,
    PG_FACT_SET,
    PG_SUMMARY_FOLD,
    PG_FACT_SEEN,
    PG_FACT_DECAY,
    PG_FACT_FORGET,
    PG_SUMMARIZED,
    PG_SUMMARIZED_SEQ,
    PG_SUMMARY_RETRY,
    PG_OUTBOX_SUMMARY,
    PG_EMBED_QUEUE,
    PG_EMBED_FORGET,
    PG_EMBED_PUT,
    PG_EMBED_DONE,
    PG_EMBED_RETRY,
    /* a batch in a pipelined group (pgsql_pipe.h): the session by $1 tenant, $2 id */
    PG_P_SESSION_SET,
    PG_P_SYSTEM,
    PG_P_WINDOW,
    PG_P_WINDOW_TURNS,
    PG_P_INSERT,
    PG_P_UPDATE,
    PG_P_REPLACE,
    PG_RELEASE_OUTBOX, /* the three in a row */
    PG_RELEASE_SUMMARIES,
    PG_RELEASE_CALLSUMS,
    PG_RELEASE_EMBEDS,
    /* reads */
    PG_R_TURNS,
    PG_R_TURNS_OF,
    PG_R_SESSION,
    PG_R_SUMMARY,
    PG_R_FACTS,
    PG_R_LIST,
    PG_R_OUTBOX_DUE,
    PG_R_OUTBOX_NEXT,
    PG_R_DELIVERIES,
    PG_R_IDLE,
    PG_R_TO_SUMMARIZE,
    PG_R_SUMMARY_NEXT,
    PG_R_RUNNING_TO_SUMMARIZE,
    PG_R_CACHE_GET,
    PG_R_TO_EMBED,
    PG_R_EMBED_NEXT,
    PG_R_VERSION,
    PG_R_SUMMARY_OF, /* a user's memory: $3, or else the session ($1, $2)'s user */
    PG_R_FACTS_OF,
    PG_R_SESSION_USER,
    PG_R_RECALL_USER, /* each *_USER statement is followed by its *_SESSION twin */
    PG_R_RECALL_SESSION,
    PG_R_EMBEDDED_USER,
    PG_R_EMBEDDED_SESSION,
    PG__COUNT
};
_Static_assert(PG__COUNT <= PGSQL_MAX_STATEMENTS, "raise PGSQL_MAX_STATEMENTS");

struct pgsql_reader;

/* The writer's connection, the writer thread's alone once open. */
struct pgsql_db {
    char *url;
    struct store_opts opts;
    long statement_timeout_ms;
    int64_t lease_ms;        /* a queue item taken is this replica's this long (pgsql_read.h) */
    int prepare;             /* named statements on every connection (pgsql_conn_set_prepare) */
    struct purge_pass purge; /* retention's pass under way (purge.h) */
    int erased;              /* erased users' sessions may be left to delete */
    long erase_chunk;        /* how many of them the next transaction deletes */
    char owner[40];          /* this replica's name on what it takes: random, per process */
    struct pgsql_conn *c;
    struct pgsql_reader *wr; /* reads inside the writer's transaction (a stop's dump) */
    atomic_uint_fast64_t n_upkeep;
};

/* Run statement which with p (NULL: none; cleared after): its result, or NULL (logged) on
 * failure. */
PGresult *pgsql_exec_stmt(struct pgsql_conn *c, enum pgsql_stmt which, struct pgsql_params *p);
/* The same, throwing the result away: the rows it changed, or -1 on failure. */
int64_t pgsql_exec_changes(struct pgsql_conn *c, enum pgsql_stmt which, struct pgsql_params *p);
/* The text of statement which. */
const char *pgsql_schema_sql(enum pgsql_stmt which);
/* Apply the missing migrations (see above); -1 with *err set when one fails or the
 * database is newer than this binary. */
int pgsql_schema_migrate(struct pgsql_conn *c, char **err);

#endif
