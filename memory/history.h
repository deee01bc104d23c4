/*
 * history: a session's stored turns in the shapes the outside world reads them — Agora's
 * "retrieve agent history" (the REST API) and Agora's notification payloads (the stop-time
 * webhook dump). Pure: JSON in, JSON out; no SQLite, no HTTP.
 *
 * A content entry is {role, content, turn_id, timestamp, metadata:{source, interrupted,
 * interrupt_timestamp, original, ...the client's own metadata}} and, when the turn has them,
 * the OpenAI message fields tool_calls, tool_call_id and name: a tool call and its result
 * read back are messages a model takes again (Agora's shape has no field for them, and a
 * history passed to a new session as its seed would otherwise be refused by the model's API).
 * "full" adds memproxy's own fields (seq, turn_idx, model, usage, finish_reason, ttft_us,
 * latency_us, importance).
 *
 * Ownership: inputs are only read; every json_t returned is new (caller decrefs).
 */
#ifndef MEMPROXY_HISTORY_H
#define MEMPROXY_HISTORY_H

#include <jansson.h>

/* Agora's notification event types memproxy sends. */
#define HISTORY_EVENT_LEFT    102 /* the agent left: the session's end, without contents */
#define HISTORY_EVENT_HISTORY 103 /* the agent's history: the whole session */

/* One stored turn (reconcile.h's shape) as a history content entry. */
json_t *history_content(json_t *turn, int full);

/* {agent_id, start_ts, status, contents} for a session (store.h's shape) and its turns. */
json_t *history_object(json_t *session, json_t *turns, int full);

/*
 * The payload of a stop-time notification: {agent_id, start_ts, stop_ts, status, labels,
 * user_id, ...} and for HISTORY_EVENT_HISTORY the full contents. Seconds for *_ts, as
 * Agora sends them.
 */
json_t *history_payload(json_t *session, json_t *turns, int event);

/* A stop-time notification's id (noticeId) for event into out: random, so that it stays
 * unique across databases, replicas and restarts; the event type after it, as in Agora's
 * ids. */
void history_notice_id(char *out, size_t len, long long event);

#endif
