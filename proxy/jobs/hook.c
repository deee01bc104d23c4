#include "proxy/jobs/hook.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/memory.h"
#include "proxy/http/metrics.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/task.h"
#include "proxy/jobs/webhook.h"
#include "proxy/upstream/upstream.h"

#include <event2/event.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#define HOOK_MAX_INFLIGHT 32    /* transfers at once */
#define HOOK_IDLE_POLL_MS 60000 /* look at the outbox at least this often */
/* ... and with replicas, whose deliveries (a dead one's, once its lease ran out) show here
 * only when looked for: a claim that finds nothing is one indexed UPDATE a second */
#define HOOK_SHARED_POLL_MS 1000

struct hook_xfer {
    struct hook *h;
    json_int_t id;
    const struct cfg_webhook *target;
    long attempts; /* before this try */
    char *body;
    char *headers[3];
    struct upstream_xfer *x;
    long status;
    char answer[256]; /* the start of the receiver's answer, for last_error */
    size_t answer_len;
};

struct hook {
    struct worker *w;
    struct task *task; /* runs hook_poll: at the next due row, the idle poll, or a wake */
    struct hook_xfer *inflight[HOOK_MAX_INFLIGHT];
    size_t ninflight;
};

json_t *hook_targets(const struct cfg *cfg, const char *tenant)
{
    json_t *out = json_array();
    for (size_t i = 0; i < cfg->nwebhooks; i++) {
        const struct cfg_webhook *h = &cfg->webhooks[i];
        if (*h->tenant != '\0' && strcmp(h->tenant, tenant) != 0)
            continue;
        for (size_t j = 0; j < h->events.n; j++)
            json_array_append_new(
                out, json_pack("{s:s, s:i}", "url", h->url, "event", atoi(h->events.v[j])));
    }
    return out;
}

/* The entry a row was queued for: its URL and its tenant's (an entry for that tenant before
 * one for every tenant). Not the URL alone: two tenants' entries may share a receiver with
 * different secrets, and a row must be signed with the secret of the entry that queued it. */
static const struct cfg_webhook *hook_find(const struct cfg *cfg, const char *url,
                                           const char *tenant)
{
    const struct cfg_webhook *any = NULL;
    for (size_t i = 0; url != NULL && tenant != NULL && i < cfg->nwebhooks; i++) {
        const struct cfg_webhook *h = &cfg->webhooks[i];
        if (strcmp(h->url, url) != 0)
            continue;
        if (strcmp(h->tenant, tenant) == 0)
            return h;
        if (*h->tenant == '\0' && any == NULL)
            any = h;
    }
    return any;
}

static int hook_is_inflight(const struct hook *h, json_int_t id)
{
    for (size_t i = 0; i < h->ninflight; i++) {
        if (h->inflight[i]->id == id)
            return 1;
    }
    return 0;
}

static void hook_xfer_free(struct hook_xfer *t)
{
    struct hook *h = t->h;
    for (size_t i = 0; i < h->ninflight; i++) {
        if (h->inflight[i] == t) {
            h->inflight[i] = h->inflight[--h->ninflight];
            break;
        }
    }
    for (size_t i = 0; i < UTIL_ARRAY_LEN(t->headers); i++)
        free(t->headers[i]);
    free(t->body);
    free(t);
}

static void hook_poll(void *arg);

/* The outcome is committed: the row may be picked up again (when still pending). */
static void hook_settled(void *arg, int ok)
{
    struct hook_xfer *t = arg;
    struct hook *h = t->h;
    (void)ok; /* a failed write leaves the row pending: it is simply tried again */
    hook_xfer_free(t);
    worker_release(h->w);
    hook_poll(h);
}

static uint32_t hook_random(void)
{
    uint32_t r = 0;
    if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
        log_fatal("hook: the random generator failed (RAND_bytes)");
    return r;
}

/* Write the try's outcome back; the row stays ours until that is committed. */
static void hook_settle(struct hook_xfer *t, int delivered, const char *error)
{
    const struct cfg_webhook *c = t->target;
    long tries = t->attempts + 1;
    int64_t now = util_wall_ms();
    const char *status = delivered ? "delivered" : tries >= c->max_attempts ? "failed" : "pending";
    int64_t next = now + (delivered ? 0
                                    : webhook_backoff_ms(c->backoff_ms, c->max_backoff_ms, tries,
                                                         hook_random()));
    json_t *res =
        json_pack("{s:I, s:s, s:I}", "id", t->id, "status", status, "next_ms", (json_int_t)next);
    if (t->status > 0)
        json_object_set_new(res, "code", json_integer(t->status));
    if (error != NULL)
        json_object_set_new(res, "error", json_string(error));
    metrics_hook(t->h->w->metrics, delivered                       ? METRICS_HOOK_DELIVERED
                                   : strcmp(status, "failed") == 0 ? METRICS_HOOK_FAILED
                                                                   : METRICS_HOOK_RETRY);
    if (!delivered)
        log_warn("webhook %s: try %ld of %ld failed: %s%s", c->url, tries, c->max_attempts,
                 error ? error : "?", strcmp(status, "failed") == 0 ? " (giving up)" : "");
    t->x = NULL;
    worker_hold(t->h->w); /* a draining worker waits for the outcome to be written */
    memory_outbox_result(t->h->w->mem, res, t->h->w->base, hook_settled, t);
    json_decref(res);
}

static int hook_on_head(void *arg, long status, const char *ctype)
{
    struct hook_xfer *t = arg;
    (void)ctype;
    t->status = status;
    return 0;
}

static enum upstream_body_rc hook_on_body(void *arg, const char *data, size_t len)
{
    struct hook_xfer *t = arg;
    size_t room = sizeof(t->answer) - 1 - t->answer_len;
    size_t n = len < room ? len : room;
    memcpy(t->answer + t->answer_len, data, n);
    t->answer_len += n;
    t->answer[t->answer_len] = '\0';
    return UPSTREAM_BODY_OK; /* the rest is read and dropped: the connection stays reusable */
}

static void hook_on_done(void *arg, enum upstream_result res, const char *detail)
{
    struct hook_xfer *t = arg;
    char why[512];
    int ok = res == UPSTREAM_OK && t->status >= 200 && t->status < 300;
    if (res != UPSTREAM_OK)
        snprintf(why, sizeof(why), "%s", *detail ? detail : "no answer");
    else
        snprintf(why, sizeof(why), "HTTP %ld: %.200s", t->status, t->answer);
    hook_settle(t, ok, ok ? NULL : why);
}

static const struct upstream_handler hook_handler = {hook_on_head, hook_on_body, hook_on_done};

/* POST one due row (a JSON object from memory_outbox_due()). */
static void hook_send(struct hook *h, json_t *row)
{
    struct hook_xfer *t = xcalloc(1, sizeof(*t));
    const char *url = json_string_value(json_object_get(row, "url"));
    t->h = h;
    t->id = json_integer_value(json_object_get(row, "id"));
    t->attempts = (long)json_integer_value(json_object_get(row, "attempts"));
    t->target = hook_find(h->w->cfg, url, json_string_value(json_object_get(row, "tenant")));
    h->inflight[h->ninflight++] = t;
    if (t->target == NULL) { /* the config no longer lists it: nothing to sign with */
        static const struct cfg_webhook gone = {.max_attempts = 1};
        t->target = &gone;
        hook_settle(t, 0, "this webhook is no longer configured");
        return;
    }
    t->body = webhook_body(json_string_value(json_object_get(row, "notice_id")),
                           (long)json_integer_value(json_object_get(row, "event")), util_wall_ms(),
                           json_string_value(json_object_get(row, "session_id")),
                           json_string_value(json_object_get(row, "tenant")),
                           json_string_value(json_object_get(row, "payload")));
    if (t->body == NULL) {
        hook_settle(t, 0,
                    "the stored row is unreadable (its payload is not JSON or an id not text)");
        return;
    }
    struct webhook_sig sig;
    webhook_sign(t->target->secret, t->body, strlen(t->body), &sig);
    t->headers[0] = xasprintf("Agora-Signature: %s", sig.sha1);
    t->headers[1] = xasprintf("Agora-Signature-V2: %s", sig.sha256);
    struct upstream_request rq = {.url = url,
                                  .body = t->body,
                                  .body_len = strlen(t->body),
                                  .headers = (const char *const *)t->headers,
                                  .timeout_ms = t->target->timeout_ms};
    t->x = upstream_start(h->w->up, &rq, &hook_handler, t);
}

/* Start what is due (within the in-flight cap) and sleep until the next row is. */
static void hook_poll(void *arg)
{
    struct hook *h = arg;
    if (h->w->draining)
        return;
    int64_t now = util_wall_ms();
    int shared = memory_shared(h->w->mem);
    /* shared: what is read is taken (leased), so only as much as can start now; else rows
     * in flight come back too and are skipped */
    size_t room = HOOK_MAX_INFLIGHT - h->ninflight;
    json_t *due = room == 0
                      ? json_array()
                      : memory_outbox_due(h->w->reader, now, shared ? room : 2 * HOOK_MAX_INFLIGHT),
           *row;
    size_t i;
    json_array_foreach(due, i, row) {
        if (h->ninflight == HOOK_MAX_INFLIGHT)
            break;
        if (!hook_is_inflight(h, json_integer_value(json_object_get(row, "id"))))
            hook_send(h, row);
    }
    json_decref(due);
    upstream_kick(h->w->up);
    int64_t next = memory_outbox_next(h->w->reader), wait = next - util_wall_ms();
    int64_t idle = shared ? HOOK_SHARED_POLL_MS : HOOK_IDLE_POLL_MS;
    task_after(h->task, next < 0 || wait > idle ? idle : wait);
}

struct hook *hook_create(struct worker *w)
{
    struct hook *h = xcalloc(1, sizeof(*h));
    h->w = w;
    h->task = task_create(w->base, hook_poll, h); /* rows left by the last run go out now */
    return h;
}

void hook_wake(struct hook *h)
{
    if (h != NULL)
        task_wake(h->task);
}

void hook_destroy(struct hook *h)
{
    if (h == NULL)
        return;
    /* Only tries still on the wire are left: a settling one holds the worker's loop open
     * until its outcome is written. Their rows stay pending for the next start. */
    while (h->ninflight > 0) {
        struct hook_xfer *t = h->inflight[0];
        upstream_cancel(t->x);
        hook_xfer_free(t);
    }
    task_destroy(h->task);
    free(h);
}
