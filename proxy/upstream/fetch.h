/*
 * fetch: one request to an upstream whose whole answer is wanted at once — the summarizer's
 * chat completion, the embeddings of stored turns and of a caller's question. The answer is
 * collected (capped) and handed over in one callback on the worker's thread.
 *
 * Ownership: fetch_start() keeps its own text of the request body (the caller keeps the
 * JSON); the fetch frees itself after its callback, or in fetch_cancel() (after which the
 * callback never runs).
 */
#ifndef MEMPROXY_FETCH_H
#define MEMPROXY_FETCH_H

#include "proxy/upstream/upstream.h"

#include <jansson.h>
#include <stddef.h>

struct fetch;

/*
 * The outcome, exactly once (unless cancelled): status is the HTTP status (0 when no
 * response came), body the answer (NUL-terminated; NULL without a response) and err a
 * reason when the transfer failed or the answer passed the cap ("" otherwise). The body is
 * the fetch's: valid during the call.
 */
typedef void (*fetch_cb)(void *arg, long status, const char *body, size_t len, const char *err);

/* POST body, as compact JSON, to target's path (e.g. "/embeddings"). max: the largest answer
 * taken (a longer one fails). */
struct fetch *fetch_start(struct upstream *up, const struct cfg_upstream *target, const char *path,
                          json_t *body, size_t max, fetch_cb cb, void *arg);
/* Stop a fetch whose callback has not run; f may be NULL. */
void fetch_cancel(struct fetch *f);

#endif
