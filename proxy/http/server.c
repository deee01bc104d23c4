#include "proxy/http/server.h"

#include "proxy/http/worker.h"

#include "base/jmemo.h"
#include "base/log.h"
#include "base/util.h"
#include "memory/memory.h"
#include "memory/readpool.h"
#include "proxy/chat/relay.h"
#include "proxy/http/apierr.h"
#include "proxy/http/conn.h"
#include "proxy/http/metrics.h"
#include "proxy/http/routes.h"
#include "proxy/jobs/embedder.h"
#include "proxy/jobs/hook.h"
#include "proxy/jobs/lifecycle.h"
#include "proxy/jobs/summarizer.h"
#include "proxy/upstream/upstream.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct server {
    const struct cfg *cfg;
    int fd;
    int port;
    /* nworkers serving loops, then the jobs loop (SERVER_JOBS): nloops in all */
    struct worker *workers;
    struct metrics **metrics; /* every loop's */
    struct memory *mem;
    struct readpool *pool;         /* shared stores: reads off the loops (storage.pool) */
    struct hook *hooks;            /* on the jobs loop */
    struct summarizer *summarizer; /* on the jobs loop */
    struct embedder *embedder;     /* on the jobs loop */
    size_t nworkers, nloops;
    size_t nmade;         /* loops set up (all of them once server_create returned) */
    atomic_int running;   /* workers whose loop has not returned */
    atomic_int accepting; /* workers still accepting; the last to stop closes the socket */
    atomic_long open;     /* client connections of all workers (conn.c counts them) */
    long max_connections;
    char *busy; /* the whole 503 response a connection past max_connections gets */
    size_t busy_len;
    char *slow; /* the whole 408 response a request past server.request_timeout gets */
    size_t slow_len;
    char *own[CONN_OWN_COUNT]; /* ours in place of evhttp's error pages (conn.h) */
};

/* The worker whose loop runs on this thread: libevent hands a listener's error callback the
 * argument evhttp set, not ours. */
static _Thread_local struct worker *server_self;

/* The loop of the background jobs: after the serving ones. */
#define SERVER_JOBS(srv) (&(srv)->workers[(srv)->nworkers])

#define SERVER_ACCEPT_BACKOFF_MIN 50   /* ms */
#define SERVER_ACCEPT_BACKOFF_MAX 1000 /* ms */
#define SERVER_FD_RESERVE         64   /* descriptors kept for the database, logs, jobs */
#define SERVER_BODY_SLACK         (64 * 1024)

static int server_bind(const struct cfg *cfg, int *port_out, char **err)
{
    char *host = NULL, portstr[8];
    int port = 0, fd = -1, one = 1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *res = NULL;

    cfg_parse_listen(cfg->listen, &host, &port); /* validated already */
    snprintf(portstr, sizeof(portstr), "%d", port);
    int rc = getaddrinfo(*host ? host : NULL, portstr, &hints, &res);
    if (rc != 0) {
        *err = xasprintf("server.listen: cannot resolve '%s': %s", host, gai_strerror(rc));
        goto out;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        *err = xasprintf("server.listen: cannot listen on %s: %s", cfg->listen, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
        goto out;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
out:
    if (res)
        freeaddrinfo(res);
    free(host);
    return fd;
}

static void server_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct timeval tv = {.tv_sec = 0, .tv_usec = w->accept_backoff_ms * 1000};
    (void)fd;
    (void)what;
    if (w->accept_probing) { /* a whole pause went by without an error */
        log_info("accept: accepting again after %ld pause(s)", w->accept_pauses);
        w->accept_backoff_ms = w->accept_pauses = w->accept_probing = 0;
        return;
    }
    if (w->draining)
        return;
    evconnlistener_enable(evhttp_bound_socket_get_listener(w->bound));
    w->accept_probing = 1;
    evtimer_add(w->accept_retry, &tv);
}

/*
 * accept() failed with something other than "try again" — out of descriptors (EMFILE,
 * ENFILE) or of kernel memory. libevent would log it and call again at once, for as long as
 * the condition lasts (two workers spun on it at 1.6 cores and 7 MB of log a second). Stop
 * accepting for a while instead, doubling the pause up to a second; clients wait in the
 * backlog meanwhile and are served once connections close. One line when it starts, one
 * when it ends.
 */
static void server_accept_error(struct evconnlistener *l, void *unused)
{
    struct worker *w = server_self;
    int err = EVUTIL_SOCKET_ERROR();
    (void)unused;
    evconnlistener_disable(l);
    if (w == NULL)
        return;
    if (w->accept_backoff_ms == 0)
        log_warn("accept: %s; not accepting for a while (open client connections: %ld)",
                 strerror(err), atomic_load(&w->srv->open));
    w->accept_backoff_ms =
        w->accept_backoff_ms == 0 ? SERVER_ACCEPT_BACKOFF_MIN : w->accept_backoff_ms * 2;
    if (w->accept_backoff_ms > SERVER_ACCEPT_BACKOFF_MAX)
        w->accept_backoff_ms = SERVER_ACCEPT_BACKOFF_MAX;
    w->accept_pauses++;
    w->accept_probing = 0;
    struct timeval tv = {.tv_sec = 0, .tv_usec = w->accept_backoff_ms * 1000};
    evtimer_add(w->accept_retry, &tv);
}

/* What every loop has, serving or not: its base, upstream client, metrics and reader. */
static int server_loop_init(struct server *srv, struct worker *w, int id, const char *name,
                            char **err)
{
    w->id = id;
    snprintf(w->name, sizeof(w->name), "%s", name);
    w->cfg = srv->cfg;
    w->srv = srv;
    /* The epoll changelist folds the interest changes made while handling one batch of
     * events (evhttp toggling read/write, curl re-arming its socket) into one epoll_ctl. */
    struct event_config *ec = event_config_new();
    event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    w->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (w->base == NULL)
        log_fatal("%s: cannot create its event base", name);
    w->up = upstream_create(w->base, srv->cfg);
    w->metrics = metrics_create();
    srv->metrics[id] = w->metrics;
    w->mem = srv->mem;
    w->pool = srv->pool;
    if (memory_attach(srv->mem, w->base) != 0) {
        *err = xasprintf("%s: cannot create its commit inbox: %s", name, strerror(errno));
        return -1;
    }
    w->reader = memory_reader_open(srv->mem, err);
    return w->reader != NULL ? 0 : -1;
}

/* An answer conn gave on w's loop itself: counted as the routes count theirs. */
static void server_answered(void *arg, int status)
{
    struct worker *w = arg;
    metrics_request(w->metrics, METRICS_ROUTE_OTHER, status);
}

/* The body size past which evhttp discards a body unread and answers 413 itself (conn.h):
 * a quarter (at least SERVER_BODY_SLACK) over server.max_body_size. */
static long server_body_cap(const struct cfg *cfg)
{
    long slack = cfg->max_body_size / 4;
    return cfg->max_body_size + (slack > SERVER_BODY_SLACK ? slack : SERVER_BODY_SLACK);
}

static int server_worker_init(struct server *srv, struct worker *w, int id, char **err)
{
    const struct cfg *cfg = srv->cfg;
    char name[16];
    snprintf(name, sizeof(name), "w%d", id);
    if (server_loop_init(srv, w, id, name, err) != 0)
        return -1;
    w->http = evhttp_new(w->base);
    if (w->http == NULL)
        log_fatal("worker %d: cannot create its HTTP server", id);
    /* A quarter (at least 64 KiB) past the limit evhttp reads the body only to discard it and
     * answers 413 itself (lingering close: the client gets to read it; conn.c puts the JSON
     * error in place of evhttp's page); up to that, routes answer 413. evhttp 2.1 hands a server
     * request over only once its body is read (no hook between headers and body), so the key cannot
     * be checked first: this bounds what a client without one makes a worker buffer (it was 4x the
     * limit). */
    evhttp_set_max_body_size(w->http, (ev_ssize_t)server_body_cap(cfg));
    evhttp_set_flags(w->http, EVHTTP_SERVER_LINGERING_CLOSE); /* the client reads the 413 */
    evhttp_set_max_headers_size(w->http, (ev_ssize_t)cfg->max_header_size);
    struct timeval tv = {.tv_sec = cfg->client_timeout_ms / 1000,
                         .tv_usec = (cfg->client_timeout_ms % 1000) * 1000};
    evhttp_set_timeout_tv(w->http, &tv);
    evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_OPTIONS);
    evhttp_set_default_content_type(w->http, "application/json");
    evhttp_set_gencb(w->http, routes_handle, w);
    struct conn_limits lim = {.open = &srv->open,
                              .max = srv->max_connections,
                              .busy = srv->busy,
                              .busy_len = srv->busy_len,
                              .request_ms = cfg->request_timeout_ms,
                              .slow = srv->slow,
                              .slow_len = srv->slow_len,
                              .answered = server_answered,
                              .answered_arg = w};
    for (int k = 0; k < CONN_OWN_COUNT; k++) {
        lim.own[k] = srv->own[k];
        lim.own_len[k] = strlen(srv->own[k]);
    }
    w->conns = conn_table_create(w->base, &lim);
    evhttp_set_bevcb(w->http, conn_bufferevent_new, w->conns);
    struct evconnlistener *l =
        evconnlistener_new(w->base, NULL, NULL, LEV_OPT_CLOSE_ON_EXEC, 0, srv->fd);
    if (l == NULL)
        log_fatal("worker %d: cannot listen on the shared socket", id);
    w->bound = evhttp_bind_listener(w->http, l);
    evconnlistener_set_error_cb(l, server_accept_error);
    w->accept_retry = evtimer_new(w->base, server_accept_retry, w);
    w->memo = jmemo_create((size_t)cfg->parse_memo);
    memory_reader_async(w->reader, w->base, w->pool); /* replicas: reads never wait */
    return 0;
}

/* Every worker reaches the jobs and the metrics of all through its own fields (worker.h). */
static void server_share_jobs(struct server *srv)
{
    for (size_t i = 0; i < srv->nloops; i++) {
        struct worker *w = &srv->workers[i];
        w->hooks = srv->hooks;
        w->summarizer = srv->summarizer;
        w->embedder = srv->embedder;
        w->all_metrics = srv->metrics;
        w->nmetrics = srv->nloops;
    }
}

/* A whole response in the one JSON error shape, for conn.c to write past evhttp. */
static char *server_canned(enum apierr_kind kind, const char *reason, const char *extra,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static char *server_canned(enum apierr_kind kind, const char *reason, const char *extra,
                           const char *fmt, ...)
{
    struct apierr e;
    char msg[256];
    size_t len = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    apierr_set(&e, kind, NULL, "%s", msg);
    char *body = apierr_json(&e, &len);
    char *out = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\n%sConnection: close\r\n\r\n%s",
                          apierr_status(kind), reason, len, extra, body);
    free(body);
    return out;
}

/*
 * server.max_connections, or one from the open-file limit (raised to its hard limit first, as
 * nginx's worker_rlimit_nofile would): a chat request holds a client and an upstream socket,
 * and the process keeps SERVER_FD_RESERVE for itself. Also the answer past it.
 */
static void server_limit_connections(struct server *srv)
{
    struct rlimit rl = {0, 0};
    long max = srv->cfg->max_connections;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = was;
    }
    if (max == 0) {
        long fds =
            rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1000000 ? 1000000 : (long)rl.rlim_cur;
        max = (fds - SERVER_FD_RESERVE) / 2;
        max = max < 16 ? 16 : max;
    }
    srv->max_connections = max;
    srv->busy = server_canned(APIERR_BUSY, "Service Unavailable", "Retry-After: 1\r\n",
                              "memproxy has %ld client connections open "
                              "(server.max_connections); retry shortly",
                              max);
    srv->busy_len = strlen(srv->busy);
    srv->slow = server_canned(APIERR_TIMEOUT, "Request Timeout", "",
                              "the request was not received whole within %ld ms "
                              "(server.request_timeout)",
                              srv->cfg->request_timeout_ms);
    srv->slow_len = strlen(srv->slow);
    log_info("server: at most %ld client connections (open-file limit %ld)", max,
             (long)rl.rlim_cur);
}

/* What takes the place of evhttp's own error pages (conn.h): what each status means here. */
static void server_canned_own(struct server *srv)
{
    const struct cfg *cfg = srv->cfg;
    srv->own[CONN_OWN_400] = server_canned(
        APIERR_INVALID_REQUEST, "Bad Request", "",
        "the request is not valid HTTP/1.1: a malformed request line or header, or headers over "
        "%ld bytes (server.max_header_size)",
        cfg->max_header_size);
    srv->own[CONN_OWN_413] =
        server_canned(APIERR_TOO_LARGE, "Payload Too Large", "",
                      "the request body is over %ld bytes (server.max_body_size is %ld), or its "
                      "chunked encoding is malformed",
                      server_body_cap(cfg), cfg->max_body_size);
    srv->own[CONN_OWN_501] = server_canned(
        APIERR_UNKNOWN_METHOD, "Not Implemented", "",
        "memproxy serves the methods GET, POST, PUT, PATCH, DELETE, HEAD and OPTIONS");
}

struct server *server_create(const struct cfg *cfg, struct memory *mem, char **err)
{
    struct server *srv = xcalloc(1, sizeof(*srv));
    srv->cfg = cfg;
    srv->mem = mem;
    srv->fd = server_bind(cfg, &srv->port, err);
    if (srv->fd < 0) {
        free(srv);
        return NULL;
    }
    server_limit_connections(srv);
    server_canned_own(srv);
    long n = cfg->workers;
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    srv->nworkers = n > 0 ? (size_t)n : 1;
    srv->nloops = srv->nworkers + 1;
    srv->workers = xcalloc(srv->nloops, sizeof(*srv->workers));
    srv->metrics = xcalloc(srv->nloops, sizeof(*srv->metrics));
    if (memory_shared(mem) && (srv->pool = readpool_create(mem, (size_t)cfg->db_pool, err)) == NULL)
        goto fail;
    for (size_t i = 0; i < srv->nworkers; i++) {
        srv->nmade = i + 1; /* free what was made */
        if (server_worker_init(srv, &srv->workers[i], (int)i, err) != 0)
            goto fail;
    }
    srv->nmade = srv->nloops;
    if (server_loop_init(srv, SERVER_JOBS(srv), (int)srv->nworkers, "jobs", err) != 0)
        goto fail;
    /* The background work of the whole process runs on a loop of its own: its reads of a
     * shared database's queues wait there, never on a loop that serves requests. */
    if (cfg->nwebhooks > 0)
        srv->hooks = hook_create(SERVER_JOBS(srv));
    srv->summarizer = summarizer_create(SERVER_JOBS(srv));
    srv->embedder = embedder_create(SERVER_JOBS(srv));
    server_share_jobs(srv);
    SERVER_JOBS(srv)->lifecycle = lifecycle_create(SERVER_JOBS(srv));
    return srv;
fail:
    server_destroy(srv);
    return NULL;
}

int server_port(const struct server *srv)
{
    return srv->port;
}

/* ---- draining (each runs on the worker's own thread) ---- */

static void server_exit_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    w->forced = 1;
    event_base_loopexit(w->base, NULL);
}

/* The drain deadline: end what is still in flight, give those last bytes a short while to
 * reach their clients, then stop whatever remains. */
static void server_force_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    if (w->active > 0)
        log_warn("shutdown timeout: ending %zu request(s) still in flight", w->active);
    relay_abort_all(w);
    struct timeval grace = {.tv_sec = 1, .tv_usec = 0};
    event_del(w->force_timer);
    evtimer_assign(w->force_timer, w->base, server_exit_cb, w);
    evtimer_add(w->force_timer, &grace);
    worker_idle_check(w);
}

static void server_drain_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd;
    (void)what;
    if (w->draining) { /* second signal: stop now */
        if (w->force_timer != NULL)
            server_force_cb(-1, 0, w);
        return;
    }
    w->draining = 1;
    /* Close the socket once nobody accepts from it, so new clients are refused at once
     * instead of waiting in the backlog until exit. */
    if (w->bound != NULL) {
        evconnlistener_disable(evhttp_bound_socket_get_listener(w->bound));
        if (atomic_fetch_sub(&w->srv->accepting, 1) == 1) {
            close(w->srv->fd);
            w->srv->fd = -1;
        }
    }
    long ms = w->cfg->shutdown_timeout_ms;
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    w->force_timer = evtimer_new(w->base, server_force_cb, w);
    evtimer_add(w->force_timer, &tv);
    worker_idle_check(w);
}

static void *server_worker_main(void *arg)
{
    struct worker *w = arg;
    log_set_thread_name(w->name);
    server_self = w;
    /* event_base_loopexit() (worker_idle_check) ends the loop once the callbacks of
     * its turn have run, and one of those may have taken a hold meanwhile (a webhook's
     * outcome or a stop sent to the writer): its report would then run in server_destroy(),
     * after its owner was freed. So the loop goes on until the worker is idle again, unless
     * the drain deadline forced it out (server_exit_cb). */
    do
        event_base_dispatch(w->base);
    while (w->draining && !w->forced && !worker_idle(w));
    atomic_fetch_sub(&w->srv->running, 1);
    return NULL;
}

static void server_signal_workers(struct server *srv)
{
    struct timeval zero = {0, 0};
    for (size_t i = 0; i < srv->nloops; i++)
        event_base_once(srv->workers[i].base, -1, EV_TIMEOUT, server_drain_cb, &srv->workers[i],
                        &zero);
}

/* Wait for signals on the main thread until every worker loop has returned. */
static void server_wait(struct server *srv, sigset_t *set)
{
    int sig = 0, signals = 0;
    struct timespec poll = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
    sigwait(set, &sig);
    log_info("%s: draining (up to %ld ms), send again to stop at once", strsignal(sig),
             srv->cfg->shutdown_timeout_ms);
    server_signal_workers(srv);
    while (atomic_load(&srv->running) > 0) {
        if (sigtimedwait(set, NULL, &poll) > 0 && signals++ == 0)
            server_signal_workers(srv);
    }
}

int server_run(struct server *srv)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* workers inherit the mask */

    atomic_store(&srv->running, (int)srv->nloops);
    atomic_store(&srv->accepting, (int)srv->nworkers);
    for (size_t i = 0; i < srv->nloops; i++) {
        if (pthread_create(&srv->workers[i].thread, NULL, server_worker_main, &srv->workers[i]) !=
            0)
            log_fatal("cannot start worker %zu", i);
    }
    log_info("memproxy %s listening on %s (port %d), %zu worker(s)", MEMPROXY_VERSION,
             srv->cfg->listen, srv->port, srv->nworkers);
    server_wait(srv, &set);
    for (size_t i = 0; i < srv->nloops; i++)
        pthread_join(srv->workers[i].thread, NULL);
    log_info("stopped");
    return 0;
}

/* Run the reports still owed to held work (a worker forced out by the drain deadline left
 * them), while their owners exist: draining, nobody starts new work from them. A try that
 * finishes meanwhile takes a hold of its own, hence the rounds (bounded: a writer that does
 * not answer must not keep the process from exiting). */
static void server_settle(struct server *srv)
{
    for (int round = 0; round < 100; round++) {
        size_t held = 0;
        for (size_t i = 0; i < srv->nmade; i++)
            held += srv->workers[i].base != NULL ? srv->workers[i].held : 0;
        if (held == 0)
            return;
        memory_drain(srv->mem);
        for (size_t i = 0; i < srv->nmade; i++)
            if (srv->workers[i].base != NULL)
                event_base_loop(srv->workers[i].base, EVLOOP_NONBLOCK);
    }
}

void server_destroy(struct server *srv)
{
    if (srv == NULL)
        return;
    server_settle(srv);
    /* Then the background work, so that nothing below starts more: a webhook try still on
     * the wire is dropped (its row stays pending for the next start); no stop or delivery
     * outcome is waiting (server_settle). */
    hook_destroy(srv->hooks);
    srv->hooks = NULL;
    summarizer_destroy(srv->summarizer);
    srv->summarizer = NULL;
    embedder_destroy(srv->embedder);
    srv->embedder = NULL;
    server_share_jobs(srv);
    for (size_t i = 0; i < srv->nmade; i++) {
        lifecycle_destroy(srv->workers[i].lifecycle);
        srv->workers[i].lifecycle = NULL;
    }
    readpool_destroy(srv->pool); /* the reads still queued answer on their bases... */
    memory_drain(srv->mem);      /* ...as does every report... */
    for (size_t i = 0; i < srv->nmade; i++) {
        struct worker *w = &srv->workers[i];
        if (w->base != NULL) /* ...here: the worker threads are gone */
            event_base_loop(w->base, EVLOOP_NONBLOCK);
        relay_abort_all(w);
        /* after the loop above ran its reports, before its base goes (a base never attached,
         * its worker's setup having failed first, is ignored) */
        memory_detach(srv->mem, w->base);
        if (w->http != NULL)
            evhttp_free(w->http); /* closes kept-alive client connections */
        conn_table_destroy(w->conns);
        upstream_destroy(w->up);
        if (w->force_timer)
            event_free(w->force_timer);
        if (w->accept_retry)
            event_free(w->accept_retry);
        if (w->trim_timer)
            event_free(w->trim_timer);
        event_base_free(w->base);
        metrics_destroy(w->metrics);
        memory_reader_close(w->reader);
        jmemo_destroy(w->memo);
    }
    if (srv->fd >= 0)
        close(srv->fd);
    free(srv->workers);
    free(srv->metrics);
    free(srv->busy);
    free(srv->slow);
    for (int k = 0; k < CONN_OWN_COUNT; k++)
        free(srv->own[k]);
    free(srv);
}
