#include "chat.h"

#include "chatreq.h"
#include "log.h"
#include "relay.h"
#include "reply.h"
#include "respond.h"
#include "server.h"
#include "util.h"

struct chat {
    struct chatreq creq;
    struct reply *reply;
};

/* On the forwarding path: decide cheaply, parse later (chat_after_send). */
static int chat_on_event(void *arg, const struct sse_event *ev)
{
    struct chat *c = arg;
    int usage_only = reply_is_usage_only(ev->data, ev->data_len);
    reply_queue_chunk(c->reply, ev->data, ev->data_len);
    return !(usage_only && !c->creq.include_usage);
}

static void chat_after_send(void *arg)
{
    struct chat *c = arg;
    reply_flush(c->reply);
}

static void chat_on_complete(void *arg, struct relay *r, const char *body, size_t len)
{
    struct chat *c = arg;
    reply_flush(c->reply);
    if (body != NULL && reply_set_body(c->reply, body, len) != 0)
        log_warn("upstream answered 2xx with a body that is not a JSON object");
    relay_finish(r);
}

static void chat_on_client_gone(void *arg, struct relay *r)
{
    struct chat *c = arg;
    size_t len = 0;
    (void)r;
    reply_flush(c->reply);
    reply_content(c->reply, &len);
    log_debug("client gone after %zu bytes of reply text", len);
}

static void chat_release(void *arg)
{
    struct chat *c = arg;
    chatreq_clear(&c->creq);
    reply_destroy(c->reply);
    free(c);
}

static const struct relay_hooks chat_hooks = {
    .on_event = chat_on_event,
    .on_complete = chat_on_complete,
    .on_client_gone = chat_on_client_gone,
    .release = chat_release,
    .after_send = chat_after_send,
};

void chat_handle(struct worker *w, struct evhttp_request *req, const struct route_ctx *rc)
{
    struct apierr e;
    struct chatreq_limits lim = {.max_depth = (size_t)w->cfg->max_json_depth,
                                 .max_messages = (size_t)w->cfg->max_messages};
    struct chat *c = xcalloc(1, sizeof(*c));

    if (rc->body == NULL) {
        apierr_set(&e, APIERR_INVALID_REQUEST, NULL, "the request body is empty");
        goto fail;
    }
    if (chatreq_parse(rc->body, rc->body_len, &lim, &c->creq, &e) != 0)
        goto fail;
    const struct cfg_profile *prof = routes_profile(w, req, rc, c->creq.profile, &e);
    if (prof == NULL)
        goto fail;

    struct relay_params p = {.profile = prof,
                             .path = "/chat/completions",
                             .stream = c->creq.stream,
                             .route = rc->route,
                             .t_start = rc->t_start};
    p.body = chatreq_upstream_body(&c->creq, prof->model, &p.body_len);
    c->reply = reply_create();
    relay_start(w, req, &p, &chat_hooks, c);
    return;
fail:
    chat_release(c);
    respond_error(w, rc->route, req, &e);
}
