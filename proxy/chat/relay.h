/*
 * relay: one client request relayed to an upstream — the request context that owns the
 * evhttp request, the upstream transfer, the SSE parser and the buffers, and frees them all
 * in relay_destroy().
 *
 * What it does:
 *  - tries the profile's upstreams in order; a failure before the first byte reaches the
 *    client (unreachable, timeout, 429/5xx) moves on to the next one;
 *  - streams SSE responses event by event as they arrive: each event's raw bytes are
 *    forwarded unless the hook holds it back; upstream's "data: [DONE]" is always held and
 *    re-sent by relay_finish(), so the end of a stream can wait for the turn to be stored;
 *  - buffers other responses (capped) and hands 2xx bodies to the hook;
 *  - watches the client socket for a hang-up while the request is handled (evhttp does not
 *    read it then) and cancels the upstream transfer at once;
 *  - pauses the upstream transfer while a slow client has more than server.max_client_buffer
 *    bytes unsent, and resumes it when they drain;
 *  - maps every failure to a response: 502/504 JSON before the response started, an SSE
 *    error event and a clean end after.
 *
 * The hooks let the chat layer see the stream and decide when it ends; arg belongs to the
 * hook and is released through hooks->release when the relay is destroyed.
 */
#ifndef MEMPROXY_RELAY_H
#define MEMPROXY_RELAY_H

#include "config/cfg.h"
#include "proxy/chat/sse.h"
#include "proxy/http/apierr.h"
#include "proxy/http/metrics.h"

#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>

struct relay;
struct worker;

struct relay_hooks {
    /* Streamed responses: one upstream event with data (not [DONE]). 1 forwards it, 0 drops it. */
    int (*on_event)(void *arg, const struct sse_event *ev);
    /*
     * The upstream finished with a 2xx. body/len hold a buffered response (NULL/0 for a
     * stream, whose events were written to the client as they came, so its last tokens never
     * wait for the turn's bookkeeping). The hook must call relay_finish(r), now or later.
     */
    void (*on_complete)(void *arg, struct relay *r, const char *body, size_t len);
    /* The client hung up before the end; r is destroyed right after. May be NULL. */
    void (*on_client_gone)(void *arg, struct relay *r);
    /* Every upstream failed before anything went to the client, and the profile has a
     * fallback_reply: answer req in the relay's place (req is the hook's now; the relay ends
     * right after). May be NULL: the error goes out. */
    void (*fallback)(void *arg, struct evhttp_request *req);
    /* The relay is being destroyed (r is still readable): free arg. why says how a reply that
     * did not complete ended, as a stored finish_reason: "upstream_error", "upstream_timeout"
     * (idle or first byte), "shutdown" (memproxy stopping), "llm_failure" (a fallback_reply);
     * NULL when it completed (or the client left). May be NULL. */
    void (*release)(void *arg, struct relay *r, const char *why);
    /*
     * Streams: called after events were handed to the client and written (as far as the
     * socket took them): the place for work on them that must not delay them. May be NULL.
     */
    void (*after_send)(void *arg);
};

struct relay_params {
    const struct cfg_profile *profile;
    const char *path; /* upstream path, e.g. "/chat/completions" */
    char *body;       /* taken over by the relay (freed with it); NULL for GET */
    size_t body_len;
    int stream; /* the client asked for a stream */
    enum metrics_route route;
    uint64_t t_start; /* util_now_us() when the request reached memproxy */
};

/* Start relaying req. From here the relay owns req; it always answers it. */
void relay_start(struct worker *w, struct evhttp_request *req, const struct relay_params *p,
                 const struct relay_hooks *hooks, void *arg);

/* End a completed relay: the held [DONE] and the chunk end, or the buffered body. Frees r. */
void relay_finish(struct relay *r);

/* End a completed relay with an error instead (an SSE error event and the chunk end, or the
 * error response). Frees r. */
void relay_error(struct relay *r, const struct apierr *e);

/* Microseconds from the request's arrival to the first token sent (-1 if none) and to the
 * end of the upstream transfer (or now, while it runs). */
void relay_times(const struct relay *r, int64_t *ttft_us, int64_t *total_us);
/* For the access line: the status the client got (499 when it left before any), the body
 * bytes it was handed, the name of the upstream tried last. */
int relay_final_status(const struct relay *r);
long long relay_sent(const struct relay *r);
const char *relay_upstream(const struct relay *r);

/* Worker shutdown: end every relay of w now (streams get an error event). */
void relay_abort_all(struct worker *w);

#endif
