#include "base/hist.h"

#include <stddef.h>

const uint64_t hist_bounds_us[HIST_NBOUNDS] = {
    25,     50,     75,     100,     150,     200,     250,      300,     400,
    500,    750,    1000,   1500,    2500,    5000,    10000,    25000,   50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 30000000};

void hist_observe(struct hist *h, uint64_t us)
{
    size_t i = 0;
    while (i < HIST_NBOUNDS && us > hist_bounds_us[i])
        i++;
    hist_add(&h->buckets[i], 1);
    hist_add(&h->sum_us, us);
    hist_add(&h->count, 1);
}

void hist_read(const struct hist *h, struct hist_counts *out)
{
    for (size_t i = 0; i < HIST_NBUCKETS; i++)
        out->buckets[i] += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
    out->sum_us += atomic_load_explicit(&h->sum_us, memory_order_relaxed);
    out->count += atomic_load_explicit(&h->count, memory_order_relaxed);
}
