#include "proxy/http/request.h"

#include <event2/keyvalq_struct.h>
#include <string.h>

/* p, when the request's tenant may use it (profiles[].tenants); NULL and 403 otherwise. */
static const struct cfg_profile *
request_profile_allowed(const struct cfg_profile *p, const struct request_ctx *rc, struct apierr *e)
{
    for (size_t i = 0; i < p->tenants.n; i++) {
        if (strcmp(p->tenants.v[i], rc->tenant) == 0)
            return p;
    }
    if (p->tenants.n == 0)
        return p;
    apierr_set(e, APIERR_FORBIDDEN, "profile", "this key's tenant may not use the profile '%s'",
               p->name);
    return NULL;
}

const struct cfg_profile *request_profile(const struct cfg *cfg, struct evhttp_request *req,
                                          const struct request_ctx *rc, const char *body_profile,
                                          struct apierr *e)
{
    const char *name = rc->path_profile;
    size_t len = rc->path_profile_len;
    const char *param = "profile";
    if (name == NULL) {
        name = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Memproxy-Profile");
        param = "X-Memproxy-Profile";
        if (name == NULL) {
            name = body_profile;
            param = "profile";
        }
        if (name == NULL)
            return request_profile_allowed(&cfg->profiles[cfg->default_profile], rc, e);
        len = strlen(name);
    }
    const struct cfg_profile *p = cfg_profile_find(cfg, name, len);
    if (p == NULL) {
        apierr_set(e, rc->path_profile ? APIERR_NOT_FOUND : APIERR_INVALID_REQUEST, param,
                   "there is no profile named '%.*s'", (int)(len > 64 ? 64 : len), name);
        return NULL;
    }
    return request_profile_allowed(p, rc, e);
}
