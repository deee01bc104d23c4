/*
 * chat: POST /v1/chat/completions. Validates the request (chatreq), finds its session and
 * user (session), builds the upstream body, and relays it; on the way it accumulates the
 * reply (reply) from the stream or the body, and holds back the usage-only chunk when the
 * client did not ask for usage (memproxy always asks upstream for it, to record it).
 *
 * Recording (memory), when the request names a session:
 *  - the request's messages are reconciled and their writes queued on the loop turn after
 *    the upstream transfer started, so storage never delays it;
 *  - the reply is recorded when it is complete, and the end of the response ([DONE] or the
 *    JSON body) is sent only once its turn is committed; a failed commit ends the response
 *    with a storage error instead;
 *  - a client that hangs up mid-reply gets the text generated so far recorded as an
 *    interrupted turn (finish reason client_disconnected);
 *  - the response says which session it was recorded under in X-Memproxy-Session ("none"
 *    when unrecorded).
 *
 * The chat context outlives its relay when a commit is awaited after the client left; it is
 * freed when both are done.
 */
#ifndef MEMPROXY_CHAT_H
#define MEMPROXY_CHAT_H

#include "proxy/http/request.h"

#include <event2/http.h>

void chat_handle(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc);

#endif
