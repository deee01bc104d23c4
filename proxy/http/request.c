#include "proxy/http/request.h"

#include <event2/keyvalq_struct.h>
#include <string.h>

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
            return &cfg->profiles[cfg->default_profile];
        len = strlen(name);
    }
    const struct cfg_profile *p = cfg_profile_find(cfg, name, len);
    if (p == NULL)
        apierr_set(e, rc->path_profile ? APIERR_NOT_FOUND : APIERR_INVALID_REQUEST, param,
                   "there is no profile named '%.*s'", (int)(len > 64 ? 64 : len), name);
    return p;
}
