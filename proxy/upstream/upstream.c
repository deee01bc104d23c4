#include "proxy/upstream/upstream.h"

#include "base/jalloc.h"
#include "base/log.h"
#include "base/util.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define UPSTREAM_POOL_MAX 32

struct upstream {
    struct event_base *base;
    const struct cfg *cfg;
    CURLM *multi;
    struct event *timer;
    struct curl_slist **hdr_json;   /* per cfg->upstreams[i] */
    struct curl_slist **hdr_stream; /* per cfg->upstreams[i] */
    struct upstream_url *urls;      /* parsed target URLs, newest first (upstream_url_of) */
    size_t nurls;
    CURL *pool[UPSTREAM_POOL_MAX]; /* idle easy handles, reset, ready for reuse */
    size_t npool;
    int in_curl;                  /* inside curl_multi_socket_action: curl calls must be deferred */
    struct upstream_sock **socks; /* by socket: every socket curl opened and has not closed */
    size_t nsocks;
    struct upstream_xfer *zombies; /* cancelled inside curl, removed once it returns */
};

struct upstream_xfer {
    struct upstream *up;
    CURL *easy;
    const struct upstream_handler *h;
    void *arg;
    struct event *fb_timer;         /* first-byte, then idle timeout; also reports a failed start */
    long idle_ms;                   /* 0: none (a plain POST has its one time limit) */
    uint64_t last_us;               /* when the last body byte came (or the headers, or a resume) */
    struct curl_slist *own_headers; /* a plain POST's (target NULL) */
    struct upstream_xfer *next_zombie;
    long status;
    unsigned head_done : 1, paused : 1, cancelled : 1, aborted : 1, timed_out : 1, start_failed : 1,
        in_multi : 1, zombie : 1;
    char ctype[128];
    char retry_after[64];
    char errbuf[CURL_ERROR_SIZE];
};

/* Whether the environment names an outgoing proxy, as curl reads it: http_proxy for http://
 * (lower case only), https_proxy or HTTPS_PROXY for https://, all_proxy or ALL_PROXY for both.
 * Read once, at start: left to itself curl reads five variables for every transfer (getenv
 * walks the whole environment), so with none set each transfer is told "no proxy". */
static int upstream_env_proxy;

static int upstream_proxy_in_env(void)
{
    static const char *const vars[] = {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy",
                                       "ALL_PROXY"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && *v != '\0')
            return 1;
    }
    return 0;
}

int upstream_global_init(void)
{
    upstream_env_proxy = upstream_proxy_in_env();
    CURLcode rc = jalloc_active()
                      ? curl_global_init_mem(CURL_GLOBAL_DEFAULT, jalloc_malloc, jalloc_free,
                                             jalloc_realloc, jalloc_strdup, jalloc_calloc)
                      : curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK)
        return -1;
    /* without it an upstream's name is looked up on the worker's loop, which waits */
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    if (!(v->features & CURL_VERSION_ASYNCHDNS))
        log_warn("libcurl %s resolves names synchronously: each upstream lookup holds a "
                 "worker's requests (use a libcurl built with the threaded resolver or c-ares)",
                 v->version);
    return 0;
}

void upstream_global_cleanup(void)
{
    curl_global_cleanup();
}

static void upstream_check_done(struct upstream *up);

/* ---- the hiperfifo glue: curl asks, libevent waits ---- */

/* With no transfer left running curl has nothing to time, but it does not always say so: a
 * transfer that finishes inside upstream_kick() leaves armed the 0 ms timer curl asked for
 * when it was added, which would cost a loop turn and a needless call into curl. */
static void upstream_action(struct upstream *up, curl_socket_t fd, int flags)
{
    int running = 0;
    up->in_curl++;
    curl_multi_socket_action(up->multi, fd, flags, &running);
    up->in_curl--;
    if (running == 0)
        evtimer_del(up->timer);
    upstream_check_done(up);
}

static void upstream_timer_event(evutil_socket_t fd, short kind, void *arg)
{
    (void)fd;
    (void)kind;
    upstream_action(arg, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION. A 0 ms request arms a zero-delay timer: rounding it up to 1 ms
 * would add a millisecond to every transfer. */
static int upstream_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    struct upstream *up = userp;
    (void)multi;
    if (timeout_ms < 0) {
        evtimer_del(up->timer);
        return 0;
    }
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    evtimer_add(up->timer, &tv);
    return 0;
}

/*
 * The sockets. curl says which of its sockets to watch for what (CURLMOPT_SOCKETFUNCTION);
 * each gets one event. When a transfer ends, curl stops watching its kept-alive connection
 * (CURL_POLL_REMOVE) and watches it again at the next transfer: in between, a connection curl
 * was reading stays registered for reading ("kept"), so the kernel's epoll set is not changed
 * twice per transfer. If it speaks while idle (the server closed it), its event is dropped
 * then, once; curl's own check before reusing a connection finds it dead.
 *
 * A kept event must not outlive its socket: a descriptor number reused by any other socket of
 * the process while libevent still holds an event for it would never be added to epoll. So
 * only sockets curl opens through upstream_open_cb (it sees every connection's socket) are
 * kept, and curl closes those through upstream_close_cb, which drops the event first. The
 * exceptions curl makes, checked in 7.88's source: a socket that never became a connection
 * (a failed or losing connect) is closed without the callback, but it was only ever watched
 * for writing, so it is not kept; the threaded resolver's wake-up socket is not opened
 * through the callback, so it is never kept (its event goes at REMOVE, as before). A number
 * that comes back from socket() while an entry still holds it is dropped there.
 */
struct upstream_sock {
    struct event *ev;
    short kind;           /* what ev waits for while added, 0 when it is not */
    unsigned curl_on : 1; /* curl watches it (between POLL_IN/OUT and REMOVE) */
    unsigned ours : 1;    /* opened by upstream_open_cb: closed through upstream_close_cb */
};

static void upstream_event_cb(evutil_socket_t fd, short kind, void *arg);

static struct upstream_sock *upstream_sock_at(struct upstream *up, curl_socket_t s)
{
    return s >= 0 && (size_t)s < up->nsocks ? up->socks[s] : NULL;
}

static void upstream_sock_forget(struct upstream *up, curl_socket_t s)
{
    struct upstream_sock *k = upstream_sock_at(up, s);
    if (k == NULL)
        return;
    event_free(k->ev);
    free(k);
    up->socks[s] = NULL;
}

static struct upstream_sock *upstream_sock_new(struct upstream *up, curl_socket_t s, int ours)
{
    upstream_sock_forget(up, s); /* a number closed without telling */
    up->socks = xgrow(up->socks, &up->nsocks, (size_t)s, sizeof(*up->socks));
    struct upstream_sock *k = xcalloc(1, sizeof(*k));
    k->ev = event_new(up->base, s, EV_PERSIST, upstream_event_cb, up);
    k->ours = ours != 0;
    up->socks[s] = k;
    return k;
}

/* Make the event wait for kind (0: for nothing); unchanged interest costs nothing. */
static void upstream_sock_arm(struct upstream *up, curl_socket_t s, struct upstream_sock *k,
                              short kind)
{
    if (k->kind == kind)
        return;
    if (k->kind != 0)
        event_del(k->ev);
    if (kind != 0) {
        event_assign(k->ev, up->base, s, (short)(kind | EV_PERSIST), upstream_event_cb, up);
        event_add(k->ev, NULL);
    }
    k->kind = kind;
}

static void upstream_event_cb(evutil_socket_t fd, short kind, void *arg)
{
    struct upstream *up = arg;
    struct upstream_sock *k = upstream_sock_at(up, fd);
    if (k != NULL && !k->curl_on) { /* a kept connection spoke while idle */
        upstream_sock_forget(up, fd);
        return;
    }
    int flags =
        ((kind & EV_READ) ? CURL_CSELECT_IN : 0) | ((kind & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    upstream_action(up, fd, flags);
}

/* CURLMOPT_SOCKETFUNCTION */
static int upstream_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct upstream *up = userp;
    struct upstream_sock *k = upstream_sock_at(up, s);
    (void)easy;
    (void)socketp;
    if (what == CURL_POLL_REMOVE) {
        if (k != NULL && k->ours && (k->kind & EV_READ)) { /* kept, never on EV_WRITE */
            k->curl_on = 0;
            upstream_sock_arm(up, s, k, EV_READ);
        } else {
            upstream_sock_forget(up, s);
        }
        return 0;
    }
    if (k == NULL)
        k = upstream_sock_new(up, s, 0);
    k->curl_on = 1;
    upstream_sock_arm(
        up, s, k,
        (short)(((what & CURL_POLL_IN) ? EV_READ : 0) | ((what & CURL_POLL_OUT) ? EV_WRITE : 0)));
    return 0;
}

/* CURLOPT_OPENSOCKETFUNCTION: what curl does itself, and the socket is ours. */
static curl_socket_t upstream_open_cb(void *clientp, curlsocktype purpose,
                                      struct curl_sockaddr *addr)
{
    (void)purpose;
    curl_socket_t s = socket(addr->family, addr->socktype, addr->protocol);
    if (s < 0)
        return CURL_SOCKET_BAD;
    upstream_sock_new(clientp, s, 1);
    return s;
}

/* CURLOPT_CLOSESOCKETFUNCTION */
static int upstream_close_cb(void *clientp, curl_socket_t s)
{
    upstream_sock_forget(clientp, s);
    return close(s);
}

/* ---- transfers ---- */

static void upstream_xfer_free(struct upstream_xfer *x)
{
    struct upstream *up = x->up;
    if (x->in_multi)
        curl_multi_remove_handle(up->multi, x->easy);
    event_free(x->fb_timer);
    curl_slist_free_all(x->own_headers);
    if (up->npool < UPSTREAM_POOL_MAX) {
        curl_easy_reset(x->easy);
        up->pool[up->npool++] = x->easy;
    } else {
        curl_easy_cleanup(x->easy);
    }
    free(x);
}

static enum upstream_result upstream_map(const struct upstream_xfer *x, CURLcode rc)
{
    if (x->aborted)
        return UPSTREAM_ABORTED;
    if (x->timed_out)
        return UPSTREAM_TIMEOUT;
    if (rc == CURLE_OK)
        return UPSTREAM_OK;
    if (x->head_done)
        return UPSTREAM_BROKEN;
    curl_off_t sent_at = 0; /* 0: the request never went out (connect or TLS did not finish) */
    curl_easy_getinfo(x->easy, CURLINFO_PRETRANSFER_TIME_T, &sent_at);
    return rc == CURLE_OPERATION_TIMEDOUT && sent_at > 0 ? UPSTREAM_TIMEOUT : UPSTREAM_UNREACHABLE;
}

/* The end of a transfer: report it (unless cancelled) and free it. Never inside curl. */
static void upstream_finish(struct upstream_xfer *x, enum upstream_result res)
{
    if (!x->cancelled) {
        const char *detail = x->errbuf[0] ? x->errbuf : "";
        x->cancelled = 1; /* on_done may not cancel what is already ending */
        x->h->on_done(x->arg, res, detail);
    }
    upstream_xfer_free(x);
}

static void upstream_check_done(struct upstream *up)
{
    CURLMsg *msg;
    int left = 0;
    while ((msg = curl_multi_info_read(up->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct upstream_xfer *x = NULL;
        CURLcode rc = msg->data.result;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (x->zombie) /* cancelled inside curl: freed from the zombie list below */
            continue;
        upstream_finish(x, upstream_map(x, rc));
    }
    while (up->zombies != NULL) {
        struct upstream_xfer *x = up->zombies;
        up->zombies = x->next_zombie;
        upstream_xfer_free(x);
    }
}

static void upstream_head(struct upstream_xfer *x)
{
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 100 && code < 200) /* interim response: the real one follows */
        return;
    x->head_done = 1;
    x->status = code;
    evtimer_del(x->fb_timer);
    if (x->idle_ms > 0) { /* the same timer now watches the silences */
        struct timeval tv = {.tv_sec = x->idle_ms / 1000, .tv_usec = (x->idle_ms % 1000) * 1000};
        x->last_us = util_now_us();
        evtimer_add(x->fb_timer, &tv);
    }
    if (x->h->on_head(x->arg, code, x->ctype) != 0 && !x->cancelled)
        x->aborted = 1;
}

/* Keep a Retry-After value that is plain printable ASCII (it is copied into our response). */
static void upstream_take_retry_after(struct upstream_xfer *x, const char *v, size_t len)
{
    while (len > 0 && (*v == ' ' || *v == '\t'))
        v++, len--;
    while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
        len--;
    x->retry_after[0] = '\0';
    if (len == 0 || len >= sizeof(x->retry_after))
        return;
    for (size_t i = 0; i < len; i++)
        if (v[i] < 0x20 || v[i] > 0x7e)
            return;
    util_copy(x->retry_after, sizeof(x->retry_after), v, len);
}

static size_t upstream_header_cb(char *buf, size_t size, size_t n, void *userdata)
{
    struct upstream_xfer *x = userdata;
    size_t len = size * n;
    if (x->cancelled)
        return 0;
    if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        x->ctype[0] = '\0';
        x->retry_after[0] = '\0';
    } else if (len > 12 && strncasecmp(buf, "retry-after:", 12) == 0) {
        upstream_take_retry_after(x, buf + 12, len - 12);
    } else if (len > 13 && strncasecmp(buf, "content-type:", 13) == 0) {
        const char *v = buf + 13;
        size_t vlen = len - 13;
        while (vlen > 0 && (*v == ' ' || *v == '\t'))
            v++, vlen--;
        while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
            vlen--;
        util_copy(x->ctype, sizeof(x->ctype), v, vlen);
    } else if ((len == 2 && buf[0] == '\r') || (len == 1 && buf[0] == '\n')) {
        upstream_head(x);
        if (x->aborted || x->cancelled)
            return 0;
    }
    return len;
}

static size_t upstream_write_cb(char *ptr, size_t size, size_t n, void *userdata)
{
    struct upstream_xfer *x = userdata;
    size_t len = size * n;
    if (x->cancelled || x->aborted)
        return 0;
    if (x->idle_ms > 0)
        x->last_us = util_now_us();
    enum upstream_body_rc rc = x->h->on_body(x->arg, ptr, len);
    if (x->cancelled)
        return 0;
    if (rc == UPSTREAM_BODY_ABORT) {
        x->aborted = 1;
        return 0;
    }
    if (rc == UPSTREAM_BODY_PAUSE) {
        x->paused = 1;
        return CURL_WRITEFUNC_PAUSE;
    }
    return len;
}

/* The idle timer after the headers: it fires idle_ms after it was set, and looks at when the
 * last byte came (set per chunk, cheaper than moving the timer each time). */
static void upstream_idle_check(struct upstream_xfer *x)
{
    uint64_t now = util_now_us(), idle_us = (uint64_t)x->idle_ms * 1000;
    if (x->paused) /* a slow client's pause: the upstream waits for us, not we for it */
        x->last_us = now;
    uint64_t quiet = now - x->last_us;
    if (quiet < idle_us) {
        uint64_t left = idle_us - quiet;
        struct timeval tv = {.tv_sec = (time_t)(left / 1000000),
                             .tv_usec = (suseconds_t)(left % 1000000)};
        evtimer_add(x->fb_timer, &tv);
        return;
    }
    snprintf(x->errbuf, sizeof(x->errbuf), "no bytes from the upstream for %ld ms (idle_timeout)",
             (long)(quiet / 1000));
    upstream_finish(x, UPSTREAM_IDLE);
}

/* First-byte timeout, or the deferred report of a transfer that could not start. */
static void upstream_fb_timer_cb(evutil_socket_t fd, short kind, void *arg)
{
    struct upstream_xfer *x = arg;
    (void)fd;
    (void)kind;
    if (x->start_failed) {
        upstream_finish(x, UPSTREAM_UNREACHABLE);
        return;
    }
    if (x->head_done) {
        upstream_idle_check(x);
        return;
    }
    x->timed_out = 1;
    snprintf(x->errbuf, sizeof(x->errbuf), "no response headers within the first-byte timeout");
    upstream_finish(x, UPSTREAM_TIMEOUT);
}

/* A plain POST (a webhook): the request's own URL, headers and time limit. */
static void upstream_setup_plain(struct upstream_xfer *x, const struct upstream_request *rq)
{
    CURL *e = x->easy;
    struct curl_slist *l = NULL;
    l = curl_slist_append(l, "Content-Type: application/json");
    l = curl_slist_append(l, "Expect:");
    l = curl_slist_append(l, "User-Agent: memproxy/" MEMPROXY_VERSION);
    for (size_t i = 0; rq->headers != NULL && rq->headers[i] != NULL; i++)
        l = curl_slist_append(l, rq->headers[i]);
    if (l == NULL)
        log_fatal("upstream: out of memory building request headers");
    x->own_headers = l;
    curl_easy_setopt(e, CURLOPT_URL, rq->url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, rq->timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
}

/*
 * A configured upstream's URLs, parsed once. Given a URL string, curl parses it again for
 * every transfer (curl_url_set, then a dozen curl_url_get): ~6k instructions, 3% of a
 * proxied request. Given a parsed handle (CURLOPT_CURLU) it copies it instead. It also
 * wants the URL as text (for the transfer's effective URL): curl 7.x writes that text from
 * the handle with its printf when no text was set (~7k instructions, callgrind), so each
 * entry keeps the text curl wrote for it once, and a transfer sets both; curl 8 writes the
 * text from the handle either way, the same text. The handles are the worker's (curl only
 * reads them), one per target and path, a few in all; past UPSTREAM_URLS_MAX pairs (not
 * seen with memproxy's routes) a request passes its URL as text.
 */
struct upstream_url {
    const struct cfg_upstream *target;
    char *path;
    CURLU *uh;
    char *text; /* curl's text of uh (curl_url_get CURLUPART_URL) */
    struct upstream_url *next;
};

#define UPSTREAM_URLS_MAX 32

#define UPSTREAM_URL_MAX (CFG_MAX_URL + 64) /* the base URL is capped by config; paths are ours */

/* target's base URL with path appended, as text, in url (UPSTREAM_URL_MAX bytes). */
static void upstream_target_url(char *url, const struct cfg_upstream *t, const char *path)
{
    snprintf(url, UPSTREAM_URL_MAX, "%s%s", t->url, path);
}

/* The parsed URL of target + path, or NULL: parse it as text (curl reports a bad one). */
static const struct upstream_url *upstream_url_of(struct upstream *up, const struct cfg_upstream *t,
                                                  const char *path)
{
    struct upstream_url *u;
    for (u = up->urls; u != NULL; u = u->next)
        if (u->target == t && strcmp(u->path, path) == 0)
            return u;
    if (up->nurls >= UPSTREAM_URLS_MAX)
        return NULL;
    char url[UPSTREAM_URL_MAX];
    upstream_target_url(url, t, path);
    CURLU *uh = curl_url();
    if (uh == NULL)
        log_fatal("upstream: out of memory (curl_url)");
    /* the flags curl itself parses CURLOPT_URL with */
    char *text = NULL;
    if (curl_url_set(uh, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) !=
            CURLUE_OK ||
        curl_url_get(uh, CURLUPART_URL, &text, 0) != CURLUE_OK) {
        curl_url_cleanup(uh);
        return NULL;
    }
    u = xcalloc(1, sizeof(*u));
    u->target = t;
    u->path = xstrdup(path);
    u->uh = uh;
    u->text = xstrdup(text);
    curl_free(text);
    u->next = up->urls;
    up->urls = u;
    up->nurls++;
    return u;
}

/* A request to a configured upstream: its URL, headers and timeouts. */
static void upstream_setup_target(struct upstream_xfer *x, const struct upstream_request *rq)
{
    const struct cfg_upstream *t = rq->target;
    size_t idx = (size_t)(t - x->up->cfg->upstreams);
    CURL *e = x->easy;
    const struct upstream_url *u = upstream_url_of(x->up, t, rq->path);
    if (u != NULL) {
        curl_easy_setopt(e, CURLOPT_URL, u->text); /* before CURLU: see struct upstream_url */
        curl_easy_setopt(e, CURLOPT_CURLU, u->uh);
    } else {
        char url[UPSTREAM_URL_MAX];
        upstream_target_url(url, t, rq->path);
        curl_easy_setopt(e, CURLOPT_URL, url);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER,
                     rq->stream ? x->up->hdr_stream[idx] : x->up->hdr_json[idx]);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, t->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, t->total_timeout_ms);
    x->idle_ms = t->idle_timeout_ms;
}

static void upstream_setup(struct upstream_xfer *x, const struct upstream_request *rq)
{
    CURL *e = x->easy;
    if (rq->target != NULL)
        upstream_setup_target(x, rq);
    else
        upstream_setup_plain(x, rq);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, upstream_header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, upstream_write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, upstream_open_cb);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x->up);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, upstream_close_cb);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, x->up);
    if (!upstream_env_proxy) { /* see upstream_proxy_in_env */
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    }
    if (rq->body != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, rq->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
}

struct upstream_xfer *upstream_start(struct upstream *up, const struct upstream_request *rq,
                                     const struct upstream_handler *h, void *arg)
{
    struct upstream_xfer *x = xcalloc(1, sizeof(*x));
    x->up = up;
    x->h = h;
    x->arg = arg;
    x->easy = up->npool > 0 ? up->pool[--up->npool] : curl_easy_init();
    if (x->easy == NULL)
        log_fatal("upstream: out of memory (curl_easy_init)");
    x->fb_timer = evtimer_new(up->base, upstream_fb_timer_cb, x);
    upstream_setup(x, rq);

    long fb = rq->target ? rq->target->first_byte_timeout_ms : rq->timeout_ms;
    struct timeval tv = {.tv_sec = fb / 1000, .tv_usec = (fb % 1000) * 1000};
    if (curl_multi_add_handle(up->multi, x->easy) != CURLM_OK) {
        x->start_failed = 1;
        snprintf(x->errbuf, sizeof(x->errbuf), "could not start the upstream transfer");
        tv.tv_sec = tv.tv_usec = 0;
    } else {
        x->in_multi = 1;
    }
    evtimer_add(x->fb_timer, &tv);
    return x;
}

void upstream_kick(struct upstream *up)
{
    if (!up->in_curl)
        upstream_action(up, CURL_SOCKET_TIMEOUT, 0);
}

void upstream_cancel(struct upstream_xfer *x)
{
    if (x == NULL || x->cancelled)
        return;
    x->cancelled = 1;
    evtimer_del(x->fb_timer);
    if (x->up->in_curl) { /* curl forbids removing a handle from inside its callbacks */
        x->zombie = 1;
        x->next_zombie = x->up->zombies;
        x->up->zombies = x;
        return;
    }
    upstream_xfer_free(x);
}

void upstream_resume(struct upstream_xfer *x)
{
    if (x == NULL || !x->paused || x->cancelled)
        return;
    x->paused = 0;
    x->last_us = util_now_us();
    x->up->in_curl++;
    curl_easy_pause(x->easy, CURLPAUSE_CONT); /* may deliver held data right here */
    x->up->in_curl--;
    upstream_check_done(x->up);
}

const char *upstream_retry_after(const struct upstream_xfer *x)
{
    return x != NULL ? x->retry_after : "";
}

int upstream_paused(const struct upstream_xfer *x)
{
    return x != NULL && x->paused;
}

/* ---- per worker ---- */

static struct curl_slist *upstream_headers(const struct cfg_upstream *u, int stream)
{
    struct curl_slist *l = NULL;
    l = curl_slist_append(l, "Content-Type: application/json");
    if (stream)
        l = curl_slist_append(l, "Accept: text/event-stream");
    l = curl_slist_append(l, "Expect:"); /* no 100-continue round trip */
    l = curl_slist_append(l, "User-Agent: memproxy/" MEMPROXY_VERSION);
    if (*u->api_key != '\0') {
        char *auth = xasprintf("Authorization: Bearer %s", u->api_key);
        l = curl_slist_append(l, auth);
        free(auth);
    }
    if (l == NULL)
        log_fatal("upstream: out of memory building request headers");
    return l;
}

struct upstream *upstream_create(struct event_base *base, const struct cfg *cfg)
{
    struct upstream *up = xcalloc(1, sizeof(*up));
    up->base = base;
    up->cfg = cfg;
    up->multi = curl_multi_init();
    if (up->multi == NULL)
        log_fatal("upstream: cannot create a curl multi handle");
    up->timer = evtimer_new(base, upstream_timer_event, up);
    curl_multi_setopt(up->multi, CURLMOPT_SOCKETFUNCTION, upstream_socket_cb);
    curl_multi_setopt(up->multi, CURLMOPT_SOCKETDATA, up);
    curl_multi_setopt(up->multi, CURLMOPT_TIMERFUNCTION, upstream_timer_cb);
    curl_multi_setopt(up->multi, CURLMOPT_TIMERDATA, up);
    curl_multi_setopt(up->multi, CURLMOPT_MAXCONNECTS, cfg->upstream_max_connections);
    up->hdr_json = xcalloc(cfg->nupstreams, sizeof(*up->hdr_json));
    up->hdr_stream = xcalloc(cfg->nupstreams, sizeof(*up->hdr_stream));
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        up->hdr_json[i] = upstream_headers(&cfg->upstreams[i], 0);
        up->hdr_stream[i] = upstream_headers(&cfg->upstreams[i], 1);
    }
    return up;
}

void upstream_destroy(struct upstream *up)
{
    if (up == NULL)
        return;
    /* Transfers still running belong to requests the worker already tore down. */
    curl_multi_cleanup(up->multi); /* closes the connections: their sockets' entries go */
    for (size_t i = 0; i < up->npool; i++)
        curl_easy_cleanup(up->pool[i]);
    for (size_t i = 0; i < up->nsocks; i++)
        upstream_sock_forget(up, (curl_socket_t)i);
    free(up->socks);
    for (size_t i = 0; i < up->cfg->nupstreams; i++) {
        curl_slist_free_all(up->hdr_json[i]);
        curl_slist_free_all(up->hdr_stream[i]);
    }
    free(up->hdr_json);
    free(up->hdr_stream);
    while (up->urls != NULL) { /* after the easy handles, which may point at them */
        struct upstream_url *next = up->urls->next;
        curl_url_cleanup(up->urls->uh);
        free(up->urls->text);
        free(up->urls->path);
        free(up->urls);
        up->urls = next;
    }
    event_free(up->timer);
    free(up);
}
