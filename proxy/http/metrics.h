/*
 * metrics: Prometheus counters and histograms, one set per worker thread.
 *
 * Each worker writes only its own set (relaxed atomic stores, no lock, no shared cache line),
 * and a scrape sums all sets. Histograms use fixed buckets in seconds, from 25 us to 30 s, so
 * that both the proxy's own microseconds and an upstream's seconds are visible.
 *
 * Exposed at GET /metrics:
 *   memproxy_requests_total{route,status}          counter
 *   memproxy_upstream_ttft_seconds                  histogram (upstream start -> first token)
 *   memproxy_added_latency_seconds                  histogram (time memproxy itself spends)
 *   memproxy_commit_wait_seconds                    histogram (a recorded response's end
 *                                                   waiting for its turn's commit)
 *   memproxy_session_check_wait_seconds             histogram (replicas: a recorded response's
 *                                                   end waiting for its session's version
 *                                                   check; 0 when the check came first)
 *   memproxy_active_streams                         gauge
 *   memproxy_upstream_failures_total{kind}          counter
 *   memproxy_upstream_fallbacks_total               counter
 *   memproxy_fallback_replies_total                 counter (profiles[].fallback_reply sent)
 *   memproxy_cache_lookups_total{result}            counter (hit, miss)
 *   memproxy_summaries_total{result}                counter (stored, failed)
 *   memproxy_client_disconnects_total               counter
 *   memproxy_webhook_tries_total{result}            counter (delivered, retry, failed)
 *   memproxy_recall_lookups_total{result}           counter (ready, late, failed)
 *   memproxy_recall_wait_seconds                    histogram (a request's wait for its lookup)
 *   memproxy_storage_read_wait_seconds              histogram (a read in the read pool, its
 *                                                   queue included: storage.pool's sizing)
 *   memproxy_embeddings_total{result}               counter (stored, retry, failed)
 */
#ifndef MEMPROXY_METRICS_H
#define MEMPROXY_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metrics_route {
    METRICS_ROUTE_CHAT,
    METRICS_ROUTE_MODELS,
    METRICS_ROUTE_EMBEDDINGS,
    METRICS_ROUTE_HEALTH,
    METRICS_ROUTE_METRICS,
    METRICS_ROUTE_REST,
    METRICS_ROUTE_OTHER,
    METRICS_ROUTE__COUNT
};

enum metrics_hook {
    METRICS_HOOK_DELIVERED, /* a 2xx */
    METRICS_HOOK_RETRY,     /* a failed try, another to come */
    METRICS_HOOK_FAILED,    /* the last try failed: kept as failed */
    METRICS_HOOK__COUNT
};

enum metrics_recall {
    METRICS_RECALL_READY,  /* the question's embedding came within the time budget */
    METRICS_RECALL_LATE,   /* the budget passed: no relevance leg */
    METRICS_RECALL_FAILED, /* the upstream failed or answered something else */
    METRICS_RECALL__COUNT
};

enum metrics_embed {
    METRICS_EMBED_STORED, /* a turn's embedding stored */
    METRICS_EMBED_RETRY,  /* the upstream failed: tried again later */
    METRICS_EMBED_FAILED, /* none will be made (kept with its reason) */
    METRICS_EMBED__COUNT
};

enum metrics_failure {
    METRICS_FAIL_UNREACHABLE,
    METRICS_FAIL_TIMEOUT,
    METRICS_FAIL_BROKEN,
    METRICS_FAIL_STATUS, /* upstream answered 4xx/5xx */
    METRICS_FAIL__COUNT
};

struct metrics;
struct memory_stats;

struct metrics *metrics_create(void);
void metrics_destroy(struct metrics *m);

void metrics_request(struct metrics *m, enum metrics_route route, int status);
void metrics_ttft(struct metrics *m, uint64_t us);
void metrics_added_latency(struct metrics *m, uint64_t us);
void metrics_stream_delta(struct metrics *m, int delta);
void metrics_upstream_failure(struct metrics *m, enum metrics_failure kind);
void metrics_fallback(struct metrics *m);
void metrics_fallback_reply(struct metrics *m);
void metrics_cache(struct metrics *m, int hit);
void metrics_summary(struct metrics *m, int stored);
void metrics_client_disconnect(struct metrics *m);
void metrics_hook(struct metrics *m, enum metrics_hook outcome);
void metrics_recall(struct metrics *m, enum metrics_recall outcome, uint64_t waited_us);
/* A recorded response's end waited waited_us for its turn's commit (the durability promise:
 * the writer's queue, the transaction, the report back). */
void metrics_commit_wait(struct metrics *m, uint64_t waited_us);
/* Replicas: a window client's reply was whole waited_us before its session's version check
 * was back (0: the check came first). The check runs while the upstream answers; what it
 * adds to a response's end comes before the commit's wait. */
void metrics_check_wait(struct metrics *m, uint64_t waited_us);
void metrics_read_wait(struct metrics *m, uint64_t waited_us);
void metrics_embed(struct metrics *m, enum metrics_embed outcome, uint64_t n);
/* The worker's parse memo (jmemo) now: its lookups so far and the bytes it holds. Set, not
 * added: the memo counts, the worker copies its figures after each chat request. */
void metrics_memo(struct metrics *m, uint64_t hits, uint64_t misses, uint64_t bytes);

/* The Prometheus text for the sum of sets[0..n) and the memory's counters; caller frees. */
char *metrics_render(struct metrics *const *sets, size_t n, const struct memory_stats *mem,
                     size_t *len);

#endif
