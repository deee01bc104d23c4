#include "proxy/http/conn.h"

#include "base/log.h"
#include "base/util.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum conn_mode {
    CONN_OFF,    /* no event on the socket */
    CONN_KEEP,   /* read and peer-closed: the socket's interest never changes per request */
    CONN_CLOSED, /* peer-closed only: bytes of a pipelined request are waiting */
};

struct conn {
    struct conn_table *t;
    struct evhttp_connection *evcon;
    evutil_socket_t fd;
    /* EV_READ | EV_CLOSED, two of them so that one can be put ahead of evhttp's read event
     * without the socket's interest ever dropping (conn_sent): keep[front] is the one added */
    struct event *keep[2];
    int front;
    struct event *closed; /* EV_CLOSED, made when first needed */
    enum conn_mode mode;
    int fresh; /* watched since the last wake-up: a read wake-up may be the request's bytes */
    void (*on_hup)(void *);
    void *hup_arg;
    conn_close_cb on_close;
    void *close_arg;
    struct event *deadline; /* server.request_timeout, from a request's first byte */
    int serving;            /* a request was handed over and is not answered yet */
    int nul;                /* a NUL byte was read since the last request was handed over */
    struct event *own;      /* looks at what evhttp wrote on its own (conn_own_cb) */
};

struct conn_table {
    struct event_base *base;
    int early_close; /* the backend reports a peer's close apart from readable bytes */
    struct conn **byfd;
    size_t cap;
    atomic_long *open; /* client connections of all workers */
    long max;
    char *busy; /* the whole 503 response past max */
    size_t busy_len;
    struct timeval request_tv;
    char *slow; /* the whole 408 response past request_tv */
    size_t slow_len;
    char *own[CONN_OWN_COUNT]; /* in place of evhttp's error pages */
    size_t own_len[CONN_OWN_COUNT];
    void (*answered)(void *arg, int status);
    void *answered_arg;
    struct event *adopt;      /* runs conn_adopt_all once evhttp has set new connections up */
    struct conn_fresh *fresh; /* accepted, not adopted yet */
    size_t nfresh, fresh_cap;
};

/* An accepted connection until conn_adopt, a reference held on its bufferevent; over: it
 * was counted in past server.max_connections. Decided when it is counted, not at the
 * adoption: by then another worker's accepts may have counted in more, and a connection
 * within the cap was refused with them (41 of 60 refused at a cap of 20, the fault suite's
 * test on a busy machine). */
struct conn_fresh {
    struct bufferevent *bev;
    int over;
};

static void conn_event_cb(evutil_socket_t fd, short what, void *arg);

enum {
    CONN_LIBEVENT_READ = 4096, /* libevent 2.1's most per read (EVBUFFER_MAX_READ) */
    /* One read ahead asks for this much: the rest of libevent's chain (8 KiB for its 4 KiB
     * read) and a new one of 16 KiB with its header, a size jalloc keeps. evbuffer rounds a
     * chain up to a power of two, so asking for 64 KiB would cost a 128 KiB block, past
     * malloc's mmap threshold, per request. */
    CONN_READ_AHEAD = 16 * 1024 - 64,
    CONN_READ_AHEAD_MAX = 256 * 1024, /* one wake-up reads ahead no more, then others' turn */
};

/* Our own commit calls the callback again: it must not read ahead of itself. */
static _Thread_local int conn_reading_ahead;
/* The conn whose bytes we are handing to evhttp (conn_read_first): the request evhttp finds
 * in them is not one it read in this loop turn behind our back (conn_watch's fresh). */
static _Thread_local const struct conn *conn_serving;

/* One read of what is queued on fd into buf: the bytes read (0 when there were none, or at
 * the end, or on an error: libevent's next read sees those), *full when it filled the space. */
static size_t conn_read_ahead(struct evbuffer *buf, evutil_socket_t fd, int *full)
{
    struct evbuffer_iovec v[2];
    struct iovec iov[2];
    size_t room = 0;
    int nv = evbuffer_reserve_space(buf, CONN_READ_AHEAD, v, 2);
    for (int i = 0; i < nv; i++) {
        iov[i] = (struct iovec){.iov_base = v[i].iov_base, .iov_len = v[i].iov_len};
        room += v[i].iov_len;
    }
    ssize_t got = nv > 0 ? readv(fd, iov, nv) : -1;
    *full = got > 0 && (size_t)got == room;
    if (got <= 0)
        return 0;
    size_t left = (size_t)got;
    for (int i = 0; i < nv; i++) {
        v[i].iov_len = left < v[i].iov_len ? left : v[i].iov_len;
        left -= v[i].iov_len;
    }
    conn_reading_ahead = 1;
    evbuffer_commit_space(buf, v, nv);
    conn_reading_ahead = 0;
    return (size_t)got;
}

/* Read what is queued on fd into buf while reads come back full, up to CONN_READ_AHEAD_MAX:
 * the bytes read. */
static size_t conn_read_all(struct evbuffer *buf, evutil_socket_t fd)
{
    size_t total = 0;
    int full = 1;
    while (full && total < CONN_READ_AHEAD_MAX)
        total += conn_read_ahead(buf, fd, &full);
    return total;
}

/* The worker's table, for the input callbacks (their argument is the bufferevent). */
static _Thread_local struct conn_table *conn_self;

/* the statuses of CONN_OWN_* */
static const int conn_own_status[CONN_OWN_COUNT] = {400, 413, 501};

static void conn_answered(struct conn_table *t, int status)
{
    if (t->answered != NULL)
        t->answered(t->answered_arg, status);
}

/* The conn of the connection on fd, or NULL. */
static struct conn *conn_at(struct conn_table *t, evutil_socket_t fd)
{
    return t != NULL && fd >= 0 && (size_t)fd < t->cap ? t->byfd[fd] : NULL;
}

/* Bytes were read into a connection's input: a request's clock starts with its first byte;
 * a NUL among them is noted. */
static void conn_input_added(struct evbuffer *buf, const struct evbuffer_cb_info *info,
                             evutil_socket_t fd)
{
    struct conn_table *t = conn_self;
    struct conn *c = conn_at(t, fd);
    if (c == NULL)
        return;
    if (!c->serving && !evtimer_pending(c->deadline, NULL))
        evtimer_add(c->deadline, &t->request_tv);
    struct evbuffer_ptr at;
    struct evbuffer_iovec v[8];
    size_t done = 0;
    while (!c->nul && done < info->n_added &&
           evbuffer_ptr_set(buf, &at, info->orig_size + done, EVBUFFER_PTR_SET) == 0) {
        int n = evbuffer_peek(buf, (ev_ssize_t)(info->n_added - done), &at, v, 8);
        if (n <= 0)
            break;
        for (int i = 0; i < n && i < 8 && done < info->n_added; i++) {
            size_t len = v[i].iov_len < info->n_added - done ? v[i].iov_len : info->n_added - done;
            c->nul |= memchr(v[i].iov_base, '\0', len) != NULL;
            done += len;
        }
    }
}

static void conn_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    if (info->n_added == 0)
        return; /* most calls: evhttp draining what it parsed */
    evutil_socket_t fd = bufferevent_getfd(arg);
    conn_input_added(buf, info, fd);
    if (info->n_added != CONN_LIBEVENT_READ || conn_reading_ahead)
        return;
    if (fd >= 0)
        conn_read_all(buf, fd);
}

/* Bytes were added to a connection's empty output (a response starts there: evhttp takes
 * the next request only once the last response is written): while none of memproxy's
 * requests is being answered on it, they are evhttp's own (conn_own_cb looks at them once
 * evhttp is done). */
static void conn_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    (void)buf;
    if (info->n_added == 0 || info->orig_size != 0)
        return;
    struct conn *c = conn_at(conn_self, bufferevent_getfd(arg));
    if (c != NULL && !c->serving)
        event_active(c->own, EV_TIMEOUT, 0);
}

struct bufferevent *conn_bufferevent_new(struct event_base *base, void *table)
{
    struct conn_table *t = table;
    conn_self = t; /* this worker's thread */
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL)
        log_fatal("conn: cannot create a bufferevent");
    evbuffer_add_cb(bufferevent_get_input(bev), conn_input_cb, bev);
    evbuffer_add_cb(bufferevent_get_output(bev), conn_output_cb, bev);
    long before = atomic_fetch_add_explicit(t->open, 1, memory_order_relaxed);
    bufferevent_incref(bev); /* readable after evhttp frees it, until conn_adopt */
    t->fresh = xgrow(t->fresh, &t->fresh_cap, t->nfresh, sizeof(*t->fresh));
    t->fresh[t->nfresh++] = (struct conn_fresh){bev, before >= t->max};
    event_active(t->adopt, EV_TIMEOUT, 0);
    return bev;
}

static void conn_adopt_all(evutil_socket_t fd, short what, void *arg);

struct conn_table *conn_table_create(struct event_base *base, const struct conn_limits *lim)
{
    struct conn_table *t = xcalloc(1, sizeof(*t));
    t->base = base;
    t->early_close = (event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE) != 0;
    t->open = lim->open;
    t->max = lim->max;
    t->busy = xstrndup(lim->busy, lim->busy_len);
    t->busy_len = lim->busy_len;
    t->slow = xstrndup(lim->slow, lim->slow_len);
    t->slow_len = lim->slow_len;
    t->answered = lim->answered;
    t->answered_arg = lim->answered_arg;
    for (int k = 0; k < CONN_OWN_COUNT; k++) {
        t->own[k] = xstrndup(lim->own[k], lim->own_len[k]);
        t->own_len[k] = lim->own_len[k];
    }
    struct timeval tv = {.tv_sec = lim->request_ms / 1000,
                         .tv_usec = (lim->request_ms % 1000) * 1000};
    /* every connection's deadline has this one duration: libevent keeps such timeouts in a
     * queue (O(1) to add and remove) instead of its heap */
    const struct timeval *common = event_base_init_common_timeout(base, &tv);
    t->request_tv = common != NULL ? *common : tv;
    t->adopt = event_new(base, -1, 0, conn_adopt_all, t);
    return t;
}

static void conn_free(struct conn *c)
{
    c->t->byfd[c->fd] = NULL;
    event_free(c->keep[0]);
    event_free(c->keep[1]);
    if (c->closed != NULL)
        event_free(c->closed);
    event_free(c->deadline);
    event_free(c->own);
    free(c);
}

void conn_table_destroy(struct conn_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nfresh; i++)
        bufferevent_decref(t->fresh[i].bev);
    for (size_t i = 0; i < t->cap; i++)
        if (t->byfd[i] != NULL)
            conn_free(t->byfd[i]);
    event_free(t->adopt);
    free(t->fresh);
    free(t->byfd);
    free(t->busy);
    free(t->slow);
    for (int k = 0; k < CONN_OWN_COUNT; k++)
        free(t->own[k]);
    free(t);
}

static evutil_socket_t conn_fd(struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    return bev != NULL ? bufferevent_getfd(bev) : -1;
}

/* The conn of evcon, or NULL. */
static struct conn *conn_find(struct conn_table *t, struct evhttp_connection *evcon)
{
    evutil_socket_t fd = conn_fd(evcon);
    if (fd < 0 || (size_t)fd >= t->cap || t->byfd[fd] == NULL)
        return NULL;
    if (t->byfd[fd]->evcon != evcon) { /* cannot happen: evhttp closes through conn_closed */
        log_warn("conn: socket %d changed hands unseen", (int)fd);
        conn_free(t->byfd[fd]);
        return NULL;
    }
    return t->byfd[fd];
}

static void conn_set_mode(struct conn *c, enum conn_mode mode)
{
    if (c->mode == mode)
        return;
    if (c->mode == CONN_KEEP)
        event_del(c->keep[c->front]);
    else if (c->mode == CONN_CLOSED)
        event_del(c->closed);
    if (mode == CONN_CLOSED && !c->t->early_close)
        mode = CONN_OFF; /* nothing tells a close from bytes without reading them */
    if (mode == CONN_KEEP) {
        event_add(c->keep[c->front], NULL);
    } else if (mode == CONN_CLOSED) {
        if (c->closed == NULL)
            c->closed = event_new(c->t->base, c->fd, EV_CLOSED | EV_PERSIST, conn_event_cb, c);
        event_add(c->closed, NULL);
    }
    c->mode = mode;
}

/* evhttp is freeing the connection: the conn goes first, then whoever else asked is told. */
static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
    struct conn *c = arg;
    conn_close_cb cb = c->on_close;
    void *cb_arg = c->close_arg;
    atomic_fetch_sub_explicit(c->t->open, 1, memory_order_relaxed);
    conn_free(c);
    if (cb != NULL)
        cb(evcon, cb_arg);
}

/* A request was not read whole in time: answer 408 and close (never while one is being
 * answered: the deadline is off then). */
static void conn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    if (c->serving)
        return;
    (void)send(c->fd, c->t->slow, c->t->slow_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    conn_answered(c->t, 408);
    evhttp_connection_free(c->evcon); /* conn_closed frees c */
}

/* Which of evhttp's error pages out holds, whole (CONN_OWN_*), or -1: its status line and
 * the page evhttp_send_error() writes right after the headers. */
static int conn_own_kind(struct evbuffer *out)
{
    static const char page[] = "\r\n\r\n<HTML><HEAD>";
    char head[13];
    if (evbuffer_copyout(out, head, sizeof(head)) != (ev_ssize_t)sizeof(head) ||
        memcmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ' || head[12] != ' ' ||
        evbuffer_search(out, page, sizeof(page) - 1, NULL).pos < 0)
        return -1;
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (head[i] < '0' || head[i] > '9')
            return -1;
        status = status * 10 + (head[i] - '0');
    }
    for (int k = 0; k < CONN_OWN_COUNT; k++)
        if (conn_own_status[k] == status)
            return k;
    return -1;
}

/* evhttp wrote on its own on c's connection, and is done writing (this runs after its
 * callback returned, before the loop polls the socket, so nothing was sent yet): an error
 * page of its own is replaced by ours. evhttp closes the connection once the output is
 * sent, as its page asked (Connection: close; ours says so too). */
static void conn_own_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    (void)what;
    struct evbuffer *out = bufferevent_get_output(evhttp_connection_get_bufferevent(c->evcon));
    /* the front is frozen once the bufferevent (or worker_write_now) has written, and stays
     * so: copying out and draining need it thawed */
    evbuffer_unfreeze(out, 1);
    int k = c->serving ? -1 : conn_own_kind(out);
    if (k >= 0) {
        evbuffer_drain(out, evbuffer_get_length(out));
        evbuffer_add(out, c->t->own[k], c->t->own_len[k]);
    }
    evbuffer_freeze(out, 1);
    if (k >= 0)
        conn_answered(c->t, conn_own_status[k]);
}

static struct conn *conn_get(struct conn_table *t, struct evhttp_connection *evcon)
{
    struct conn *c = conn_find(t, evcon);
    evutil_socket_t fd = conn_fd(evcon);
    if (c != NULL || fd < 0)
        return c;
    t->byfd = xgrow(t->byfd, &t->cap, (size_t)fd, sizeof(*t->byfd));
    c = xcalloc(1, sizeof(*c));
    c->t = t;
    c->evcon = evcon;
    c->fd = fd;
    for (int i = 0; i < 2; i++)
        c->keep[i] = event_new(t->base, fd, EV_READ | EV_CLOSED | EV_PERSIST, conn_event_cb, c);
    c->deadline = evtimer_new(t->base, conn_deadline_cb, c);
    c->own = event_new(t->base, -1, 0, conn_own_cb, c);
    t->byfd[fd] = c;
    evhttp_connection_set_closecb(evcon, conn_closed, c);
    return c;
}

/* One accepted connection, set up by evhttp by now (its bufferevent's callback argument is
 * the evhttp connection): counted out when it closes, or refused past the cap. */
static void conn_adopt(struct conn_table *t, struct bufferevent *bev, int over)
{
    bufferevent_data_cb readcb = NULL;
    bufferevent_event_cb eventcb = NULL;
    void *evcon = NULL;
    bufferevent_getcb(bev, &readcb, NULL, &eventcb, &evcon);
    /* bufferevent_free() clears the callbacks: evhttp already let go of this one */
    struct conn *c = readcb != NULL && eventcb != NULL && evcon != NULL ? conn_get(t, evcon) : NULL;
    if (c == NULL) {
        atomic_fetch_sub_explicit(t->open, 1, memory_order_relaxed);
        return;
    }
    if (over) {
        /* the answer fits any socket buffer; nothing more is read from this client */
        (void)send(c->fd, t->busy, t->busy_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        conn_answered(t, 503);
        evhttp_connection_free(c->evcon); /* conn_closed counts it out */
    }
}

static void conn_adopt_all(evutil_socket_t fd, short what, void *arg)
{
    struct conn_table *t = arg;
    (void)fd;
    (void)what;
    for (size_t i = 0; i < t->nfresh; i++) {
        conn_adopt(t, t->fresh[i].bev, t->fresh[i].over);
        bufferevent_decref(t->fresh[i].bev);
    }
    t->nfresh = 0;
}

/* 1: the peer closed (or the socket failed), 0: bytes are waiting, -1: nothing after all. */
static int conn_peek(evutil_socket_t fd)
{
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0)
        return 0;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return -1;
    return 1;
}

/* evhttp is waiting for bytes on c and our event came first: read them into evhttp's input
 * and hand them over, so that libevent's own read, next in this loop turn, finds evhttp no
 * longer reading (it stops once it has a whole request) and does not run. When nothing was
 * read (an end, an error) it is left to libevent's read, which reports it to evhttp. evhttp
 * may free the connection, and c with it. */
static void conn_read_first(struct conn *c, struct bufferevent *bev, evutil_socket_t fd)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    evbuffer_unfreeze(in, 0); /* the bufferevent keeps its input's end frozen but to read */
    size_t got = conn_read_all(in, fd);
    evbuffer_freeze(in, 0);
    if (got == 0)
        return;
    conn_serving = c;
    bufferevent_trigger(bev, EV_READ, 0);
    conn_serving = NULL;
}

static void conn_event_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(c->evcon);
    if (bufferevent_get_enabled(bev) & EV_READ) { /* the bytes, and an end, are evhttp's */
        if (what & EV_READ)
            conn_read_first(c, bev, fd);
        return;
    }
    int closed = (what & EV_CLOSED) != 0;
    if (!closed) {
        if (c->fresh) { /* possibly the request evhttp read in this same loop turn */
            c->fresh = 0;
            return;
        }
        closed = conn_peek(fd);
        if (closed < 0)
            return;
    }
    if (closed && c->on_hup != NULL) {
        c->on_hup(c->hup_arg); /* frees the connection, and c */
        return;
    }
    /* a pipelined request waits (evhttp reads it after this response), or the peer went
     * while nobody watches (the response's write will fail): stop waking up for it */
    conn_set_mode(c, closed ? CONN_OFF : CONN_CLOSED);
}

/* The close callback of evcon, whose conn (found already) is c or NULL: the conn passes it
 * on once it owns evhttp's, else it goes to evhttp directly. */
static void conn_closecb(struct conn *c, struct evhttp_connection *evcon, conn_close_cb cb,
                         void *arg)
{
    if (c == NULL) {
        evhttp_connection_set_closecb(evcon, cb, arg);
        return;
    }
    c->on_close = cb;
    c->close_arg = arg;
}

void conn_set_closecb(struct conn_table *t, struct evhttp_connection *evcon, conn_close_cb cb,
                      void *arg)
{
    conn_closecb(conn_find(t, evcon), evcon, cb, arg);
}

void conn_watch(struct conn_table *t, struct evhttp_connection *evcon, void (*on_hup)(void *),
                conn_close_cb on_close, void *arg)
{
    struct conn *c = conn_get(t, evcon);
    conn_closecb(c, evcon, on_close, arg);
    if (c == NULL)
        return;
    c->on_hup = on_hup;
    c->hup_arg = arg;
    c->fresh = c != conn_serving;
    conn_set_mode(c, CONN_KEEP);
}

void conn_sent(struct conn_table *t, evutil_socket_t fd)
{
    struct conn *c = conn_at(t, fd);
    if (c == NULL || c->mode != CONN_KEEP ||
        !(bufferevent_get_enabled(evhttp_connection_get_bufferevent(c->evcon)) & EV_READ))
        return;
    /* the other one first: the socket's interest never drops, so the kernel is not told */
    struct event *old = c->keep[c->front];
    c->front ^= 1;
    event_add(c->keep[c->front], NULL);
    event_del(old);
}

int conn_request(struct conn_table *t, struct evhttp_connection *evcon)
{
    struct conn *c = conn_find(t, evcon);
    if (c == NULL)
        return 0;
    evtimer_del(c->deadline);
    c->serving = 1;
    int nul = c->nul;
    c->nul = 0;
    return nul ? -1 : 0;
}

void conn_response_done(struct conn_table *t, struct evhttp_connection *evcon)
{
    struct conn *c = conn_find(t, evcon);
    if (c != NULL)
        c->serving = 0;
}

void conn_unwatch(struct conn_table *t, struct evhttp_connection *evcon)
{
    struct conn *c = conn_find(t, evcon);
    if (c != NULL) {
        c->on_hup = NULL;
        c->hup_arg = NULL;
        c->fresh = 0;
    }
    conn_closecb(c, evcon, NULL, NULL);
}
