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
 * struct worker is public because every request handler runs on one and needs its pieces;
 * handlers read its fields and change only what their own module owns.
 */
#ifndef MEMPROXY_SERVER_H
#define MEMPROXY_SERVER_H

#include "config/cfg.h"
#include "base/util.h"

#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stddef.h>

struct server;
struct relay;
struct metrics;
struct upstream;
struct memory;
struct memory_reader;
struct hook;
struct summarizer;
struct embedder;
struct lifecycle;
struct conn_table;

struct worker {
    int id;
    char name[16];
    const struct cfg *cfg;
    struct server *srv;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct conn_table *conns; /* its client connections' watches (conn.c) */
    struct upstream *up;
    struct metrics *metrics;
    struct memory *mem;           /* shared by all workers */
    struct memory_reader *reader; /* this worker's read connection */
    struct jmemo *memo;           /* messages read before (server.parse_memo), or NULL */
    struct lifecycle *lifecycle;  /* the idle sweeper (the first worker's, when configured) */
    struct relay *relays;         /* in flight; owned by relay.c */
    size_t active;                /* relays in flight */
    size_t sending;               /* responses handed to evhttp, not yet fully written */
    size_t held;                  /* other work the loop must finish first (server_hold) */
    int draining;
    int forced;                /* the drain deadline passed: the loop ends whatever is held */
    int64_t date_sec;          /* the second date was made for (respond_date) */
    char date[UTIL_HTTP_DATE]; /* the Date header's value, made once a second */
    struct event *force_timer;
    pthread_t thread;
};

/* Bind the listening socket and set up the workers (not started), each with a reader of mem.
 * NULL and *err on failure. */
struct server *server_create(const struct cfg *cfg, struct memory *mem, char **err);

/* Start the workers, wait for SIGTERM/SIGINT, drain, join. Returns the exit status. */
int server_run(struct server *srv);

/* The port actually bound (useful with port 0). */
int server_port(const struct server *srv);

/* The webhook deliverer, the summarizer and the embedder (all run on the first worker), or
 * NULL when not configured. */
struct hook *server_hooks(const struct server *srv);
struct summarizer *server_summarizer(const struct server *srv);
struct embedder *server_embedder(const struct server *srv);

/* Every worker's metrics set, for a scrape; *n gets the count. */
struct metrics *const *server_metrics(const struct server *srv, size_t *n);

/* Called by relay.c whenever a relay ends: finishes the drain when it was the last one. */
void server_worker_idle_check(struct worker *w);

/* Work outside a relay that a draining loop must wait for (a commit being awaited after its
 * client left): hold before it starts, release when it is done. */
void server_hold(struct worker *w);
void server_release(struct worker *w);

/*
 * Call just before handing req's final bytes to evhttp (evhttp_send_reply or
 * evhttp_send_reply_end): a draining worker waits until they are written (or the client is
 * gone) before its loop ends. Sets req's on-complete and its connection's close callback.
 */
void server_response_sending(struct worker *w, struct evhttp_request *req);

/*
 * Write what evhttp has queued on evcon now, right after evhttp_send_reply*() queued it.
 * evhttp only enables the socket's write event, so the bytes would leave on the loop's next
 * turn, after an epoll_ctl and an epoll_wait: a few microseconds on every response and every
 * streamed event. What the socket does not take stays queued for evhttp's write event, and a
 * failed write is left for that event to see again and report, as before.
 *
 * When the socket took everything, what libevent's write event would do on finding the
 * output empty happens now: the event is disabled (in the loop turn it was enabled, so it
 * never reaches the kernel: two epoll_ctl and a loop turn saved per write) and evhttp's write
 * callback runs. After a chunk that is the chunk's callback (evhttp_send_reply_chunk_with_cb);
 * after a response's end (evhttp_send_reply, evhttp_send_reply_end) it is evhttp's
 * completion of the response: req's on-complete callback runs and req is freed, and so is
 * evcon if the connection is not kept alive. The caller must use neither afterwards. A kept
 * connection then waits for its next request with our read ahead of evhttp's (conn_sent).
 */
void server_write_now(struct worker *w, struct evhttp_connection *evcon);

/* After server_run(): delivers the last storage reports (memory_drain), ends what remains,
 * frees the workers. The memory outlives it. */
void server_destroy(struct server *srv);

#endif
