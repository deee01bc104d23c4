/*
 * snapshot: the shape of an exported session, and the check an import must pass before
 * anything is written. Pure; the input is outside data (POST /v1/sessions/import), so it has
 * a fuzz target.
 *
 *   {"format": "memproxy.session.v1",
 *    "session": {id, user_id, profile, status, labels, metadata, system_messages,
 *                runtime_system, runtime_params, window_hash, created_ms, updated_ms,
 *                stopped_ms},
 *    "turns": [stored turns (reconcile.h's shape, with seq), in seq order]}
 *
 * Export then import gives back the same session: every field above and every turn field
 * round-trips. The check is strict (unknown fields, wrong types, out-of-order or repeated
 * turns are refused) so that nothing is silently dropped on the way in.
 */
#ifndef MEMPROXY_SNAPSHOT_H
#define MEMPROXY_SNAPSHOT_H

#include <jansson.h>
#include <stddef.h>

#define SNAPSHOT_FORMAT    "memproxy.session.v1"
#define SNAPSHOT_MAX_TURNS 100000

/* 0 when snap can be imported; -1 with a message naming the field in *err (caller frees). */
int snapshot_check(json_t *snap, char **err);

/*
 * What PUT /v1/users/{id}/memory sends: {"summary": text|null, "facts": [{category, key,
 * value, confidence?}]} (confidence 0..1, default 0.5; a category and key once). Returns
 * store.h's user-memory shape ({summary: {text}|null, facts}), or NULL with the reason in *err
 * (caller frees).
 */
#define SNAPSHOT_MAX_FACTS   1000
#define SNAPSHOT_MAX_SUMMARY (64 * 1024)
json_t *snapshot_user_memory(json_t *body, char **err);

#endif
