/*
 * rest: the REST API over what memproxy recorded (docs/design.md §8), for operators and business
 * servers. Every call needs an admin key (auth.admin_keys, MEMPROXY_ADMIN_KEY) and sees only
 * its tenant's data; no admin key configured means every call is refused. docs/openapi.yaml
 * describes every route (a test checks the server against it).
 *
 *   GET    /v1/sessions?user_id=&status=&limit=&cursor=   list, newest first
 *   GET    /v1/sessions/{id}                              one session
 *   GET    /v1/sessions/{id}/history?limit=&format=       Agora's history shape
 *          (alias GET /v1/agents/{id}/history)
 *   PATCH  /v1/sessions/{id}                              labels, metadata, user_id
 *   POST   /v1/sessions/{id}/update                       Agora's update body: the runtime
 *          (alias POST /v1/agents/{id}/update)            system messages and params
 *   POST   /v1/sessions/{id}/stop                         status STOPPED, webhook dumps
 *          (alias POST /v1/agents/{id}/leave)
 *   DELETE /v1/sessions/{id}                              the session and its turns
 *   GET    /v1/sessions/{id}/export                       a snapshot (memory/snapshot.h)
 *   POST   /v1/sessions/import                            the snapshot back, as it was
 *   /v1/users/...                                         users.h
 *   /v1/webhooks/deliveries...                            deliveries.h
 *
 * Reads go through the worker's reader; changes through the store's writer, answered once
 * committed. Errors use the one JSON error shape (apierr). The helpers the REST modules
 * share are restio.h's.
 */
#ifndef MEMPROXY_REST_H
#define MEMPROXY_REST_H

#include "proxy/http/request.h"

#include <event2/http.h>
#include <jansson.h>
#include <stddef.h>

struct evkeyvalq;

/* Is this (already /v1-stripped) path one of the REST API's? */
int rest_match(const char *path, size_t len);

/* Answer req; rc carries the admitted tenant and body. */
void rest_handle(struct worker *w, struct evhttp_request *req, const char *path, size_t len,
                 const struct request_ctx *rc);

#endif
