/*
 * pgsql_async: reads on a worker's event loop that never wait for PostgreSQL. One connection
 * per worker, non-blocking, in libpq's pipeline mode, watched by an event on the worker's
 * base: a job (a few statements that belong together, e.g. a session's version, row, turns
 * and its user's memory) goes out at once with a sync point after it, however many jobs are
 * on their way already, and its callback runs on the loop when its results are in. The
 * connection is made, and made again after it broke, the same way (PQconnectStart, polled
 * from the loop, after the server's name was looked up on a thread: pgsql_resolve.h); jobs
 * submitted meanwhile wait for it, and fail (results NULL) when it cannot be made.
 *
 * Ownership: pgsql_async_open() returns a channel closed with pgsql_async_close() on the
 * base's thread, which first runs the callbacks of jobs still on their way with failures.
 * A job's parameters are copied; its results belong to the channel (cleared after the
 * callback returns).
 */
#ifndef MEMPROXY_PGSQL_ASYNC_H
#define MEMPROXY_PGSQL_ASYNC_H

#include "memory/pgsql_schema.h"

#include <event2/event.h>

#define PGSQL_ASYNC_MAX_QUERIES 6 /* statements in one job */

struct pgsql_async;

/* res[i]: statement i's rows, or NULL when it failed (or the connection did). */
typedef void (*pgsql_async_cb)(void *arg, PGresult *const *res, int n);

/* A channel to st's database on base. Never fails: an unreachable server shows as failed
 * jobs (and a log line) until it can be reached. */
struct pgsql_async *pgsql_async_open(const struct pgsql_db *st, struct event_base *base);
void pgsql_async_close(struct pgsql_async *a);

/* Run n statements (which[i] with params[i], each cleared here) as one job. */
void pgsql_async_run(struct pgsql_async *a, const enum pgsql_stmt *which,
                     struct pgsql_params *params, int n, pgsql_async_cb cb, void *arg);

#endif
