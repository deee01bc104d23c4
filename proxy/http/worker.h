/*
 * worker: one network thread's pieces (struct worker) and what a handler does with its own
 * worker: hold it while work outside a relay is under way, tell it a response's last bytes are
 * on their way, write them now.
 *
 * struct worker is public because every request handler runs on one and needs its pieces;
 * handlers read its fields and change only what their own module owns. server.c makes the
 * workers and runs their loops; this module knows nothing of the server, so the handlers and
 * the background jobs include it without reaching back into server.h.
 */
#ifndef MEMPROXY_WORKER_H
#define MEMPROXY_WORKER_H

#include "base/util.h"
#include "config/cfg.h"

#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stddef.h>

struct server;
struct readpool;
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
    struct server *srv; /* server.c's own */
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct conn_table *conns; /* its client connections' watches (conn.c) */
    struct upstream *up;
    struct metrics *metrics;
    struct memory *mem;           /* shared by all workers */
    struct memory_reader *reader; /* this worker's read connection */
    struct readpool *pool;        /* shared stores: where worker_read's reads run, else NULL */
    struct jmemo *memo;           /* messages read before (server.parse_memo), or NULL */
    struct lifecycle *lifecycle;  /* the idle sweeper (the jobs loop's, when configured) */
    struct relay *relays;         /* in flight; owned by relay.c */
    /* the process's background jobs, all run on the jobs loop (a worker that serves no
     * requests: server.c); NULL when not configured */
    struct hook *hooks;
    struct summarizer *summarizer;
    struct embedder *embedder;
    struct metrics *const *all_metrics; /* every loop's, nmetrics of them, for a scrape */
    size_t nmetrics;
    size_t active;  /* relays in flight */
    size_t sending; /* responses handed to evhttp, not yet fully written */
    size_t held;    /* other work the loop must finish first (worker_hold) */
    int draining;
    int forced;                /* the drain deadline passed: the loop ends whatever is held */
    int64_t date_sec;          /* the second date was made for (respond_date) */
    char date[UTIL_HTTP_DATE]; /* the Date header's value, made once a second */
    struct event *force_timer;
    struct event *accept_retry; /* accepting again after accept() ran out of something */
    struct event *trim_timer;   /* worker_trim_later(), made when first needed */
    int access_quiet;       /* > 0: the response being sent is the chat path's, which writes its own
                               access line (proxy/http/access.h) */
    long accept_backoff_ms; /* 0: accepting normally */
    long accept_pauses;     /* in this episode, for the log line that ends it */
    int accept_probing;     /* accepting again; a pause without an error ends the episode */
    pthread_t thread;
};

/*
 * A read that must not make the loop wait (memory/readpool.h): with a shared store (w->pool),
 * fn(reader, arg) runs on a pool thread with that thread's reader and done(arg, failed) on
 * this worker's loop afterwards; with SQLite both run here and now, with w->reader, before
 * worker_read returns. The worker is held in between (a draining loop waits for done).
 */
typedef void (*worker_read_fn)(struct memory_reader *r, void *arg);
typedef void (*worker_read_done)(void *arg, int failed);
void worker_read(struct worker *w, worker_read_fn fn, worker_read_done done, void *arg);
/* The same for a chat request's reads: they go ahead of the REST API's (readpool.h's lanes). */
void worker_read_call(struct worker *w, worker_read_fn fn, worker_read_done done, void *arg);

/* Nothing in flight, being written or held: a draining worker may end its loop. */
int worker_idle(const struct worker *w);
/* Called whenever something in flight ends (a relay, a held piece of work, a response
 * written): finishes the drain when it was the last one. */
void worker_idle_check(struct worker *w);

/* Work outside a relay that a draining loop must wait for (a commit being awaited after its
 * client left): hold before it starts, release when it is done. */
void worker_hold(struct worker *w);
void worker_release(struct worker *w);

/*
 * Call just before handing req's final bytes to evhttp (evhttp_send_reply or
 * evhttp_send_reply_end): a draining worker waits until they are written (or the client is
 * gone) before its loop ends. Sets req's on-complete and its connection's close callback.
 */
void worker_response_sending(struct worker *w, struct evhttp_request *req);

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
void worker_write_now(struct worker *w, struct evhttp_connection *evcon);

/*
 * A large request (a body of WORKER_TRIM_BODY or more) was read: give the heap it used back
 * to the system a while after the last one (malloc_trim). Its tree's many small blocks go back
 * to glibc's arenas when it is freed, and stay there: one 4 MiB body of 1.3 M values left
 * ~400 MiB of RSS behind for good. A trim walks the arenas (milliseconds), so it runs
 * WORKER_TRIM_DELAY_MS after the last large request: while they keep coming, the freed heap
 * is what the next one reuses.
 */
#define WORKER_TRIM_BODY     (1024 * 1024)
#define WORKER_TRIM_DELAY_MS 2000
void worker_trim_later(struct worker *w);

#endif
