#include "proxy/chat/relay.h"

#include "base/log.h"
#include "base/util.h"
#include "proxy/http/conn.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"
#include "proxy/upstream/upstream.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

/* Largest single SSE event accepted from an upstream. */
#define RELAY_MAX_EVENT (1024 * 1024)

enum relay_state {
    RELAY_WAITING,   /* no response headers yet */
    RELAY_STREAMING, /* SSE headers sent to the client, events flowing */
    RELAY_BUFFERING, /* collecting a whole response */
};

struct relay {
    struct worker *w;
    struct relay *prev, *next;       /* w->relays */
    struct evhttp_request *req;      /* NULL once the client is gone */
    struct evhttp_connection *evcon; /* watched (conn_watch) while set */
    struct upstream_xfer *xfer;
    const struct relay_hooks *hooks;
    void *arg;
    struct relay_params p;
    size_t attempt;   /* index into p.profile->chain */
    int fall_back;    /* on_head chose to try the next upstream */
    int too_large;    /* the buffered response passed its cap */
    int sse_broken;   /* an event could not be parsed or was too large */
    const char *why;  /* how a reply cut short ended, for its record (relay_hooks.release) */
    int final_status; /* what the client got (its access line); 499: it left first */
    long long sent;   /* body bytes handed to the client */
    enum relay_state state;
    long status;
    char ctype[128];
    struct sse_parser *sse;
    struct evbuffer *out;
    uint64_t t_upstream, t_first_token, t_upstream_done;
};

static void relay_destroy(struct relay *r);

/* ---- lifetime ---- */

static void relay_link(struct relay *r)
{
    struct worker *w = r->w;
    r->next = w->relays;
    if (w->relays)
        w->relays->prev = r;
    w->relays = r;
    w->active++;
}

static void relay_unlink(struct relay *r)
{
    struct worker *w = r->w;
    if (r->prev)
        r->prev->next = r->next;
    else
        w->relays = r->next;
    if (r->next)
        r->next->prev = r->prev;
    w->active--;
}

/* Stop watching the client connection: before the response ends or the connection goes. */
static void relay_unwatch(struct relay *r)
{
    if (r->evcon == NULL)
        return;
    conn_unwatch(r->w->conns, r->evcon); /* the response's sender may set its own close cb */
    r->evcon = NULL;
}

/* The one place a relay's resources are released. */
static void relay_destroy(struct relay *r)
{
    struct worker *w = r->w;
    relay_unwatch(r);
    upstream_cancel(r->xfer);
    if (r->sse != NULL) /* the stream was started */
        metrics_stream_delta(w->metrics, -1);
    if (r->hooks->release)
        r->hooks->release(r->arg, r, r->why);
    sse_parser_destroy(r->sse);
    evbuffer_free(r->out);
    free(r->p.body);
    relay_unlink(r);
    free(r);
    worker_idle_check(w);
}

/* ---- the client side ---- */

static void relay_client_gone(struct relay *r)
{
    metrics_client_disconnect(r->w->metrics);
    log_debug("client hung up; cancelling the upstream transfer");
    upstream_cancel(r->xfer);
    r->xfer = NULL;
    if (r->hooks->on_client_gone)
        r->hooks->on_client_gone(r->arg, r);
    relay_destroy(r);
}

/* evhttp is freeing the connection (write error, write timeout). When it failed the request
 * itself it detached it from the connection and left it to us to free. */
static void relay_conn_closed(struct evhttp_connection *evcon, void *arg)
{
    struct relay *r = arg;
    (void)evcon;
    if (r->req != NULL && evhttp_request_get_connection(r->req) == NULL)
        evhttp_request_free(r->req);
    r->req = NULL;
    r->evcon = NULL;
    relay_client_gone(r);
}

/* The peer hung up while we were working on its request. */
static void relay_hup(void *arg)
{
    struct relay *r = arg;
    struct evhttp_connection *evcon = r->evcon;
    relay_unwatch(r);
    r->req = NULL;
    evhttp_connection_free(evcon); /* frees the request too */
    relay_client_gone(r);
}

/* evhttp tells us when a write fails (closecb); conn's watch catches a hang-up while nothing
 * is being written, e.g. before the first token, when evhttp reads nothing. */
static void relay_watch(struct relay *r)
{
    conn_watch(r->w->conns, r->evcon, relay_hup, relay_conn_closed, r);
}

/* ---- answers ---- */

/* The last event of a stream (already in r->out), then the chunked end. Counted first, like
 * every answer (respond.h): a client that has its end may scrape /metrics at once. */
static void relay_end_stream(struct relay *r, int status)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(r->req);
    metrics_request(r->w->metrics, r->p.route, status);
    r->final_status = status;
    r->sent += (long long)evbuffer_get_length(r->out);
    evhttp_send_reply_chunk(r->req, r->out);
    worker_response_sending(r->w, r->req); /* before the end: a drain waits for these bytes */
    evhttp_send_reply_end(r->req);
    worker_write_now(r->w, evcon); /* r->req may be gone */
}

static void relay_fail(struct relay *r, const struct apierr *e)
{
    r->why = e->kind == APIERR_UNAVAILABLE        ? "shutdown"
             : e->kind == APIERR_UPSTREAM_TIMEOUT ? "upstream_timeout"
                                                  : "upstream_error";
    if (r->sse != NULL) { /* the SSE headers are out: the error becomes an event */
        size_t len = 0;
        char *json = apierr_json(e, &len);
        relay_unwatch(r);
        evbuffer_add_printf(r->out, "data: %s\n\n", json);
        free(json);
        relay_end_stream(r, 200);
    } else {
        relay_unwatch(r);
        r->final_status = apierr_status(e->kind);
        r->w->access_quiet++; /* the chat writes the access line */
        respond_error(r->w, r->p.route, r->req, e);
        r->w->access_quiet--;
    }
    r->req = NULL;
    relay_destroy(r);
}

static void relay_record_added(struct relay *r)
{
    uint64_t now = util_now_us();
    uint64_t added = (r->t_upstream - r->p.t_start) + (now - r->t_upstream_done);
    metrics_added_latency(r->w->metrics, added);
}

void relay_finish(struct relay *r)
{
    relay_unwatch(r);
    relay_record_added(r); /* before the end goes out, as the request's count (respond.h) */
    if (r->sse != NULL) {
        evbuffer_add(r->out, "data: [DONE]\n\n", 14);
        relay_end_stream(r, (int)r->status);
    } else {
        r->final_status = (int)r->status;
        r->sent = (long long)evbuffer_get_length(r->out);
        r->w->access_quiet++; /* the chat writes the access line */
        respond_send_buffer(r->w, r->p.route, r->req, (int)r->status, r->ctype[0] ? r->ctype : NULL,
                            r->out);
        r->w->access_quiet--;
    }
    r->req = NULL;
    relay_destroy(r);
}

void relay_error(struct relay *r, const struct apierr *e)
{
    relay_fail(r, e);
}

int relay_final_status(const struct relay *r)
{
    return r->final_status ? r->final_status : 499; /* nothing went out: the client left */
}

long long relay_sent(const struct relay *r)
{
    return r->sent;
}

const char *relay_upstream(const struct relay *r)
{
    const struct cfg_profile *p = r->p.profile;
    return r->attempt < p->nchain ? r->w->cfg->upstreams[p->chain[r->attempt]].name : NULL;
}

void relay_times(const struct relay *r, int64_t *ttft_us, int64_t *total_us)
{
    uint64_t end = r->t_upstream_done ? r->t_upstream_done : util_now_us();
    *ttft_us = r->t_first_token ? (int64_t)(r->t_first_token - r->p.t_start) : -1;
    *total_us = (int64_t)(end - r->p.t_start);
}

void relay_abort_all(struct worker *w)
{
    struct apierr e;
    apierr_set(&e, APIERR_UNAVAILABLE, NULL, "memproxy is shutting down");
    while (w->relays != NULL)
        relay_fail(w->relays, &e);
}

/* ---- the upstream side ---- */

static void relay_attempt(struct relay *r);

static void relay_start_stream(struct relay *r)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
    evhttp_add_header(h, "Content-Type", "text/event-stream; charset=utf-8");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_add_header(h, "X-Accel-Buffering", "no");
    respond_date(r->w, h);
    evhttp_send_reply_start(r->req, (int)r->status, NULL);
    r->sse = sse_parser_create(RELAY_MAX_EVENT);
    r->state = RELAY_STREAMING;
    metrics_stream_delta(r->w->metrics, 1);
}

static int relay_on_head(void *arg, long status, const char *ctype)
{
    struct relay *r = arg;
    int retryable = status == 429 || status >= 500;
    if (retryable && r->attempt + 1 < r->p.profile->nchain) {
        metrics_upstream_failure(r->w->metrics, METRICS_FAIL_STATUS);
        r->fall_back = 1;
        return -1;
    }
    r->status = status;
    util_copy(r->ctype, sizeof(r->ctype), ctype, strlen(ctype));
    const char *retry = upstream_retry_after(r->xfer);
    if ((status == 429 || status == 503) && *retry &&
        r->req != NULL) /* the client's SDK backs off by it */
        evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", retry);
    if (r->p.stream && status >= 200 && status < 300 &&
        strncmp(ctype, "text/event-stream", 17) == 0)
        relay_start_stream(r);
    else
        r->state = RELAY_BUFFERING;
    return 0;
}

static int relay_on_sse(void *arg, const struct sse_event *ev)
{
    struct relay *r = arg;
    if (ev->data != NULL) {
        if (sse_is_done(ev))
            return 0; /* held: relay_finish() sends it once the turn is safe */
        if (!r->hooks->on_event(r->arg, ev))
            return 0;
        if (r->t_first_token == 0) {
            r->t_first_token = util_now_us();
            metrics_ttft(r->w->metrics, r->t_first_token - r->t_upstream);
        }
    }
    evbuffer_add(r->out, ev->raw, ev->raw_len);
    return 0;
}

/* The client's output buffer drained: resume a paused transfer. */
static void relay_drained(struct evhttp_connection *evcon, void *arg)
{
    struct relay *r = arg;
    (void)evcon;
    if (upstream_paused(r->xfer))
        upstream_resume(r->xfer);
}

static enum upstream_body_rc relay_on_stream_body(struct relay *r, const char *data, size_t len)
{
    struct evbuffer *pending = bufferevent_get_output(evhttp_connection_get_bufferevent(r->evcon));
    if (evbuffer_get_length(pending) > (size_t)r->w->cfg->max_client_buffer)
        return UPSTREAM_BODY_PAUSE; /* relay_drained() resumes it */
    if (sse_parser_feed(r->sse, data, len, relay_on_sse, r) != 0) {
        r->sse_broken = 1;
        return UPSTREAM_BODY_ABORT;
    }
    if (evbuffer_get_length(r->out) > 0) {
        r->sent += (long long)evbuffer_get_length(r->out);
        evhttp_send_reply_chunk_with_cb(r->req, r->out, relay_drained, r);
        worker_write_now(r->w, r->evcon); /* may run relay_drained */
        if (r->hooks->after_send != NULL) /* the bytes are out (or queued): now the work */
            r->hooks->after_send(r->arg);
    }
    return UPSTREAM_BODY_OK;
}

static enum upstream_body_rc relay_on_body(void *arg, const char *data, size_t len)
{
    struct relay *r = arg;
    if (r->state == RELAY_STREAMING)
        return relay_on_stream_body(r, data, len);
    if (evbuffer_get_length(r->out) + len > (size_t)r->w->cfg->max_upstream_response) {
        r->too_large = 1;
        return UPSTREAM_BODY_ABORT;
    }
    evbuffer_add(r->out, data, len);
    return UPSTREAM_BODY_OK;
}

static void relay_upstream_failed(struct relay *r, enum upstream_result res, const char *detail)
{
    struct apierr e;
    const char *name = r->p.profile->fallbacks.n > 0 ? "every upstream" : "the upstream";
    enum metrics_failure kind = res == UPSTREAM_TIMEOUT || res == UPSTREAM_IDLE
                                    ? METRICS_FAIL_TIMEOUT
                                : res == UPSTREAM_UNREACHABLE ? METRICS_FAIL_UNREACHABLE
                                                              : METRICS_FAIL_BROKEN;
    metrics_upstream_failure(r->w->metrics, kind);
    log_warn("upstream %s failed: %s", r->p.profile->name, *detail ? detail : "(no detail)");
    if (r->too_large)
        apierr_set(&e, APIERR_UPSTREAM_BAD_RESPONSE, NULL,
                   "the upstream response is larger than server.max_upstream_response");
    else if (r->sse_broken)
        apierr_set(&e, APIERR_UPSTREAM_BAD_RESPONSE, NULL,
                   "the upstream sent a malformed or oversized event");
    else if (res == UPSTREAM_TIMEOUT)
        apierr_set(&e, APIERR_UPSTREAM_TIMEOUT, NULL, "%s did not answer in time", name);
    else if (res == UPSTREAM_IDLE)
        apierr_set(&e, APIERR_UPSTREAM_TIMEOUT, NULL,
                   "the upstream sent nothing for longer than its idle_timeout mid-response");
    else if (res == UPSTREAM_UNREACHABLE)
        apierr_set(&e, APIERR_UPSTREAM_UNREACHABLE, NULL, "%s could not be reached", name);
    else
        apierr_set(&e, APIERR_UPSTREAM_BAD_RESPONSE, NULL,
                   "the upstream connection failed mid-response");
    if (r->sse == NULL && r->req != NULL && *r->p.profile->fallback_reply != '\0' &&
        r->hooks->fallback != NULL) { /* nothing was sent: a speakable answer instead */
        struct evhttp_request *req = r->req;
        metrics_fallback_reply(r->w->metrics);
        r->final_status = 200;
        relay_unwatch(r);
        r->req = NULL;
        r->why = "llm_failure";
        r->hooks->fallback(r->arg, req);
        relay_destroy(r);
        return;
    }
    relay_fail(r, &e);
}

static void relay_on_done(void *arg, enum upstream_result res, const char *detail)
{
    struct relay *r = arg;
    r->xfer = NULL;
    r->t_upstream_done = util_now_us();
    int before_head = r->state == RELAY_WAITING;
    if ((r->fall_back || (before_head && res != UPSTREAM_OK)) &&
        r->attempt + 1 < r->p.profile->nchain) {
        if (!r->fall_back)
            metrics_upstream_failure(r->w->metrics, res == UPSTREAM_TIMEOUT
                                                        ? METRICS_FAIL_TIMEOUT
                                                        : METRICS_FAIL_UNREACHABLE);
        log_warn("upstream attempt %zu failed (%s); trying the next one", r->attempt + 1,
                 r->fall_back ? "error status" : detail);
        metrics_fallback(r->w->metrics);
        r->attempt++;
        relay_attempt(r);
        return;
    }
    if (res != UPSTREAM_OK) {
        relay_upstream_failed(r, res, detail);
        return;
    }
    int ok = r->status >= 200 && r->status < 300;
    if (!ok)
        metrics_upstream_failure(r->w->metrics, METRICS_FAIL_STATUS);
    if (r->state == RELAY_STREAMING) { /* its last events were written as they came */
        r->hooks->on_complete(r->arg, r, NULL, 0);
    } else if (ok) {
        r->hooks->on_complete(r->arg, r, (const char *)evbuffer_pullup(r->out, -1),
                              evbuffer_get_length(r->out));
    } else {
        relay_finish(r); /* the upstream's own error, status and body as they came */
    }
}

static const struct upstream_handler relay_upstream_handler = {
    .on_head = relay_on_head,
    .on_body = relay_on_body,
    .on_done = relay_on_done,
};

static void relay_attempt(struct relay *r)
{
    const struct cfg_profile *prof = r->p.profile;
    struct upstream_request rq = {
        .target = &r->w->cfg->upstreams[prof->chain[r->attempt]],
        .path = r->p.path,
        .body = r->p.body,
        .body_len = r->p.body_len,
        .stream = r->p.stream,
    };
    r->fall_back = 0;
    r->state = RELAY_WAITING;
    evbuffer_drain(r->out, evbuffer_get_length(r->out));
    r->t_upstream = util_now_us();
    r->xfer = upstream_start(r->w->up, &rq, &relay_upstream_handler, r);
    upstream_kick(r->w->up); /* may end (and free) r: nothing after this */
}

void relay_start(struct worker *w, struct evhttp_request *req, const struct relay_params *p,
                 const struct relay_hooks *hooks, void *arg)
{
    struct relay *r = xcalloc(1, sizeof(*r));
    r->w = w;
    r->req = req;
    r->evcon = evhttp_request_get_connection(req);
    r->hooks = hooks;
    r->arg = arg;
    r->p = *p;
    r->out = evbuffer_new();
    relay_link(r);
    relay_watch(r);
    relay_attempt(r); /* last: r may be gone when it returns */
}
