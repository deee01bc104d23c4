#include "memory/entry.h"

#include "base/util.h"
#include "memory/inject.h"
#include "memory/turnlist.h"

#include <stdlib.h>
#include <string.h>

static int64_t entry_int(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static const char *entry_str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static void entry_set_owned(char **field, const char *v)
{
    free(*field);
    *field = v ? xstrdup(v) : NULL;
}

/* A client's system messages [{role, content}] (NULL: none), hashed so that an unchanged
 * list is not written again: their roles and texts in order. */
uint64_t entry_system_hash(json_t *system)
{
    size_t i;
    json_t *x;
    uint64_t h = system != NULL;
    json_array_foreach(system, i, x) {
        const char *role = entry_str(x, "role");
        json_t *content = json_object_get(x, "content");
        h = util_hash64(h, role, strlen(role) + 1);
        if (json_is_string(content))
            h = util_hash64(h, json_string_value(content), json_string_length(content));
    }
    return h;
}

/* What the user_context transform shows of the session: its labels, then its metadata's
 * other keys (both set over REST); NULL when both are empty. */
static json_t *entry_user_info(json_t *sess)
{
    json_t *labels = json_object_get(sess, "labels"), *meta = json_object_get(sess, "metadata");
    if (json_object_size(labels) + json_object_size(meta) == 0)
        return NULL;
    json_t *out = json_is_object(labels) ? json_copy(labels) : json_object();
    if (json_is_object(meta))
        json_object_update_missing(out, meta);
    return out;
}

/* The row's fields the requests use (sess NULL: the session is not there yet). */
static void entry_fill_row(struct workset_entry *e, json_t *sess)
{
    e->window_hash = (uint64_t)json_integer_value(json_object_get(sess, "window_hash"));
    e->system_hash = entry_system_hash(json_object_get(sess, "system_messages"));
    json_decref(e->system);
    e->system = json_is_array(json_object_get(sess, "system_messages"))
                    ? json_incref(json_object_get(sess, "system_messages"))
                    : NULL;
    e->exists = sess != NULL;
    entry_set_owned(&e->user, json_string_value(json_object_get(sess, "user_id")));
    entry_set_owned(&e->profile, json_string_value(json_object_get(sess, "profile")));
    json_t *call = json_object_get(sess, "call_summary");
    free(e->call_summary);
    e->call_summary =
        json_is_object(call) ? xstrdup(json_string_value(json_object_get(call, "text"))) : NULL;
    e->call_through = e->call_summary ? entry_int(call, "through_seq") : 0;
    e->window_turns = entry_int(sess, "window_turns");
    json_t *params = json_object_get(sess, "runtime_params");
    json_decref(e->params);
    e->params = json_object_size(params) > 0 ? json_incref(params) : NULL;
    json_decref(e->user_info);
    e->user_info = entry_user_info(sess);
}

void entry_fill(struct workset_entry *e, struct workset *ws, const struct store_loaded *l,
                size_t session_turns)
{
    size_t n = json_array_size(l->turns);
    int64_t last = n ? entry_int(json_array_get(l->turns, n - 1), "seq") : 0;
    workset_set_version(ws, e, l->version > 0 ? l->version : 0);
    e->complete = n < session_turns;
    turnlist_set(e->turns, l->turns, !e->complete);
    if (last > e->last_seq) /* never reuse a number a batch in flight may hold */
        e->last_seq = last;
    entry_fill_row(e, l->session);
    json_decref(e->inject);
    e->inject = inject_from(json_object_get(l->session, "runtime_system"), l->memory);
    e->gen++;
    e->loaded = 1;
}

void entry_read(struct workset_entry *e, struct store *st, struct workset *ws,
                struct store_reader *sr, const char *tenant, const char *sid, const char *user,
                size_t session_turns, size_t max_facts)
{
    struct store_loaded l = {0};
    if (store_shared(st))
        l.version = store_session_version(sr, tenant, sid);
    l.session = store_session_get(sr, tenant, sid);
    l.turns = store_turns(sr, tenant, sid, INT64_MIN, session_turns);
    const char *u = user ? user : json_string_value(json_object_get(l.session, "user_id"));
    l.memory = u ? store_user_memory(sr, tenant, u, max_facts) : NULL;
    entry_fill(e, ws, &l, session_turns);
    json_decref(l.session);
    json_decref(l.turns);
    json_decref(l.memory);
}
