/*
 * sqlite_exec: applying a batch's operations (store_batch.h) to the SQLite backend's write
 * connection, inside the transaction sqlite.c opened: turns bound to their columns, the
 * session's row found or made, a stop's webhook dumps queued with it, the REST API's and the
 * background jobs' changes. A failed operation fails its batch (b->ok 0); sqlite.c then rolls
 * the transaction back.
 */
#ifndef MEMPROXY_SQLITE_EXEC_H
#define MEMPROXY_SQLITE_EXEC_H

#include "memory/sqlite_schema.h"
#include "memory/store_batch.h"

/* The writer remembers the sessions it has seen (key -> [sid, last touch, running]) so a
 * batch of a known session costs no lookup; updated_ms (idle time, retention) is refreshed at
 * most this often per session. "running" is set once the writer has made the session running
 * (sqlite_exec_reopen) and dropped with the entry when a stop runs, so a recorded turn does not
 * UPDATE its session's status every time. Cleared when it grows past its cap and whenever a
 * write fails (a rolled back batch may have created or reopened the session it remembers). */
#define STORE_SID_CACHE 100000

/* Step s once, then reset it and clear its bindings; -1 (logged) when it failed. */
int sqlite_exec_step(sqlite3 *db, sqlite3_stmt *s);
/* Run one of the writer's statements that takes no parameters (BEGIN, COMMIT, ROLLBACK). */
int sqlite_exec_run(struct sqlite_db *st, enum sqlite_stmt which);
/* Apply b inside the open transaction, setting b->ok. */
void sqlite_exec_apply(struct sqlite_db *st, struct store_batch *b);

#endif
