/*
 * forward: GET /v1/models and POST /v1/embeddings, relayed to the profile's upstream as they
 * are (body and status), with the upstream's key instead of the client's. Nothing is
 * recorded.
 */
#ifndef MEMPROXY_FORWARD_H
#define MEMPROXY_FORWARD_H

#include "proxy/http/request.h"

#include <event2/http.h>

/* path: the upstream path ("/models" or "/embeddings"). */
void forward_handle(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc,
                    const char *path);

#endif
