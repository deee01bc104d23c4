/*
 * upstream: HTTP requests to upstream LLM APIs, driven by libcurl's multi interface on a
 * worker's libevent base (the pattern of curl's hiperfifo.c example: curl tells us which
 * sockets to watch and when to wake it; libevent does the waiting). Nothing here blocks.
 *
 * One struct upstream per worker thread. It keeps curl's connection pool (so keep-alive
 * connections to an upstream are reused) and a small pool of easy handles.
 *
 * Timeouts of a configured upstream: connect_timeout (connect and TLS; reported as
 * UPSTREAM_UNREACHABLE, as a refused connection is), first_byte_timeout (the response
 * headers), idle_timeout (the longest silence between bytes after the headers, measured by
 * our timer: curl's low-speed check averages over whole seconds and let 3-5 s silences
 * through a 2 s limit), total_timeout. A transfer paused for a slow client is not idle.
 *
 * A transfer reports through three callbacks, always on the worker's thread:
 *   on_head  once, when the response headers are complete (status, content type);
 *   on_body  for each piece of the body, which may ask to pause (backpressure);
 *   on_done  exactly once at the end, whatever happened, unless upstream_cancel() was called.
 * After on_done returns the transfer is freed. upstream_cancel() frees it at once, closes its
 * connection when the response was not complete, and is safe to call from any callback.
 *
 * Ownership: the caller keeps the request body alive until on_done or upstream_cancel().
 */
#ifndef MEMPROXY_UPSTREAM_H
#define MEMPROXY_UPSTREAM_H

#include "config/cfg.h"

#include <event2/event.h>
#include <stddef.h>

struct upstream;
struct upstream_xfer;

enum upstream_result {
    UPSTREAM_OK,
    UPSTREAM_UNREACHABLE, /* no response: refused, DNS, TLS, reset before the headers */
    UPSTREAM_TIMEOUT,     /* no response headers within first_byte_timeout or the total */
    UPSTREAM_IDLE,        /* after the headers, no byte within idle_timeout */
    UPSTREAM_BROKEN,      /* failed after the headers: reset, total timeout */
    UPSTREAM_ABORTED,     /* a callback asked to stop */
};

enum upstream_body_rc { UPSTREAM_BODY_OK, UPSTREAM_BODY_PAUSE, UPSTREAM_BODY_ABORT };

struct upstream_handler {
    /* Return 0 to receive the body, -1 to abort (on_done then reports UPSTREAM_ABORTED). */
    int (*on_head)(void *arg, long status, const char *content_type);
    enum upstream_body_rc (*on_body)(void *arg, const char *data, size_t len);
    void (*on_done)(void *arg, enum upstream_result res, const char *detail);
};

struct upstream_request {
    const struct cfg_upstream *target; /* NULL: a plain POST to url (a webhook), below */
    const char *path;                  /* appended to target->url, e.g. "/chat/completions" */
    const char *body;                  /* NULL for GET */
    size_t body_len;
    int stream; /* ask for text/event-stream */
    /* With target NULL: the whole URL, extra header lines ("Name: value", NULL-terminated,
     * copied) and one time limit for connecting, the first byte and the whole transfer. */
    const char *url;
    const char *const *headers;
    long timeout_ms;
};

/* max_connections: idle upstream connections kept (CURLMOPT_MAXCONNECTS). */
struct upstream *upstream_create(struct event_base *base, const struct cfg *cfg);
void upstream_destroy(struct upstream *up);

/* Start a transfer; never NULL (a failure to start is reported through on_done later). */
struct upstream_xfer *upstream_start(struct upstream *up, const struct upstream_request *rq,
                                     const struct upstream_handler *h, void *arg);
/*
 * Let curl work on new transfers now instead of on its 0 ms timer one loop turn later, so a
 * request is on the wire before the current callback returns. Any transfer may finish inside
 * (on_done runs): call it after storing what upstream_start() returned, and touch nothing
 * that on_done may free afterwards.
 */
void upstream_kick(struct upstream *up);
void upstream_cancel(struct upstream_xfer *x);
/* The response's Retry-After (delay-seconds or an HTTP date, printable ASCII, at most 63
 * bytes), "" when it had none: passed on with a 429 or 503 the client gets. */
const char *upstream_retry_after(const struct upstream_xfer *x);
/* Resume a transfer whose on_body asked to pause. Safe outside curl callbacks only. */
void upstream_resume(struct upstream_xfer *x);
int upstream_paused(const struct upstream_xfer *x);

/* Call once before any thread starts / after all have stopped. With jalloc active, libcurl
 * allocates through it (config/jalloc.h). It reads the proxy environment (http_proxy,
 * https_proxy, all_proxy, no_proxy, as curl does): later changes to it are not seen. */
int upstream_global_init(void);
void upstream_global_cleanup(void);

#endif
