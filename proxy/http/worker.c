#include "proxy/http/worker.h"

#include "memory/memory.h"
#include "memory/readpool.h"
#include "proxy/http/conn.h"
#include "proxy/http/metrics.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <malloc.h>

int worker_idle(const struct worker *w)
{
    return w->active == 0 && w->sending == 0 && w->held == 0;
}

void worker_idle_check(struct worker *w)
{
    if (w->draining && worker_idle(w))
        event_base_loopexit(w->base, NULL);
}

void worker_hold(struct worker *w)
{
    w->held++;
}

void worker_release(struct worker *w)
{
    w->held--;
    worker_idle_check(w);
}

/* A read handed to the pool: the worker stays held until its done has run. */
struct worker_reading {
    struct worker *w;
    uint64_t t_start; /* util_now_us() when handed over */
    worker_read_fn fn;
    worker_read_done done;
    void *arg;
};

/* On the pool thread. */
static void worker_read_run(struct memory_reader *r, void *arg)
{
    struct worker_reading *rd = arg;
    rd->fn(r, rd->arg);
}

static void worker_read_back(void *arg, int failed)
{
    struct worker_reading *rd = arg;
    struct worker *w = rd->w;
    metrics_read_wait(w->metrics, util_now_us() - rd->t_start);
    rd->done(rd->arg, failed);
    free(rd);
    worker_release(w);
}

static void worker_read_in(struct worker *w, enum readpool_lane lane, worker_read_fn fn,
                           worker_read_done done, void *arg)
{
    if (w->pool == NULL) {
        memory_reader_clear(w->reader);
        fn(w->reader, arg);
        done(arg, memory_reader_failed(w->reader));
        return;
    }
    struct worker_reading *rd = xmalloc(sizeof(*rd));
    *rd = (struct worker_reading){
        .w = w, .t_start = util_now_us(), .fn = fn, .done = done, .arg = arg};
    worker_hold(w);
    readpool_run(w->pool, lane, w->base, worker_read_run, worker_read_back, rd);
}

void worker_read(struct worker *w, worker_read_fn fn, worker_read_done done, void *arg)
{
    worker_read_in(w, READPOOL_REST, fn, done, arg);
}

void worker_read_call(struct worker *w, worker_read_fn fn, worker_read_done done, void *arg)
{
    worker_read_in(w, READPOOL_CALL, fn, done, arg);
}

static void worker_sent(struct evhttp_request *req, void *arg)
{
    struct worker *w = arg;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon != NULL) { /* done: a later close of this kept-alive connection is not ours */
        conn_set_closecb(w->conns, evcon, NULL, NULL);
        conn_response_done(w->conns, evcon);
    }
    w->sending--;
    worker_idle_check(w);
}

/* The client went away before the response was written: evhttp will not complete it. */
static void worker_send_failed(struct evhttp_connection *evcon, void *arg)
{
    struct worker *w = arg;
    (void)evcon;
    w->sending--;
    worker_idle_check(w);
}

void worker_response_sending(struct worker *w, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon == NULL)
        return;
    w->sending++;
    evhttp_request_set_on_complete_cb(req, worker_sent, w);
    conn_set_closecb(w->conns, evcon, worker_send_failed, w);
}

void worker_write_now(struct worker *w, struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0)
        return;
    struct evbuffer *out = bufferevent_get_output(bev);
    /* the bufferevent keeps its output's front frozen except while it writes itself */
    evbuffer_unfreeze(out, 1);
    evbuffer_write(out, fd);
    evbuffer_freeze(out, 1);
    if (evbuffer_get_length(out) == 0) {
        /* what libevent's write event would do on finding the output empty */
        bufferevent_disable(bev, EV_WRITE);
        bufferevent_trigger(bev, EV_WRITE, 0); /* may free evcon */
        conn_sent(w->conns, fd);
    }
}

static void worker_trim(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    malloc_trim(0);
}

void worker_trim_later(struct worker *w)
{
    struct timeval tv = {.tv_sec = WORKER_TRIM_DELAY_MS / 1000,
                         .tv_usec = (WORKER_TRIM_DELAY_MS % 1000) * 1000};
    if (w->trim_timer == NULL)
        w->trim_timer = evtimer_new(w->base, worker_trim, w);
    evtimer_add(w->trim_timer, &tv); /* again: the delay starts from the last large one */
}
