/*
 * memory_changes: the memory module's writes that are not a request's recording: the REST
 * API's changes (a stop, a delete, runtime parameters, a patch, an import, a user's memory or
 * erasure) and the background jobs' outcomes (summaries, the answer cache, embeddings,
 * webhook deliveries). Each is one batch, queued as memory.c queues a request's
 * (memory_send); a change names the sessions the working set must read again once it is
 * committed. A part of the module with memory.c (memory_types.h).
 */
#include "memory/memory.h"
#include "memory/memory_types.h"

#include "base/util.h"
#include "memory/store.h"

#include <stdlib.h>

/* A report that only tells the caller (cb on base's thread; nothing when base is NULL). */
static struct memory_report *memory_report_new(struct memory *m, struct event_base *base,
                                               memory_done_cb cb, void *arg)
{
    struct memory_report *r = xcalloc(1, sizeof(*r));
    *r = (struct memory_report){.m = m, .base = base, .cb = base ? cb : NULL, .arg = arg};
    return r;
}

/* A report for a change that makes the working set read a session (id) or all of a
 * tenant's sessions (id NULL) again once committed. */
static struct memory_report *memory_change_report(struct memory *m, const char *tenant,
                                                  const char *id, struct event_base *base,
                                                  memory_done_cb cb, void *arg)
{
    struct memory_report *r = memory_report_new(m, base, cb, arg);
    if (id != NULL)
        r->key = memory_key(tenant, id);
    else
        r->tenant = xstrdup(tenant);
    return r;
}

void memory_change(struct memory *m, const char *tenant, const char *id, enum memory_change what,
                   json_t *data, struct event_base *base, memory_done_cb cb, void *arg)
{
    struct store_batch *b = store_batch_new(tenant, id);
    struct memory_report *r = memory_change_report(m, tenant, id, base, cb, arg);
    store_batch_existing(b);
    if (what == MEMORY_STOP)
        store_batch_stop(b, data);
    else if (what == MEMORY_DELETE)
        store_batch_delete(b);
    else if (what == MEMORY_RUNTIME)
        store_batch_runtime(b, data);
    else
        store_batch_patch(b, data);
    memory_send(m, b, r);
}

void memory_import(struct memory *m, const char *tenant, json_t *snapshot, struct event_base *base,
                   memory_done_cb cb, void *arg)
{
    const char *id = json_string_value(json_object_get(json_object_get(snapshot, "session"), "id"));
    struct store_batch *b = store_batch_new(tenant, NULL);
    store_batch_import(b, snapshot);
    memory_send(m, b, memory_change_report(m, tenant, id, base, cb, arg));
}

void memory_user_change(struct memory *m, const char *tenant, const char *user_id,
                        enum memory_user_change what, json_t *data, struct event_base *base,
                        memory_done_cb cb, void *arg)
{
    struct store_batch *b = store_batch_new(tenant, NULL);
    if (what == MEMORY_USER_ERASE)
        store_batch_user_erase(b, user_id);
    else
        store_batch_user_memory(b, user_id, data);
    memory_send(m, b, memory_change_report(m, tenant, NULL, base, cb, arg));
}

void memory_summary_done(struct memory *m, const char *tenant, json_t *outcome,
                         struct event_base *base, memory_done_cb cb, void *arg)
{
    struct store_batch *b = store_batch_new(tenant, NULL);
    store_batch_summary(b, outcome);
    memory_send(m, b, memory_change_report(m, tenant, NULL, base, cb, arg));
}

void memory_cache_put(struct memory *m, const char *tenant, const char *user_id, const char *key,
                      const char *content, const char *model, int64_t ttl_ms)
{
    struct store_batch *b = store_batch_new(tenant, NULL);
    json_t *e =
        json_pack("{s:s, s:s?, s:s, s:s?, s:I}", "key", key, "user_id", user_id, "content", content,
                  "model", model, "expires_ms", (json_int_t)(util_wall_ms() + ttl_ms));
    store_batch_cache_put(b, e);
    json_decref(e);
    store_submit(m->st, b, NULL, NULL, NULL);
}

void memory_embedded(struct memory *m, const struct memory_embedding *v, size_t n,
                     struct event_base *base, memory_done_cb cb, void *arg)
{
    struct store_batch *b = store_batch_new("", NULL);
    struct memory_report *r = memory_report_new(m, base, cb, arg);
    for (size_t i = 0; i < n; i++) {
        struct store_embedding e = {.sid = v[i].sid,
                                    .seq = v[i].seq,
                                    .model = v[i].model,
                                    .text = v[i].text,
                                    .vec = v[i].vec,
                                    .dim = v[i].dim,
                                    .error = v[i].error,
                                    .retry_ms = v[i].retry_ms};
        store_batch_embedding(b, &e);
    }
    memory_send(m, b, r);
}

void memory_outbox_result(struct memory *m, json_t *result, struct event_base *base,
                          memory_done_cb cb, void *arg)
{
    struct store_batch *b = store_batch_new("", NULL);
    struct memory_report *r = memory_report_new(m, base, cb, arg);
    store_batch_outbox_result(b, result);
    memory_send(m, b, r);
}

void memory_delivery_retry(struct memory *m, const char *tenant, const char *notice_id,
                           struct event_base *base, memory_done_cb cb, void *arg)
{
    struct store_batch *b = store_batch_new(tenant, NULL);
    struct memory_report *r = memory_report_new(m, base, cb, arg);
    store_batch_outbox_retry(b, notice_id);
    memory_send(m, b, r);
}
