/*
 * notify: POST /v1/notifications/agora — Agora's own notification callbacks (docs/design.md §8,
 * §9), so that a session ends when Agora's agent does.
 *
 * Not behind an admin key: Agora signs its callbacks instead. Agora-Signature-V2 must be the
 * HMAC-SHA256 of the raw body keyed with notifications.agora_secret (else 401, nothing
 * changes); with no secret configured the route answers 403. Events 102 (agent left) and 103
 * (agent history) stop the session of notifications.tenant named by payload.labels.session_id,
 * payload.name or payload.<notifications.session_field>, the first that exists; that stop
 * queues the webhook dumps like any other. Other events, and notifications naming no known
 * session, are acknowledged with 200 and change nothing, so Agora does not retry them.
 *
 * Answers: {"ok": true, "event": N, "session_id": id|null, "action": "stopped"|"ignored"}.
 */
#ifndef MEMPROXY_NOTIFY_H
#define MEMPROXY_NOTIFY_H

#include "proxy/http/request.h"

#include <event2/http.h>

#define NOTIFY_PATH "/notifications/agora"

void notify_handle(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc);

#endif
