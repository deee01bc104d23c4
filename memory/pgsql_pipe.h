/*
 * pgsql_pipe: a group of batches in one round trip. The writer's transactions go statement
 * by statement (pgsql_exec.h) when some statement needs an earlier one's answer (a new
 * session's row id for an import, a stop's dump read inside the transaction, an embedding
 * queued for a turn the INSERT may have skipped). The batches of a recorded call need none:
 * each finds its session by (tenant, id) inside its statements, and a turn written to a
 * stopped session reopens it in the same statement (a CTE). Those groups go out in libpq's
 * pipeline mode — BEGIN, every statement, COMMIT and a sync at once — so a group costs one
 * round trip and the commit's sync, however many batches and turns it holds (bench/pgfloor:
 * "transaction pipelined").
 *
 * A statement that fails makes the server skip the rest up to the sync: the group is rolled
 * back, and the store runs each batch alone again (store.c), as with SQLite.
 */
#ifndef MEMPROXY_PGSQL_PIPE_H
#define MEMPROXY_PGSQL_PIPE_H

#include "memory/pgsql_schema.h"
#include "memory/store_batch.h"

/* Whether every batch of list can go in one round trip. */
int pgsql_pipe_fits(const struct store_batch *list);
/* Run list's batches in one pipelined transaction, setting each one's ok and version: 0 when
 * it committed, -1 when it was rolled back. */
int pgsql_pipe_transaction(struct pgsql_db *st, struct store_batch *list);

#endif
