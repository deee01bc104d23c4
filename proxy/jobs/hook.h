/*
 * hook: delivers the stop-time webhook dumps queued in the store's outbox (docs/design.md §9).
 *
 * One hook runs on the jobs loop (a worker that serves no requests, server.c): its timer reads the
 * due rows through that worker's reader and POSTs each through the worker's upstream client
 * (libcurl multi on the worker's event base, so nothing blocks). A 2xx within the webhook's timeout
 * marks the row delivered; anything else schedules the next try with exponential backoff and jitter
 * (webhook.h), until max_attempts, when the row is kept as failed — visible and retryable
 * over REST. Every outcome is written back through the store's writer before the row can be
 * picked up again, and rows left pending by a crash are sent again after a restart: delivery
 * is at least once, with the same noticeId on every try.
 *
 * hook_wake() may be called from any thread (a stop was committed, a retry asked for).
 *
 * Ownership: hook_create() on the worker's thread before its loop runs; hook_destroy() after
 * the loop has ended (transfers still in flight are dropped: their rows stay pending and go
 * out again after the next start).
 */
#ifndef MEMPROXY_HOOK_H
#define MEMPROXY_HOOK_H

#include <jansson.h>

struct hook;
struct worker;
struct cfg;

struct hook *hook_create(struct worker *w);
void hook_destroy(struct hook *h);

/* Look at the outbox now. Thread-safe; h may be NULL (no webhooks configured). */
void hook_wake(struct hook *h);

/* The dumps a stop of a tenant's session queues: [{url, event}] for every configured
 * webhook that takes this tenant, one per event type. New JSON (an empty array for none). */
json_t *hook_targets(const struct cfg *cfg, const char *tenant);

#endif
