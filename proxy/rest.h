/*
 * rest: the REST API over what memproxy recorded (DESIGN §8), for operators and business
 * servers. Every call needs an admin key (auth.admin_keys, MEMPROXY_ADMIN_KEY) and sees only
 * its tenant's sessions; no admin key configured means every call is refused.
 *
 *   GET    /v1/sessions?user_id=&status=&limit=&cursor=   list, newest first
 *   GET    /v1/sessions/{id}                              one session
 *   GET    /v1/sessions/{id}/history?limit=&format=       Agora's history shape
 *          (alias GET /v1/agents/{id}/history)
 *   PATCH  /v1/sessions/{id}                              labels, metadata, user_id
 *   POST   /v1/sessions/{id}/update                       Agora's update body: the runtime
 *          (alias POST /v1/agents/{id}/update)            system messages, from the next request
 *   POST   /v1/sessions/{id}/stop                         status STOPPED
 *          (alias POST /v1/agents/{id}/leave)
 *   DELETE /v1/sessions/{id}                              the session and its turns
 *
 * Reads go through the worker's reader; changes through the store's writer, answered once
 * committed. Errors use the one JSON error shape (apierr).
 */
#ifndef MEMPROXY_REST_H
#define MEMPROXY_REST_H

#include "routes.h"

#include <event2/http.h>
#include <stddef.h>

/* Is this (already /v1-stripped) path one of the REST API's? */
int rest_match(const char *path, size_t len);

/* Answer req; rc carries the admitted tenant and body. */
void rest_handle(struct worker *w, struct evhttp_request *req, const char *path, size_t len,
                 const struct route_ctx *rc);

#endif
