/*
 * sqlite: the embedded backend of the store (store_backend.h), the default — one SQLite file,
 * nothing to set up. One write connection, the writer thread's, on memory/walbuf's VFS (a
 * transaction's WAL frames go out in one system call rather than two a page); read-only
 * connections for the workers (sqlite_read.h); the schema and its migrations in
 * sqlite_schema.h; a batch's operations in sqlite_exec.h.
 *
 * Upkeep: after a group's completions are handed over (settle), never inside the COMMIT those
 * completions wait for, the WAL checkpoint: on threads of its own beside the writer, one at
 * SCHED_IDLE for light load (sqlite_ckpt.h), or by the writer when steady load outgrew them;
 * retention deletes in transactions of a few hundred sessions so that commits queued
 * meanwhile wait little.
 */
#ifndef MEMPROXY_SQLITE_H
#define MEMPROXY_SQLITE_H

#include "memory/store_backend.h"

extern const struct store_backend sqlite_backend;

#endif
