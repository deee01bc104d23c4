/*
 * hist: a histogram of durations in microseconds, in Prometheus' cumulative buckets (upper
 * bounds HIST_BOUNDS_US, then +Inf), written by one thread and read by any.
 *
 * Why one writer: each worker owns its metrics and the storage writer its own, so a
 * relaxed load and store counts without a locked instruction; readers add the sets up
 * (hist_read) and may see a moment's difference between buckets, sum and count.
 */
#ifndef MEMPROXY_BASE_HIST_H
#define MEMPROXY_BASE_HIST_H

#include <stdatomic.h>
#include <stdint.h>

#define HIST_NBOUNDS  26
#define HIST_NBUCKETS (HIST_NBOUNDS + 1) /* the last one: +Inf */

/* Upper bounds in microseconds, 25 us to 30 s: 25 us apart up to 100 us, 50 up to 300, 100 up
 * to 500, where what memproxy adds to a request lies, so that a quantile read off them
 * (Prometheus' histogram_quantile) is close at that scale; a model's time to first token
 * falls in the coarser ones above. */
extern const uint64_t hist_bounds_us[HIST_NBOUNDS];

/* Zeroed memory is an empty histogram. */
struct hist {
    _Atomic uint64_t buckets[HIST_NBUCKETS];
    _Atomic uint64_t sum_us;
    _Atomic uint64_t count;
};

/* What a reader adds up: bucket i counts the observations of at most hist_bounds_us[i]
 * (not cumulative). */
struct hist_counts {
    uint64_t buckets[HIST_NBUCKETS];
    uint64_t sum_us;
    uint64_t count;
};

/* One writer's step of a counter: a relaxed load and store, no locked instruction (a
 * histogram's buckets, and any plain counter kept by the same rule, as /metrics' are). */
static inline void hist_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

/* The writer's: count one observation of us microseconds. */
void hist_observe(struct hist *h, uint64_t us);
/* Any thread: add h's counts to *out. */
void hist_read(const struct hist *h, struct hist_counts *out);

#endif
