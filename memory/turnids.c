#include "memory/turnids.h"

#include "base/msg.h"
#include "memory/reconcile.h"

#include <string.h>

static const char *turnids_str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

long turnids_last_user(json_t *messages)
{
    for (size_t i = json_array_size(messages); i-- > 0;)
        if (strcmp(turnids_str(json_array_get(messages, i), "role"), "user") == 0)
            return (long)i;
    return -1;
}

int turnids_stored(const struct turnlist *l, json_t *t, int64_t turn)
{
    size_t n;
    const struct reconcile_view *v = turnlist_views(l, &n);
    const char *role = turnids_str(t, "role"), *content = turnids_str(t, "content");
    for (size_t i = n; i-- > 0;)
        if (v[i].turn_id == turn && strcmp(v[i].role, role) == 0 &&
            strcmp(v[i].content, content) == 0)
            return 1;
    return 0;
}

void turnids_request_inserts(const struct turnlist *l, int64_t turn, json_t *inserts)
{
    size_t n = json_array_size(inserts), from = n;
    for (size_t i = n; turn >= 0 && i-- > 0;)
        if (strcmp(turnids_str(json_array_get(inserts, i), "role"), "user") == 0) {
            from = i;
            break;
        }
    for (size_t i = from; i < n; i++) {
        json_t *t = json_array_get(inserts, i);
        const char *role = turnids_str(t, "role");
        int64_t idx = turnlist_next_idx(l, turn, role);
        for (size_t j = from; j < i; j++)
            idx += strcmp(turnids_str(json_array_get(inserts, j), "role"), role) == 0;
        json_object_set_new(t, "turn_id", json_integer(turn));
        json_object_set_new(t, "turn_idx", json_integer(idx));
    }
}

int64_t turnids_resent(const struct turnlist *l, json_t *messages, int64_t turn)
{
    long i = turnids_last_user(messages);
    if (i < 0)
        return -1;
    json_t *m = json_array_get(messages, (size_t)i);
    int64_t own = msg_turn_id(json_object_get(m, "turn_id"));
    if (own >= 0)
        turn = own;
    if (turn < 0) /* no number: nothing to compare (and no message read into a turn) */
        return -1;
    json_t *t = reconcile_normalize(m, 0);
    int again = t != NULL && turnids_stored(l, t, turn);
    json_decref(t);
    return again ? turn : -1;
}

int64_t turnids_before(const struct turnlist *l, int64_t turn)
{
    for (size_t i = turnlist_size(l); i-- > 0;)
        if (turnlist_turn_id(l, i) < turn)
            return turnlist_turn_id(l, i);
    return -1;
}

long turnids_reply(const struct turnlist *l, int64_t turn)
{
    for (size_t i = turnlist_size(l); turn >= 0 && i-- > 0;)
        if (turnlist_turn_id(l, i) == turn && turnlist_role_is(l, i, "assistant"))
            return (long)i;
    return -1;
}

int turnids_by_one(const struct turnlist *l)
{
    int64_t newer = -1;
    for (size_t i = turnlist_size(l); i-- > 0;) {
        if (!turnlist_role_is(l, i, "user"))
            continue;
        int64_t t = turnlist_turn_id(l, i);
        if (newer < 0)
            newer = t;
        else if (t != newer)
            return newer - t == 1;
    }
    return 1;
}
