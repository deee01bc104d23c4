/*
 * routes: the HTTP entry point of every worker. Maps method and path to a handler, checks
 * the client key, reads the body within its cap, and answers what no handler owns (404, 405,
 * 413, 503 while draining, /healthz, /metrics).
 *
 * Paths: /v1/chat/completions, /v1/models, /v1/embeddings, each also without the /v1 prefix
 * and under /p/{profile}/ to pick a profile; GET /healthz; GET /metrics.
 */
#ifndef MEMPROXY_ROUTES_H
#define MEMPROXY_ROUTES_H

#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>

struct worker;

/* evhttp's generic callback; arg is the struct worker. */
void routes_handle(struct evhttp_request *req, void *arg);

#endif
