#include "proxy/rest/notify.h"

#include "base/util.h"
#include "memory/memory.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/lifecycle.h"
#include "proxy/jobs/webhook.h"
#include "proxy/rest/restio.h"

#include <event2/keyvalq_struct.h>
#include <pthread.h>
#include <string.h>

/*
 * The noticeIds acted on lately, process-wide (every worker's notifications): a ring of
 * their hashes, under a lock (notifications are rare; the chat path never takes it). A
 * notice older than notifications.max_age is refused anyway, so the ring only has to cover
 * that window: NOTIFY_SEEN notices in it (more per window: the oldest are forgotten early).
 */
#define NOTIFY_SEEN 4096
static struct {
    pthread_mutex_t mu;
    uint64_t hash[NOTIFY_SEEN];
    size_t next;
} notify_seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t notify_hash(const char *notice_id)
{
    return util_hash64(0x6e6f74696365ULL, notice_id, strlen(notice_id)) | 1; /* never 0 */
}

static int notify_was_seen(const char *notice_id)
{
    uint64_t h = notify_hash(notice_id);
    int seen = 0;
    pthread_mutex_lock(&notify_seen.mu);
    for (size_t i = 0; i < NOTIFY_SEEN && !seen; i++)
        seen = notify_seen.hash[i] == h;
    pthread_mutex_unlock(&notify_seen.mu);
    return seen;
}

/* Acted on (acknowledged with 200): a repeat of it is not acted on again. */
static void notify_saw(const char *notice_id)
{
    if (notice_id == NULL)
        return;
    pthread_mutex_lock(&notify_seen.mu);
    notify_seen.hash[notify_seen.next] = notify_hash(notice_id);
    notify_seen.next = (notify_seen.next + 1) % NOTIFY_SEEN;
    pthread_mutex_unlock(&notify_seen.mu);
}

static void notify_ack(struct worker *w, struct evhttp_request *req, long event, const char *id,
                       const char *action)
{
    json_t *body = json_pack("{s:b, s:i, s:o, s:s}", "ok", 1, "event", (int)event, "session_id",
                             id ? json_string(id) : json_null(), "action", action);
    restio_json(w, req, 200, body);
}

/* scope: "<event>\x1f<noticeId>" (the noticeId may be empty) */
static void notify_answer_stop(struct worker *w, struct evhttp_request *req, int ok,
                               const char *scope, const char *id)
{
    const char *nid = strchr(scope, '\x1f') + 1;
    if (ok && *nid)
        notify_saw(nid);
    if (ok)
        notify_ack(w, req, atol(scope), id, "stopped");
    else
        restio_error(w, req, APIERR_STORAGE, NULL, "the stop could not be stored; retry");
}

/* The first session of the tenant the notice names (rr->data: the ids) into rr->got. */
static void notify_read_match(struct memory_reader *r, struct restread *rr)
{
    size_t i;
    json_t *id;
    json_array_foreach(rr->data, i, id) {
        rr->got = memory_session(r, rr->tenant, json_string_value(id));
        if (rr->got != NULL)
            break;
    }
}

/* rr->n: the event; rr->text: the noticeId (or NULL); rr->got: the session it stops. */
static void notify_act_then(struct restread *rr)
{
    struct worker *w = rr->w;
    const char *id = json_string_value(json_object_get(rr->got, "id"));
    char *scope = xasprintf("%lld\x1f%s", rr->n, rr->text ? rr->text : "");
    if (rr->got == NULL) {
        notify_saw(rr->text);
        notify_ack(w, rr->req, (long)rr->n, NULL, "ignored");
    } else {
        lifecycle_stop(w, rr->tenant, id, json_string_value(json_object_get(rr->got, "profile")), 0,
                       restio_waited, restio_wait(w, rr->req, notify_answer_stop, scope, id));
    }
    free(scope);
}

static void notify_act(struct worker *w, struct evhttp_request *req, const struct webhook_notice *n)
{
    if (n->event != 102 && n->event != 103) { /* it stops nothing: no session is read */
        notify_saw(n->notice_id);
        notify_ack(w, req, n->event, NULL, "ignored");
        return;
    }
    struct restread *rr = restio_read_new(w, req, w->cfg->agora_tenant, NULL);
    rr->n = n->event;
    rr->text = n->notice_id ? xstrdup(n->notice_id) : NULL;
    rr->data = json_array();
    for (size_t i = 0; i < n->nids; i++)
        json_array_append_new(rr->data, json_string(n->ids[i]));
    restio_read(rr, notify_read_match, notify_act_then);
}

/* Signed and read: refuse a stale one, acknowledge a repeat without acting again. */
static void notify_checked(struct worker *w, struct evhttp_request *req,
                           const struct webhook_notice *n)
{
    int64_t max = w->cfg->agora_max_age_ms, age = util_wall_ms() - n->notify_ms;
    if (max > 0 && n->notify_ms < 0)
        restio_error(w, req, APIERR_INVALID_REQUEST, "notifyMs",
                     "notifyMs is missing (notifications.max_age checks it)");
    else if (max > 0 && (age > max || age < -max))
        restio_error(w, req, APIERR_INVALID_REQUEST, "notifyMs",
                     "notifyMs is further from now than notifications.max_age: a replay?");
    else if (n->notice_id != NULL && notify_was_seen(n->notice_id))
        notify_ack(w, req, n->event, NULL, "duplicate");
    else
        notify_act(w, req, n);
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
        notify_checked(w, req, &n);
        webhook_notice_clear(&n);
    }
}
