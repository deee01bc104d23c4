#include "proxy/chat/forward.h"

#include "base/jtext.h"
#include "base/util.h"
#include "proxy/chat/relay.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"

#include <jansson.h>

static void forward_on_complete(void *arg, struct relay *r, const char *body, size_t len)
{
    (void)arg;
    (void)body;
    (void)len;
    relay_finish(r);
}

static const struct relay_hooks forward_hooks = {.on_complete = forward_on_complete};

/* The body must be a JSON object: the upstream would refuse anything else less clearly. */
static int forward_check_body(const struct worker *w, const struct request_ctx *rc,
                              struct apierr *e)
{
    if (rc->body == NULL) {
        apierr_set(e, APIERR_INVALID_REQUEST, NULL, "the request body is empty");
        return -1;
    }
    if (jtext_too_deep(rc->body, rc->body_len, (size_t)w->cfg->max_json_depth)) {
        apierr_set(e, APIERR_INVALID_JSON, NULL, "the body is nested too deeply");
        return -1;
    }
    json_t *root = jtext_load(rc->body, rc->body_len, 0, NULL);
    int ok = json_is_object(root);
    json_decref(root);
    if (!ok)
        apierr_set(e, APIERR_INVALID_JSON, NULL, "the body must be a JSON object");
    return ok ? 0 : -1;
}

void forward_handle(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc,
                    const char *path)
{
    struct apierr e;
    int post = evhttp_request_get_command(req) == EVHTTP_REQ_POST;
    const struct cfg_profile *prof = request_profile(w->cfg, req, rc, NULL, &e);
    if (prof == NULL || (post && forward_check_body(w, rc, &e) != 0)) {
        respond_error(w, rc->route, req, &e);
        return;
    }
    struct relay_params p = {
        .profile = prof, .path = path, .route = rc->route, .t_start = rc->t_start};
    if (post) {
        p.body = xstrndup(rc->body, rc->body_len);
        p.body_len = rc->body_len;
    }
    relay_start(w, req, &p, &forward_hooks, NULL);
}
