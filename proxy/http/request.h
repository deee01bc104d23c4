/*
 * request: what the HTTP layer hands a handler about its request (struct request_ctx), and
 * the profile a request picks. Its own module so that routes (which calls the handlers) and
 * the handlers (chat, forward, rest) both include it without including each other.
 */
#ifndef MEMPROXY_REQUEST_H
#define MEMPROXY_REQUEST_H

#include "config/cfg.h"
#include "proxy/http/apierr.h"
#include "proxy/http/metrics.h"

#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>

struct worker; /* worker.h: the handlers of a request_ctx take the worker they run on */

/* What routes learned about a request before handing it to its handler; valid during the
 * handler call. */
struct request_ctx {
    enum metrics_route route;
    const char *tenant;               /* of the client key */
    const struct cfg_client_key *key; /* the key admitted; NULL: no client keys configured */
    const char *target; /* the request target's path (util_target_path), not NUL-terminated */
    size_t target_len;
    const char *path_profile; /* from /p/{profile}/, not NUL-terminated; NULL if absent */
    size_t path_profile_len;
    const char *body; /* the request body (NUL-terminated copy), NULL when empty */
    size_t body_len;
    uint64_t t_start;
};

/*
 * The profile for this request: /p/{name}/ in the path, else the X-Memproxy-Profile header,
 * else body_profile (may be NULL), else the default. NULL and *e set when the name is unknown.
 */
const struct cfg_profile *request_profile(const struct cfg *cfg, struct evhttp_request *req,
                                          const struct request_ctx *rc, const char *body_profile,
                                          struct apierr *e);

#endif
