/*
 * pgsql: the PostgreSQL backend of the store (store_backend.h), for running memproxy as
 * several replicas on one database (docs/deploy.md). Selected by storage.url. One write
 * connection, the writer thread's; a connection per reader (pgsql_read.h); the schema and its
 * migrations in pgsql_schema.h; a batch's operations in pgsql_exec.h.
 *
 * Start: when the server cannot be reached, open tries again (a log line each time, waiting
 * up to 5 s between tries) rather than exit, so that replicas started before their database
 * come up on their own. Running: a transaction that fails because the server went away fails
 * its batches (chat answers still go out, their end marked storage_failed); the next one
 * connects again.
 *
 * Upkeep: retention deletes in transactions of a few hundred sessions, rows locked with SKIP
 * LOCKED so that replicas purging together neither wait for nor repeat each other's work;
 * autovacuum reclaims the space (docs/deploy.md says how to keep it ahead).
 */
#ifndef MEMPROXY_PGSQL_H
#define MEMPROXY_PGSQL_H

#include "memory/store_backend.h"

extern const struct store_backend pgsql_backend;

/* Whether where names a PostgreSQL database (a postgres:// or postgresql:// URI, or a libpq
 * key=value string) rather than a SQLite file. */
int pgsql_is_url(const char *where);

#endif
