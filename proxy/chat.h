/*
 * chat: POST /v1/chat/completions. Validates the request (chatreq), builds the upstream body,
 * and relays it; on the way it accumulates the reply (reply) from the stream or the body, and
 * holds back the usage-only chunk when the client did not ask for usage (memproxy always asks
 * upstream for it, to record it).
 */
#ifndef MEMPROXY_CHAT_H
#define MEMPROXY_CHAT_H

#include "routes.h"

#include <event2/http.h>

void chat_handle(struct worker *w, struct evhttp_request *req, const struct route_ctx *rc);

#endif
