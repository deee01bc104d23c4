/*
 * rest: the REST API over what memproxy recorded (DESIGN §8), for operators and business
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
 * committed. Errors use the one JSON error shape (apierr). The helpers below are shared by
 * the REST modules (users, deliveries).
 */
#ifndef MEMPROXY_REST_H
#define MEMPROXY_REST_H

#include "proxy/http/routes.h"

#include <event2/http.h>
#include <jansson.h>
#include <stddef.h>

struct evkeyvalq;

/* Is this (already /v1-stripped) path one of the REST API's? */
int rest_match(const char *path, size_t len);

/* Answer req; rc carries the admitted tenant and body. */
void rest_handle(struct worker *w, struct evhttp_request *req, const char *path, size_t len,
                 const struct route_ctx *rc);

/* ---- for the REST modules ---- */

void rest_error(struct worker *w, struct evhttp_request *req, enum apierr_kind kind,
                const char *param, const char *msg);
/* Send body (taken) as JSON with status. */
void rest_json(struct worker *w, struct evhttp_request *req, int status, json_t *body);
/* The request body as a JSON object, or NULL with the error sent. */
json_t *rest_body(struct worker *w, struct evhttp_request *req, const struct route_ctx *rc);
/* A query parameter "limit" in [1, max]; def when absent; -1 when bad. */
long rest_limit(struct evkeyvalq *q, long def, long max);
/* A query parameter "cursor" (a previous page's next); 0 when absent, -1 when bad. */
long long rest_cursor(struct evkeyvalq *q);
/* A page's "next" as the opaque string clients pass back. */
void rest_page_cursor(json_t *page);
/* Answer 405 naming the allowed methods. */
void rest_method(struct worker *w, struct evhttp_request *req, const char *allow);
/* The URL-decoded path segment [s, s + len) when it is a valid id, else NULL. */
char *rest_id(const char *s, size_t len);

/*
 * Answering after a commit: rest_wait() holds the worker (a draining loop waits for the
 * answer) and returns the arg for a memory_done_cb, which is rest_waited; once the commit
 * is reported, answer(w, req, ok, a, b) runs and everything is released.
 */
typedef void (*rest_answer_fn)(struct worker *w, struct evhttp_request *req, int ok, const char *a,
                               const char *b);
void *rest_wait(struct worker *w, struct evhttp_request *req, rest_answer_fn answer, const char *a,
                const char *b);
void rest_waited(void *arg, int ok);

#endif
