/*
 * routes: the HTTP entry point of every worker. Maps method and path to a handler, checks
 * the client key, reads the body within its cap, and answers what no handler owns (404, 405,
 * 413, 503 while draining, /healthz, /metrics).
 *
 * Paths: /v1/chat/completions, /v1/models, /v1/embeddings, each also without the /v1 prefix
 * and under /p/{profile}/ to pick a profile; GET /healthz; GET /metrics.
 */
#ifndef MEMPROXY_ROUTES_H
#define MEMPROXY_ROUTES_H

#include "proxy/http/apierr.h"
#include "config/cfg.h"
#include "proxy/http/metrics.h"

#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>

struct worker;

/* What routes learned about a request before handing it on; valid during the handler call. */
struct route_ctx {
    enum metrics_route route;
    const char *tenant;       /* of the client key */
    const char *path_profile; /* from /p/{profile}/, not NUL-terminated; NULL if absent */
    size_t path_profile_len;
    const char *body; /* the request body (NUL-terminated copy), NULL when empty */
    size_t body_len;
    uint64_t t_start;
};

/* evhttp's generic callback; arg is the struct worker. */
void routes_handle(struct evhttp_request *req, void *arg);

/*
 * The profile for this request: /p/{name}/ in the path, else the X-Memproxy-Profile header,
 * else body_profile (may be NULL), else the default. NULL and *e set when the name is unknown.
 */
const struct cfg_profile *routes_profile(const struct worker *w, struct evhttp_request *req,
                                         const struct route_ctx *rc, const char *body_profile,
                                         struct apierr *e);

#endif
