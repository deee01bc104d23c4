/*
 * conn: memproxy's own hold on each client connection of a worker — the hang-up watch and the
 * connection's close callback.
 *
 * evhttp stops reading a connection while it handles a request, so on its own it notices a
 * client that hangs up only when a write fails; a voice platform hangs up on barge-in, often
 * before the first token. A watched connection gets one persistent event of ours on its
 * socket (read and peer-closed) that stays for the connection's whole life. Two things
 * follow:
 *  - a hang-up during a watched request is seen at once (EPOLLRDHUP), from the moment the
 *    watch starts;
 *  - evhttp turning its own read event off at each request and on again after the response
 *    no longer changes what the kernel watches on the socket (ours stays), so no epoll_ctl is
 *    made per request: evhttp's toggling cost two per request, a per-request watch one or two
 *    more.
 * The price is that our event wakes up with evhttp's whenever request bytes arrive; it then
 * returns at once (evhttp is reading them). While evhttp is not reading, bytes can only be
 * the request just read (one wake-up, ignored) or a pipelined next request: then the watch
 * narrows to peer-closed only until the next watched request, so it never spins on them.
 *
 * evhttp has one close callback per connection; once a connection has a conn it belongs to
 * the conn, so everyone sets theirs through conn_set_closecb(), which works the same for
 * connections without one. The conn is freed when evhttp frees the connection.
 *
 * One table per worker (indexed by socket), used only on that worker's thread.
 *
 * conn_bufferevent_new() is the bufferevent evhttp reads each client connection with
 * (evhttp_set_bevcb): libevent 2.1 reads a socket at most 4096 bytes per wake-up
 * (EVBUFFER_MAX_READ; 2.2 makes it settable), so a 7 KB window of 32 messages cost evhttp
 * two wake-ups of the loop, two FIONREAD ioctls, two reads and two parsing passes. When one of
 * libevent's reads comes back full, the bytes already queued behind it are taken at once into
 * the same buffer, before evhttp is told of any: one more read, which finds the rest of the
 * request.
 *
 * Better still, on a kept-alive connection our event reads the next request itself: when it
 * wakes up before libevent's read while evhttp waits for a request, it reads what is queued
 * (one read for a request that fits 16 KiB) into evhttp's input and runs evhttp's read
 * callback; evhttp stops reading once it has the request, which takes libevent's read, due
 * next in the same loop turn, off the loop's list: one read instead of an ioctl and two. A
 * system call costs ~1 us on the VMs memproxy is measured on (bench/README.md). libevent runs
 * the events of one socket newest first, and evhttp adds its read event anew after each
 * response, so conn_sent() puts ours ahead again each time; where it does not run (a response
 * the socket did not take at once), libevent reads first, as above.
 */
#ifndef MEMPROXY_CONN_H
#define MEMPROXY_CONN_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdatomic.h>
#include <stddef.h>

struct conn_table;

typedef void (*conn_close_cb)(struct evhttp_connection *evcon, void *arg);

/*
 * evhttp's own errors. A request evhttp cannot hand over never reaches memproxy's routes:
 * a malformed request line or header, or headers over server.max_header_size (400), a body
 * far over server.max_body_size or a malformed chunked body (413; libevent 2.1 reports both
 * as "too long"), a method it was not told to allow (501). libevent 2.1 answers those with an
 * HTML page of its own and has no hook to change it (2.2's evhttp_set_errorcb). So the
 * connection's output is watched: when bytes are added to it while no request of
 * memproxy's is being answered on it (conn_request .. conn_response_done), and they are one
 * of evhttp's error pages (its status line and its "<HTML><HEAD>" body), they are replaced,
 * before the socket is written (libevent writes on the next loop turn), by the same status
 * in the one JSON error shape, with Connection: close as evhttp's had. Anything else
 * evhttp writes on its own (a "100 Continue") is left as it is.
 */
enum { CONN_OWN_400, CONN_OWN_413, CONN_OWN_501, CONN_OWN_COUNT };

/*
 * Counting connections (server.max_connections). libevent 2.1's evhttp has no connection
 * limit and no callback for a new connection (2.2 adds both), so the table learns of one
 * from its bufferevent: conn_bufferevent_new() counts it in *open (shared by the workers)
 * and, once evhttp has set the connection up (the same loop turn, through an event of the
 * table's), finds the evhttp connection behind the bufferevent's callback argument and takes
 * its close callback, which counts it out. Past max, the connection is answered at once with
 * a 503 in the one JSON error shape (busy: its bytes, made once) and closed: a client is
 * refused politely before the process runs out of file descriptors.
 */
struct conn_limits {
    atomic_long *open; /* client connections of all workers */
    long max;          /* server.max_connections */
    const char *busy;  /* the whole response past max (copied) */
    size_t busy_len;
    long request_ms;  /* server.request_timeout: a request's first byte to its last */
    const char *slow; /* the whole response when it passes (copied) */
    size_t slow_len;
    /* the whole responses that take the place of evhttp's own error pages (below), by
     * status: 400, 413 and 501 (copied) */
    const char *own[CONN_OWN_COUNT];
    size_t own_len[CONN_OWN_COUNT];
    /* told of each answer given here rather than by the routes (the 503 past max, the 408,
     * evhttp's errors in the JSON shape), with its status: memproxy_requests_total counts
     * them as the routes' are counted */
    void (*answered)(void *arg, int status);
    void *answered_arg;
};

/*
 * A request's deadline (server.request_timeout). evhttp's timeout measures inactivity, so a
 * client sending a byte every few seconds kept a connection, and the buffers of a half-read
 * request, forever. The deadline starts with the first byte of a request (the input
 * buffer's callback sees every read) and ends when evhttp hands the whole request over
 * (conn_request); past it the client gets a 408 in the one JSON error shape and the
 * connection is closed. A connection with a request being answered is never cut: the next
 * request's clock starts after the response (conn_response_done).
 *
 * NUL bytes: evhttp keeps header values as C strings, so "X-Session-Id: ab\0cd" read as "ab".
 * No request memproxy serves may hold a NUL anywhere (its bodies are JSON, where a raw NUL is
 * invalid), so the same callback looks for one in every byte read, and conn_request reports
 * it.
 */
struct conn_table *conn_table_create(struct event_base *base, const struct conn_limits *lim);

/* For evhttp_set_bevcb(http, conn_bufferevent_new, table): a socket bufferevent (no socket
 * yet, closed with it) that reads ahead as above and is counted. evhttp owns it. */
struct bufferevent *conn_bufferevent_new(struct event_base *base, void *table);

/* After evhttp_free(): every connection's close has freed its conn by then. */
void conn_table_destroy(struct conn_table *t);

/*
 * Watch evcon, whose request evhttp has just handed over (it is not reading), until
 * conn_unwatch(): on_hup(arg) runs when the peer hangs up, and must free the connection
 * (evhttp_connection_free), which frees the conn; on_close(evcon, arg) runs when evhttp frees
 * the connection itself (a failed write). Both are the caller's until conn_unwatch().
 */
void conn_watch(struct conn_table *t, struct evhttp_connection *evcon, void (*on_hup)(void *),
                conn_close_cb on_close, void *arg);

/* Stop calling on_hup and on_close; the event stays on the socket for the next request. */
void conn_unwatch(struct conn_table *t, struct evhttp_connection *evcon);

/* evhttp has just completed a response on socket fd (the connection may be gone) and, when it
 * keeps the connection, added its read event again, ahead of ours: put ours ahead, so that it
 * reads the next request (above). Adds our other event before taking this one off, so the
 * socket's interest in the kernel never changes. */
void conn_sent(struct conn_table *t, evutil_socket_t fd);

/* evhttp handed over evcon's request, read whole: its deadline ends. -1 when a NUL byte came
 * with it (the caller answers 400 and closes), else 0. */
int conn_request(struct conn_table *t, struct evhttp_connection *evcon);
/* evcon's response is written: the next request's deadline may start. */
void conn_response_done(struct conn_table *t, struct evhttp_connection *evcon);

/* evhttp_connection_set_closecb() for every connection, watched or not (NULL cb clears). */
void conn_set_closecb(struct conn_table *t, struct evhttp_connection *evcon, conn_close_cb cb,
                      void *arg);

#endif
