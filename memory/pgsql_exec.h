/*
 * pgsql_exec: a batch's operations (store_batch.h) on the PostgreSQL backend's write
 * connection, inside the transaction pgsql.c opened; the same operations as sqlite_exec.h,
 * in PostgreSQL's SQL. A failed operation fails its batch (b->ok 0); pgsql.c then rolls the
 * transaction back.
 *
 * No session cache: with several replicas writing one database, what this writer saw of a
 * session (its row id, whether it is running) may have changed since, so every batch finds
 * its session's row (one INSERT .. ON CONFLICT .. RETURNING, which also touches updated_ms).
 */
#ifndef MEMPROXY_PGSQL_EXEC_H
#define MEMPROXY_PGSQL_EXEC_H

#include "memory/pgsql_schema.h"
#include "memory/store_batch.h"

/* A turn's columns from turn_id (at $first) to seq (at $first + 19), as PG_INSERT (first 2)
 * and PG_P_INSERT (4) take them; a changed turn's key (turn_id, role, turn_idx at $first on)
 * and the columns it changes after it, as PG_UPDATE and PG_REPLACE (2) and their pipelined
 * forms (4) take them. A change names its row by that key, not by seq: another replica may
 * have numbered the session's rows otherwise than the one that made the change (pgsql_exec_turn
 * says when), and a change by seq would then land on someone else's row. */
void pgsql_exec_bind_turn(struct pgsql_params *p, json_t *t, int first);
void pgsql_exec_bind_change(struct pgsql_params *p, json_t *d, int reply, int first);
/* Apply b inside the open transaction, setting b->ok. */
void pgsql_exec_apply(struct pgsql_db *st, struct store_batch *b);

#endif
