/*
 * deliveries: the webhook outbox over REST (docs/design.md §9), under an admin key of the tenant.
 *
 *   GET  /v1/webhooks/deliveries?status=&session_id=&limit=&cursor=   newest first
 *   GET  /v1/webhooks/deliveries/{noticeId}                           one delivery
 *   POST /v1/webhooks/deliveries/{noticeId}/retry                     due now, tries afresh
 *
 * A delivery is {id (its noticeId), session_id, url, event, status (pending | delivered |
 * failed), attempts, next_try_ms, last_status, last_error, created_ms, updated_ms}.
 */
#ifndef MEMPROXY_DELIVERIES_H
#define MEMPROXY_DELIVERIES_H

#include "proxy/http/request.h"
#include "proxy/rest/restpath.h"

#include <event2/http.h>
#include <stddef.h>

struct evkeyvalq;

/* path: what follows "/webhooks/deliveries". */
void deliveries_handle(struct worker *w, struct evhttp_request *req, const struct restpath *p,
                       const struct request_ctx *rc, struct evkeyvalq *q);

#endif
