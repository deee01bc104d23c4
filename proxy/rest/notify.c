#include "proxy/rest/notify.h"

#include "base/util.h"
#include "memory/memory.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/lifecycle.h"
#include "proxy/jobs/webhook.h"
#include "proxy/rest/restio.h"

#include <event2/keyvalq_struct.h>
#include <string.h>

static void notify_ack(struct worker *w, struct evhttp_request *req, long event, const char *id,
                       const char *action)
{
    json_t *body = json_pack("{s:b, s:i, s:o, s:s}", "ok", 1, "event", (int)event, "session_id",
                             id ? json_string(id) : json_null(), "action", action);
    restio_json(w, req, 200, body);
}

static void notify_answer_stop(struct worker *w, struct evhttp_request *req, int ok, const char *id,
                               const char *event)
{
    if (ok)
        notify_ack(w, req, atol(event), id, "stopped");
    else
        restio_error(w, req, APIERR_STORAGE, NULL, "the stop could not be stored; retry");
}

/* The first session of the tenant the notice names (new JSON), or NULL. */
static json_t *notify_match(struct worker *w, const struct webhook_notice *n)
{
    json_t *sess = NULL;
    for (size_t i = 0; i < n->nids && sess == NULL; i++)
        sess = memory_session(w->reader, w->cfg->agora_tenant, n->ids[i]);
    return sess;
}

static void notify_act(struct worker *w, struct evhttp_request *req, const struct webhook_notice *n)
{
    json_t *sess = n->event == 102 || n->event == 103 ? notify_match(w, n) : NULL;
    const char *id = json_string_value(json_object_get(sess, "id"));
    char event[24];
    snprintf(event, sizeof(event), "%ld", n->event);
    if (sess == NULL)
        notify_ack(w, req, n->event, NULL, "ignored");
    else
        lifecycle_stop(w, w->cfg->agora_tenant, id,
                       json_string_value(json_object_get(sess, "profile")), 0, restio_waited,
                       restio_wait(w, req, notify_answer_stop, id, event));
    json_decref(sess);
}

void notify_handle(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc)
{
    const char *sig =
        evhttp_find_header(evhttp_request_get_input_headers(req), "Agora-Signature-V2");
    const char *secret = w->cfg->agora_secret;
    struct webhook_notice n;
    char *why = NULL;
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        restio_method(w, req, "POST");
    } else if (*secret == '\0') {
        restio_error(w, req, APIERR_FORBIDDEN, NULL,
                     "Agora notifications are off: set notifications.agora_secret");
    } else if (!webhook_verify(secret, rc->body ? rc->body : "", rc->body_len, sig)) {
        restio_error(w, req, APIERR_BAD_SIGNATURE, "Agora-Signature-V2",
                     "Agora-Signature-V2 is missing or does not match the body");
    } else if (webhook_parse_notice(rc->body ? rc->body : "", rc->body_len,
                                    w->cfg->agora_session_field, &n, &why) != 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, NULL, why);
        free(why);
    } else {
        notify_act(w, req, &n);
        webhook_notice_clear(&n);
    }
}
