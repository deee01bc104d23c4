/*
 * memory_reads: the memory module's reads that only pass a reader's question to the store
 * (memory.h: the REST API's view, the jobs' queues, the cache and retrieval). A part of the
 * module with memory.c, memory_changes.c and prepare.c (memory_types.h), kept apart so
 * memory.c holds what the module itself decides: recording, the working set and its writes.
 */
#include "memory/memory.h"
#include "memory/memory_types.h"

#include "base/util.h"
#include "memory/snapshot.h"
#include "memory/store.h"

/* Facts the REST API shows for a user. */
#define MEMORY_MAX_USER_FACTS 1000

json_t *memory_session(struct memory_reader *r, const char *tenant, const char *id)
{
    return store_session_get(r->sr, tenant, id);
}

json_t *memory_turns(struct memory_reader *r, const char *tenant, const char *id, size_t limit)
{
    return store_turns(r->sr, tenant, id, INT64_MIN, limit);
}

json_t *memory_sessions(struct memory_reader *r, const char *tenant, const char *user_id,
                        const char *status, int64_t before, size_t limit)
{
    return store_sessions(r->sr, tenant, user_id, status, before, limit);
}

json_t *memory_export(struct memory_reader *r, const char *tenant, const char *id)
{
    json_t *sess = store_session_get(r->sr, tenant, id);
    if (sess == NULL)
        return NULL;
    json_object_del(sess, "tenant");
    json_object_del(sess, "turns");
    json_object_del(sess, "call_summary"); /* made again from the turns (callsum.h) */
    json_object_del(sess, "window_turns");
    return json_pack("{s:s, s:o, s:o}", "format", SNAPSHOT_FORMAT, "session", sess, "turns",
                     store_turns(r->sr, tenant, id, INT64_MIN, 0));
}

json_t *memory_user(struct memory_reader *r, const char *tenant, const char *user_id)
{
    json_t *um = store_user_memory(r->sr, tenant, user_id, MEMORY_MAX_USER_FACTS);
    json_object_set_new(um, "user_id", json_string(user_id));
    return um;
}

json_t *memory_user_known(struct memory_reader *r, const char *tenant, const char *user_id,
                          size_t max_facts)
{
    return store_user_memory(r->sr, tenant, user_id, max_facts);
}

int64_t memory_summary_next(struct memory_reader *r)
{
    return store_summary_next(r->sr);
}

json_t *memory_to_summarize(struct memory_reader *r, size_t limit)
{
    return store_to_summarize(r->sr, util_wall_ms(), limit);
}

json_t *memory_running_to_summarize(struct memory_reader *r, const char *profile, long threshold,
                                    size_t limit)
{
    return store_running_to_summarize(r->sr, profile, threshold, limit);
}

json_t *memory_cache_get(struct memory_reader *r, const char *key)
{
    return store_cache_get(r->sr, key, util_wall_ms());
}

int memory_recall_embedded(struct memory_reader *r, const char *tenant, const char *user_id,
                           const char *session_id)
{
    return store_recall_embedded(r->sr, tenant, user_id, session_id);
}

void memory_recall(struct memory_reader *r, const char *tenant, const char *user_id,
                   const char *session_id, size_t limit, struct recall_pick *p)
{
    store_recall(r->sr, tenant, user_id, session_id, limit, p);
}

json_t *memory_to_embed(struct memory_reader *r, int64_t now_ms, size_t limit)
{
    return store_to_embed(r->sr, now_ms, limit);
}

int64_t memory_embed_next(struct memory_reader *r)
{
    return store_embed_next(r->sr);
}

json_t *memory_idle_sessions(struct memory_reader *r, int64_t before_ms, size_t limit)
{
    return store_idle_sessions(r->sr, before_ms, limit);
}

json_t *memory_outbox_due(struct memory_reader *r, int64_t now_ms, size_t limit)
{
    return store_outbox_due(r->sr, now_ms, limit);
}

int64_t memory_outbox_next(struct memory_reader *r)
{
    return store_outbox_next(r->sr);
}

json_t *memory_deliveries(struct memory_reader *r, const char *tenant, const char *status,
                          const char *session_id, const char *notice_id, int64_t before,
                          size_t limit)
{
    struct store_delivery_query q = {.tenant = tenant,
                                     .status = status,
                                     .session_id = session_id,
                                     .notice_id = notice_id,
                                     .before = before,
                                     .limit = limit};
    return store_deliveries(r->sr, &q);
}
