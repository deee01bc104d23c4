#include "proxy/http/routes.h"

#include "base/util.h"
#include "memory/memory.h"
#include "proxy/chat/chat.h"
#include "proxy/chat/forward.h"
#include "proxy/http/auth.h"
#include "proxy/http/conn.h"
#include "proxy/http/metrics.h"
#include "proxy/http/respond.h"
#include "proxy/http/ui.h"
#include "proxy/http/worker.h"
#include "proxy/rest/notify.h"
#include "proxy/rest/rest.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

struct route_def {
    const char *path; /* after the optional /p/{profile} and /v1 prefixes */
    enum evhttp_cmd_type method;
    enum metrics_route route;
    const char *upstream_path; /* for forwarded routes */
};

static const struct route_def route_defs[] = {
    {"/chat/completions", EVHTTP_REQ_POST, METRICS_ROUTE_CHAT, NULL},
    {"/models", EVHTTP_REQ_GET, METRICS_ROUTE_MODELS, "/models"},
    {"/embeddings", EVHTTP_REQ_POST, METRICS_ROUTE_EMBEDDINGS, "/embeddings"},
};

static int routes_is(const char *path, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(path, want, len) == 0;
}

static void routes_health(struct worker *w, struct evhttp_request *req)
{
    if (w->draining) {
        static const char body[] = "{\"status\":\"draining\"}";
        respond_send(w, METRICS_ROUTE_HEALTH, req, 503, NULL, body, sizeof(body) - 1);
        return;
    }
    static const char body[] = "{\"status\":\"ok\"}";
    respond_send(w, METRICS_ROUTE_HEALTH, req, 200, NULL, body, sizeof(body) - 1);
}

static void routes_free_text(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)data);
}

static void routes_metrics(struct worker *w, struct evhttp_request *req)
{
    const char *want = w->cfg->metrics_key;
    if (*want != '\0') { /* metrics.key: a scrape must carry it */
        const char *got =
            auth_bearer(evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization"));
        if (got == NULL || !util_ct_equal(got, strlen(got), want, strlen(want))) {
            struct apierr e;
            apierr_set(&e, APIERR_UNAUTHORIZED, NULL,
                       "GET /metrics needs the metrics key: Authorization: Bearer <metrics.key>");
            evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
            respond_error(w, METRICS_ROUTE_METRICS, req, &e);
            return;
        }
    }
    size_t n = 0, len = 0;
    struct memory_stats ms;
    struct metrics *const *sets = w->all_metrics;
    n = w->nmetrics;
    memory_stats(w->mem, &ms);
    char *text = metrics_render(sets, n, &ms, &len);
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add_reference(buf, text, len, routes_free_text, NULL); /* freed once sent */
    respond_send_buffer(w, METRICS_ROUTE_METRICS, req, 200,
                        "text/plain; version=0.0.4; charset=utf-8", buf);
    evbuffer_free(buf);
}

/* Split "/p/{profile}" and "/v1" off the front of the path. */
static void routes_strip(const char **path, size_t *len, struct request_ctx *rc)
{
    if (*len > 3 && memcmp(*path, "/p/", 3) == 0) {
        const char *name = *path + 3;
        const char *slash = memchr(name, '/', *len - 3);
        if (slash != NULL && slash > name) {
            rc->path_profile = name;
            rc->path_profile_len = (size_t)(slash - name);
            *len -= (size_t)(slash - *path);
            *path = slash;
        }
    }
    if (*len >= 4 && memcmp(*path, "/v1/", 4) == 0) {
        *path += 3;
        *len -= 3;
    }
}

/* A body's Content-Type is JSON (application/json or application/<x>+json, parameters
 * allowed), or absent: a browser's form post (text/plain, x-www-form-urlencoded,
 * multipart/form-data: what a page may send anywhere without asking) never reaches the
 * upstream or the store. */
static int routes_json_type(struct evhttp_request *req)
{
    const char *ct = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    if (ct == NULL)
        return 1;
    size_t n = strcspn(ct, "; \t");
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return 1;
    return n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
           strncasecmp(ct + n - 5, "+json", 5) == 0 && memchr(ct + 12, '/', n - 12) == NULL;
}

/* The body within its cap into rc; 0 to go on, -1 when an error was sent. */
static int routes_body(struct worker *w, struct evhttp_request *req, struct request_ctx *rc)
{
    struct apierr e;
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(body);
    if (len > 0 && !routes_json_type(req)) {
        apierr_set(&e, APIERR_MEDIA_TYPE, "Content-Type",
                   "the body must be JSON: send Content-Type: application/json");
        respond_error(w, rc->route, req, &e);
        return -1;
    }
    if (len > (size_t)w->cfg->max_body_size) {
        apierr_set(&e, APIERR_TOO_LARGE, NULL, "the request body is %zu bytes; the limit is %ld",
                   len, w->cfg->max_body_size);
        respond_error(w, rc->route, req, &e);
        return -1;
    }
    if (len > 0) {
        rc->body = (const char *)evbuffer_pullup(body, -1);
        rc->body_len = len;
    }
    if (len >= WORKER_TRIM_BODY)
        worker_trim_later(w);
    return 0;
}

/* Auth (a client key, or an admin key for the REST API) and body cap; 0 to go on, -1 when
 * an error was sent. */
static int routes_admit(struct worker *w, struct evhttp_request *req, struct request_ctx *rc,
                        int admin)
{
    struct apierr e;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *authz = evhttp_find_header(in, "Authorization");
    if ((admin ? auth_admin(w->cfg, authz, &rc->key) : auth_client(w->cfg, authz, &rc->key)) != 0) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
        if (admin && w->cfg->nadmin_keys == 0)
            apierr_set(&e, APIERR_UNAUTHORIZED, NULL,
                       "the REST API is off: no admin key is configured (auth.admin_keys or "
                       "MEMPROXY_ADMIN_KEY)");
        else
            apierr_set(&e, APIERR_UNAUTHORIZED, NULL,
                       "a valid %s key is required: Authorization: Bearer <key>",
                       admin ? "admin" : "client");
        respond_error(w, rc->route, req, &e);
        return -1;
    }
    rc->tenant = rc->key != NULL ? rc->key->tenant : "default";
    if (admin)
        rc->key = NULL; /* admin keys bind no user */
    return routes_body(w, req, rc);
}

static void routes_api(struct worker *w, struct evhttp_request *req, const struct route_def *d,
                       struct request_ctx *rc)
{
    struct apierr e;
    rc->route = d->route;
    if (evhttp_request_get_command(req) != d->method) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          d->method == EVHTTP_REQ_GET ? "GET" : "POST");
        apierr_set(&e, APIERR_METHOD, NULL, "use %s for this route",
                   d->method == EVHTTP_REQ_GET ? "GET" : "POST");
        respond_error(w, rc->route, req, &e);
        return;
    }
    if (w->draining) {
        apierr_set(&e, APIERR_UNAVAILABLE, NULL, "memproxy is shutting down; retry");
        respond_error(w, rc->route, req, &e);
        return;
    }
    if (routes_admit(w, req, rc, 0) != 0)
        return;
    if (d->upstream_path == NULL)
        chat_handle(w, req, rc);
    else
        forward_handle(w, req, rc, d->upstream_path);
}

static void routes_rest(struct worker *w, struct evhttp_request *req, const char *path, size_t len,
                        struct request_ctx *rc)
{
    rc->route = METRICS_ROUTE_REST;
    if (w->draining) {
        struct apierr e;
        apierr_set(&e, APIERR_UNAVAILABLE, NULL, "memproxy is shutting down; retry");
        respond_error(w, rc->route, req, &e);
        return;
    }
    if (routes_is(path, len, NOTIFY_PATH)) { /* signed by Agora instead of a key */
        if (routes_body(w, req, rc) == 0)
            notify_handle(w, req, rc);
        return;
    }
    if (routes_admit(w, req, rc, 1) == 0)
        rest_handle(w, req, path, len, rc);
}

/* Requests whose framing or bytes cannot be trusted: a NUL byte (evhttp would have cut a
 * header at it), or more than one Content-Length (which one frames the body is a guess a
 * proxy in front may make differently: request smuggling). 400, and the connection closes.
 * 0 to go on. */
static int routes_malformed(struct worker *w, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    const char *why = NULL;
    int lengths = 0;
    struct evkeyval *h;
    TAILQ_FOREACH(h, evhttp_request_get_input_headers(req), next)
    {
        lengths += strcasecmp(h->key, "Content-Length") == 0;
    }
    if (evcon != NULL && conn_request(w->conns, evcon) != 0)
        why = "the request holds a NUL byte";
    else if (lengths > 1)
        why = "the request has more than one Content-Length";
    if (why == NULL)
        return 0;
    struct apierr e;
    apierr_set(&e, APIERR_INVALID_REQUEST, NULL, "%s", why);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    respond_error(w, METRICS_ROUTE_OTHER, req, &e);
    return -1;
}

/* server.allowed_hosts: the Host header's name (no port) is one of them, or the list is
 * empty. A page on an attacker's site can make a browser send requests to a name it has
 * re-pointed at memproxy's address (DNS rebinding); they carry that name as their Host. A
 * target in absolute form names the host itself, and its Host header is ignored (RFC 9112
 * section 3.2.2). */
static int routes_host_allowed(const struct cfg *cfg, struct evhttp_request *req,
                               const char *authority)
{
    const struct cfg_strlist *hosts = &cfg->allowed_hosts;
    if (hosts->n == 0)
        return 1;
    const char *h = authority;
    if (h == NULL)
        h = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
    if (h == NULL)
        return 0;
    size_t n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/?#");
    for (size_t i = 0; i < hosts->n; i++) {
        if (strlen(hosts->v[i]) == n && strncasecmp(hosts->v[i], h, n) == 0)
            return 1;
    }
    return 0;
}

void routes_handle(struct evhttp_request *req, void *arg)
{
    struct worker *w = arg;
    struct request_ctx rc = {.route = METRICS_ROUTE_OTHER, .t_start = util_now_us()};
    if (routes_malformed(w, req) != 0)
        return;
    const char *authority;
    rc.target = util_target_path(evhttp_request_get_uri(req), &rc.target_len, &authority);
    const char *path = rc.target;
    size_t len = rc.target_len;
    if (!routes_host_allowed(w->cfg, req, authority)) {
        struct apierr e;
        apierr_set(&e, APIERR_MISDIRECTED, "Host",
                   "this server does not answer for that Host (server.allowed_hosts)");
        respond_error(w, METRICS_ROUTE_OTHER, req, &e);
        return;
    }
    int get = evhttp_request_get_command(req) & (EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);

    if (get && routes_is(path, len, "/healthz")) {
        routes_health(w, req);
        return;
    }
    if (get && ui_match(path, len)) { /* the call viewer's files (it reads the REST API) */
        ui_handle(w, req, path, len);
        return;
    }
    if (get && w->cfg->metrics_enabled && routes_is(path, len, "/metrics")) {
        routes_metrics(w, req);
        return;
    }
    routes_strip(&path, &len, &rc);
    if (rc.path_profile == NULL && (rest_match(path, len) || routes_is(path, len, NOTIFY_PATH))) {
        routes_rest(w, req, path, len, &rc);
        return;
    }
    for (size_t i = 0; i < UTIL_ARRAY_LEN(route_defs); i++) {
        if (routes_is(path, len, route_defs[i].path)) {
            routes_api(w, req, &route_defs[i], &rc);
            return;
        }
    }
    struct apierr e;
    apierr_set(&e, APIERR_NOT_FOUND, NULL, "no route for this path");
    respond_error(w, METRICS_ROUTE_OTHER, req, &e);
}
