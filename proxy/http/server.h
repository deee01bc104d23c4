/*
 * server: the listening socket and the worker threads.
 *
 * One socket is bound once; every worker accepts from it on its own event_base with its own
 * evhttp and its own upstream client, so a request lives its whole life on one thread and
 * needs no locks. TCP_NODELAY is set on the listening socket: Linux copies it to every
 * accepted socket, which evhttp would otherwise leave with Nagle's algorithm on.
 *
 * Shutdown: SIGTERM or SIGINT makes every worker stop accepting and answer new requests on
 * kept-alive connections with 503; requests in flight (streams included) may finish for up to
 * server.shutdown_timeout, after which they are ended; then the process exits 0. A second
 * signal ends them at once.
 *
 * The workers themselves (struct worker, and what a handler does with its own) are
 * worker.h's; the server makes them, runs their threads and drains them. After the serving
 * workers it makes one more loop that accepts nothing, the jobs loop ("jobs"), where the
 * background jobs run (webhook deliveries, summaries, embeddings, idle stops), so that their
 * reads of a shared database never hold a request; and with PostgreSQL the read pool
 * (memory/readpool.h, storage.pool) that the workers' other reads go to.
 */
#ifndef MEMPROXY_SERVER_H
#define MEMPROXY_SERVER_H

#include "config/cfg.h"

struct memory;
struct server;

/* Bind the listening socket and set up the workers (not started), each with a reader of mem.
 * NULL and *err on failure. */
struct server *server_create(const struct cfg *cfg, struct memory *mem, char **err);

/* Start the workers, wait for SIGTERM/SIGINT, drain, join. Returns the exit status. */
int server_run(struct server *srv);

/* The port actually bound (useful with port 0). */
int server_port(const struct server *srv);

/* After server_run(): delivers the last storage reports (memory_drain), ends what remains,
 * frees the workers. The memory outlives it. */
void server_destroy(struct server *srv);

#endif
