/*
 * lookup: the question's embedding for one chat request's retrieval (docs/design.md §10), within
 * the profile's time budget (retrieval_timeout).
 *
 * lookup_start() starts the request for the embedding (the profile's primary upstream,
 * POST /embeddings, through the worker's curl multi handle: on the wire at the caller's
 * upstream_kick() or the next loop turn) and arms a timer. The callback runs exactly once, on
 * the worker's thread and never inside lookup_start(): with
 * the embedding when it came in time, else with NULL (the budget passed, the upstream failed
 * or answered something else) — the request then goes on without the relevance leg; a late
 * answer is dropped with its transfer. Outcomes are counted in memproxy_recall_lookups_total
 * and the wait in memproxy_recall_wait_seconds.
 *
 * Ownership: the callback takes the embedding (free()). The lookup frees itself after the
 * callback, or in lookup_cancel().
 */
#ifndef MEMPROXY_LOOKUP_H
#define MEMPROXY_LOOKUP_H

#include <stddef.h>

struct cfg_profile;
struct lookup;
struct worker;

typedef void (*lookup_cb)(void *arg, float *query, size_t dim);

struct lookup *lookup_start(struct worker *w, const struct cfg_profile *p, const char *question,
                            lookup_cb cb, void *arg);
/* Stop a lookup whose callback has not run; l may be NULL. */
void lookup_cancel(struct lookup *l);

#endif
