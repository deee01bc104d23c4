#include "proxy/http/metrics.h"

#include "base/hist.h"
#include "base/util.h"
#include "memory/memory.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* Status codes 100 to 599 counted by exact value (a slot each: 500 counters a route, written
 * only when used); anything outside lands in "other". */
#define METRICS_STATUS_MIN 100
#define METRICS_STATUS_MAX 599
#define METRICS_NSTATUS    (METRICS_STATUS_MAX - METRICS_STATUS_MIN + 2)

static const char *const metrics_route_names[] = {"chat",    "models", "embeddings", "health",
                                                  "metrics", "rest",   "other"};
static const char *const metrics_failure_names[] = {"unreachable", "timeout", "broken", "status"};

struct metrics {
    _Atomic uint64_t requests[METRICS_ROUTE__COUNT][METRICS_NSTATUS];
    struct hist ttft, added, commit_wait, check_wait;
    _Atomic int64_t active_streams;
    _Atomic uint64_t failures[METRICS_FAIL__COUNT];
    _Atomic uint64_t fallbacks;
    _Atomic uint64_t fallback_replies;
    _Atomic uint64_t cache[2];     /* hit, miss */
    _Atomic uint64_t summaries[2]; /* stored, failed */
    _Atomic uint64_t disconnects;
    _Atomic uint64_t hooks[METRICS_HOOK__COUNT];
    _Atomic uint64_t recalls[METRICS_RECALL__COUNT];
    struct hist recall_wait;
    struct hist read_wait; /* reads handed to the read pool (worker_read) */
    _Atomic uint64_t embeds[METRICS_EMBED__COUNT];
    _Atomic uint64_t memo_hits, memo_misses, memo_bytes;
};

/* Single writer per set: counted with hist_add (base/hist.h), no locked instruction. */
static inline uint64_t metrics_get(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

struct metrics *metrics_create(void)
{
    return xcalloc(1, sizeof(struct metrics));
}

void metrics_destroy(struct metrics *m)
{
    free(m);
}

void metrics_request(struct metrics *m, enum metrics_route route, int status)
{
    size_t i = status >= METRICS_STATUS_MIN && status <= METRICS_STATUS_MAX
                   ? (size_t)(status - METRICS_STATUS_MIN)
                   : METRICS_NSTATUS - 1;
    hist_add(&m->requests[route][i], 1);
}

void metrics_ttft(struct metrics *m, uint64_t us)
{
    hist_observe(&m->ttft, us);
}

void metrics_added_latency(struct metrics *m, uint64_t us)
{
    hist_observe(&m->added, us);
}

void metrics_stream_delta(struct metrics *m, int delta)
{
    int64_t v = atomic_load_explicit(&m->active_streams, memory_order_relaxed);
    atomic_store_explicit(&m->active_streams, v + delta, memory_order_relaxed);
}

void metrics_upstream_failure(struct metrics *m, enum metrics_failure kind)
{
    hist_add(&m->failures[kind], 1);
}

void metrics_fallback(struct metrics *m)
{
    hist_add(&m->fallbacks, 1);
}

void metrics_fallback_reply(struct metrics *m)
{
    hist_add(&m->fallback_replies, 1);
}

void metrics_cache(struct metrics *m, int hit)
{
    hist_add(&m->cache[hit ? 0 : 1], 1);
}

void metrics_summary(struct metrics *m, int stored)
{
    hist_add(&m->summaries[stored ? 0 : 1], 1);
}

void metrics_memo(struct metrics *m, uint64_t hits, uint64_t misses, uint64_t bytes)
{
    atomic_store_explicit(&m->memo_hits, hits, memory_order_relaxed);
    atomic_store_explicit(&m->memo_misses, misses, memory_order_relaxed);
    atomic_store_explicit(&m->memo_bytes, bytes, memory_order_relaxed);
}

void metrics_client_disconnect(struct metrics *m)
{
    hist_add(&m->disconnects, 1);
}

void metrics_hook(struct metrics *m, enum metrics_hook outcome)
{
    hist_add(&m->hooks[outcome], 1);
}

void metrics_recall(struct metrics *m, enum metrics_recall outcome, uint64_t waited_us)
{
    hist_add(&m->recalls[outcome], 1);
    hist_observe(&m->recall_wait, waited_us);
}

void metrics_commit_wait(struct metrics *m, uint64_t waited_us)
{
    hist_observe(&m->commit_wait, waited_us);
}

void metrics_check_wait(struct metrics *m, uint64_t waited_us)
{
    hist_observe(&m->check_wait, waited_us);
}

void metrics_read_wait(struct metrics *m, uint64_t waited_us)
{
    hist_observe(&m->read_wait, waited_us);
}

void metrics_embed(struct metrics *m, enum metrics_embed outcome, uint64_t n)
{
    hist_add(&m->embeds[outcome], n);
}

/* ---- rendering ---- */

struct metrics_out {
    char *buf;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void metrics_printf(struct metrics_out *o,
                                                                 const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        o->cap = o->cap * 2 + (size_t)(n > 0 ? n : 64);
        o->buf = xrealloc(o->buf, o->cap);
    }
}

static void metrics_render_requests(struct metrics_out *o, struct metrics *const *sets, size_t n)
{
    metrics_printf(o, "# HELP memproxy_requests_total Requests answered, by route and status.\n"
                      "# TYPE memproxy_requests_total counter\n");
    for (size_t r = 0; r < METRICS_ROUTE__COUNT; r++) {
        for (size_t s = 0; s < METRICS_NSTATUS; s++) {
            uint64_t v = 0;
            for (size_t k = 0; k < n; k++)
                v += metrics_get(&sets[k]->requests[r][s]);
            if (v == 0)
                continue;
            char status[8] = "other";
            if (s < METRICS_NSTATUS - 1)
                snprintf(status, sizeof(status), "%d", (int)s + METRICS_STATUS_MIN);
            metrics_printf(o, "memproxy_requests_total{route=\"%s\",status=\"%s\"} %llu\n",
                           metrics_route_names[r], status, (unsigned long long)v);
        }
    }
}

static void metrics_print_hist(struct metrics_out *o, const struct hist_counts *c, const char *name,
                               const char *help)
{
    uint64_t cum = 0;
    metrics_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t b = 0; b < HIST_NBUCKETS; b++) {
        cum += c->buckets[b];
        if (b < HIST_NBOUNDS)
            metrics_printf(o, "%s_bucket{le=\"%g\"} %llu\n", name, (double)hist_bounds_us[b] / 1e6,
                           (unsigned long long)cum);
        else
            metrics_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    }
    metrics_printf(o, "%s_sum %.6f\n%s_count %llu\n", name, (double)c->sum_us / 1e6, name,
                   (unsigned long long)c->count);
}

/* The histogram at offset in every worker's set, added up. */
static void metrics_render_hist(struct metrics_out *o, struct metrics *const *sets, size_t n,
                                size_t offset, const char *name, const char *help)
{
    struct hist_counts c = {0};
    for (size_t k = 0; k < n; k++)
        hist_read((const struct hist *)((const char *)sets[k] + offset), &c);
    metrics_print_hist(o, &c, name, help);
}

static uint64_t metrics_sum(struct metrics *const *sets, size_t n, size_t offset)
{
    uint64_t v = 0;
    for (size_t k = 0; k < n; k++)
        v += metrics_get((_Atomic uint64_t *)((char *)sets[k] + offset));
    return v;
}

/* A counter family: one series per label value, from the array of counters at offset. */
static void metrics_render_family(struct metrics_out *o, struct metrics *const *sets, size_t n,
                                  size_t offset, const char *name, const char *help,
                                  const char *label, const char *const *values, size_t count)
{
    metrics_printf(o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (size_t i = 0; i < count; i++)
        metrics_printf(
            o, "%s{%s=\"%s\"} %llu\n", name, label, values[i],
            (unsigned long long)metrics_sum(sets, n, offset + i * sizeof(_Atomic uint64_t)));
}

static void metrics_render_misc(struct metrics_out *o, struct metrics *const *sets, size_t n)
{
    int64_t active = 0;
    for (size_t k = 0; k < n; k++)
        active += atomic_load_explicit(&sets[k]->active_streams, memory_order_relaxed);
    metrics_printf(o,
                   "# HELP memproxy_active_streams Responses being streamed now.\n"
                   "# TYPE memproxy_active_streams gauge\nmemproxy_active_streams %lld\n",
                   (long long)active);
    metrics_render_family(o, sets, n, offsetof(struct metrics, failures),
                          "memproxy_upstream_failures_total", "Upstream attempts that failed.",
                          "kind", metrics_failure_names, METRICS_FAIL__COUNT);
    metrics_printf(o,
                   "# HELP memproxy_upstream_fallbacks_total Requests moved to a fallback.\n"
                   "# TYPE memproxy_upstream_fallbacks_total counter\n"
                   "memproxy_upstream_fallbacks_total %llu\n",
                   (unsigned long long)metrics_sum(sets, n, offsetof(struct metrics, fallbacks)));
    static const char *const cache_names[] = {"hit", "miss"};
    static const char *const summary_names[] = {"stored", "failed"};
    metrics_render_family(
        o, sets, n, offsetof(struct metrics, cache), "memproxy_cache_lookups_total",
        "Exact-match answer cache lookups (profiles[].cache).", "result", cache_names, 2);
    metrics_render_family(o, sets, n, offsetof(struct metrics, summaries),
                          "memproxy_summaries_total",
                          "Summaries of a session asked of the summarizer model: stored, or "
                          "failed (upstream error or an unusable answer; tried again later).",
                          "result", summary_names, 2);
    metrics_printf(
        o,
        "# HELP memproxy_fallback_replies_total Requests every upstream failed, "
        "answered with the profile's fallback_reply.\n"
        "# TYPE memproxy_fallback_replies_total counter\n"
        "memproxy_fallback_replies_total %llu\n",
        (unsigned long long)metrics_sum(sets, n, offsetof(struct metrics, fallback_replies)));
    metrics_printf(o,
                   "# HELP memproxy_client_disconnects_total Clients that hung up mid-response.\n"
                   "# TYPE memproxy_client_disconnects_total counter\n"
                   "memproxy_client_disconnects_total %llu\n",
                   (unsigned long long)metrics_sum(sets, n, offsetof(struct metrics, disconnects)));
    metrics_printf(
        o,
        "# HELP memproxy_parse_memo_lookups_total Chat messages looked up in the workers' "
        "parse memo (server.parse_memo): a hit is a message not read again.\n"
        "# TYPE memproxy_parse_memo_lookups_total counter\n"
        "memproxy_parse_memo_lookups_total{result=\"hit\"} %llu\n"
        "memproxy_parse_memo_lookups_total{result=\"miss\"} %llu\n"
        "# HELP memproxy_parse_memo_bytes What the parse memos hold (messages' text and estimated "
        "trees, what was learned of them, held stored turns).\n"
        "# TYPE memproxy_parse_memo_bytes gauge\nmemproxy_parse_memo_bytes %llu\n",
        (unsigned long long)metrics_sum(sets, n, offsetof(struct metrics, memo_hits)),
        (unsigned long long)metrics_sum(sets, n, offsetof(struct metrics, memo_misses)),
        (unsigned long long)metrics_sum(sets, n, offsetof(struct metrics, memo_bytes)));
    static const char *const hook_names[METRICS_HOOK__COUNT] = {"delivered", "retry", "failed"};
    static const char *const recall_names[METRICS_RECALL__COUNT] = {"ready", "late", "failed"};
    static const char *const embed_names[METRICS_EMBED__COUNT] = {"stored", "retry", "failed"};
    metrics_render_family(o, sets, n, offsetof(struct metrics, hooks),
                          "memproxy_webhook_tries_total", "Webhook dump tries by outcome.",
                          "result", hook_names, METRICS_HOOK__COUNT);
    metrics_render_family(o, sets, n, offsetof(struct metrics, recalls),
                          "memproxy_recall_lookups_total",
                          "Retrieval lookups by outcome of the question's embedding.", "result",
                          recall_names, METRICS_RECALL__COUNT);
    metrics_render_family(o, sets, n, offsetof(struct metrics, embeds), "memproxy_embeddings_total",
                          "Stored turns' embeddings by outcome.", "result", embed_names,
                          METRICS_EMBED__COUNT);
}

static void metrics_render_memory(struct metrics_out *o, const struct memory_stats *m)
{
    metrics_printf(o,
                   "# HELP memproxy_store_transactions_total Transactions the writer committed.\n"
                   "# TYPE memproxy_store_transactions_total counter\n"
                   "memproxy_store_transactions_total %llu\n"
                   "# HELP memproxy_store_writes_total Batches of writes (a request's turns, a "
                   "reply) by outcome.\n"
                   "# TYPE memproxy_store_writes_total counter\n"
                   "memproxy_store_writes_total{result=\"ok\"} %llu\n"
                   "memproxy_store_writes_total{result=\"failed\"} %llu\n"
                   "# HELP memproxy_store_commit_delays_total Transactions held for "
                   "storage.commit_delay_us so that replies arriving close together share them.\n"
                   "# TYPE memproxy_store_commit_delays_total counter\n"
                   "memproxy_store_commit_delays_total %llu\n"
                   "# HELP memproxy_store_commit_spins_total Reply commits a worker waited for "
                   "without sleeping (storage.commit_spin_us, one request at a time).\n"
                   "# TYPE memproxy_store_commit_spins_total counter\n"
                   "memproxy_store_commit_spins_total %llu\n"
                   "# HELP memproxy_store_wal_flushes_total Writebacks of SQLite's WAL started "
                   "as it grew (storage.wal_flush_after).\n"
                   "# TYPE memproxy_store_wal_flushes_total counter\n"
                   "memproxy_store_wal_flushes_total %llu\n"
                   "# HELP memproxy_store_checkpoints_total WAL checkpoints (SQLite): by its "
                   "thread beside the writer, or by the writer, holding the commits behind it, "
                   "when the WAL outgrew that thread.\n"
                   "# TYPE memproxy_store_checkpoints_total counter\n"
                   "memproxy_store_checkpoints_total{by=\"checkpointer\"} %llu\n"
                   "memproxy_store_checkpoints_total{by=\"writer\"} %llu\n"
                   "# HELP memproxy_store_replies_pending Recorded requests under way whose "
                   "reply is not written yet.\n"
                   "# TYPE memproxy_store_replies_pending gauge\n"
                   "memproxy_store_replies_pending %lld\n",
                   (unsigned long long)m->transactions, (unsigned long long)m->batches_ok,
                   (unsigned long long)m->batches_failed, (unsigned long long)m->commit_delays,
                   (unsigned long long)m->commit_spins, (unsigned long long)m->wal_flushes,
                   (unsigned long long)m->checkpoints, (unsigned long long)m->checkpoints_held,
                   (long long)m->replies_pending);
    metrics_print_hist(o, &m->transaction_time, "memproxy_store_transaction_seconds",
                       "Time each of the writer's transactions took, failed ones too: on "
                       "PostgreSQL the round trip with the server's commit.");
    metrics_printf(
        o,
        "# HELP memproxy_memory_sessions Sessions in the in-memory working set.\n"
        "# TYPE memproxy_memory_sessions gauge\nmemproxy_memory_sessions %llu\n"
        "# HELP memproxy_memory_turns Turns in the working set (an empty session "
        "counts as one).\n"
        "# TYPE memproxy_memory_turns gauge\nmemproxy_memory_turns %llu\n"
        "# HELP memproxy_memory_bytes About the heap the working set's turns hold "
        "(memory.max_bytes caps it).\n"
        "# TYPE memproxy_memory_bytes gauge\nmemproxy_memory_bytes %llu\n"
        "# HELP memproxy_memory_reach_back_turns_total Stored turns read from the database "
        "to match turn-id windows reaching back past the working set.\n"
        "# TYPE memproxy_memory_reach_back_turns_total counter\n"
        "memproxy_memory_reach_back_turns_total %llu\n",
        (unsigned long long)m->sessions, (unsigned long long)m->turns, (unsigned long long)m->bytes,
        (unsigned long long)m->reach_back_turns);
}

char *metrics_render(struct metrics *const *sets, size_t n, const struct memory_stats *mem,
                     size_t *len)
{
    struct metrics_out o = {.cap = 4096};
    o.buf = xmalloc(o.cap);
    metrics_render_requests(&o, sets, n);
    metrics_render_hist(&o, sets, n, offsetof(struct metrics, ttft),
                        "memproxy_upstream_ttft_seconds",
                        "Upstream time to first token on streams.");
    metrics_render_hist(&o, sets, n, offsetof(struct metrics, added),
                        "memproxy_added_latency_seconds",
                        "Time memproxy itself spends on a request, upstream time excluded.");
    metrics_render_hist(&o, sets, n, offsetof(struct metrics, commit_wait),
                        "memproxy_commit_wait_seconds",
                        "Time a recorded response's end waited for its turn's commit.");
    metrics_render_hist(&o, sets, n, offsetof(struct metrics, check_wait),
                        "memproxy_session_check_wait_seconds",
                        "Replicas: time a recorded response's end waited for its session's "
                        "version check (0 when the check came first).");
    metrics_render_misc(&o, sets, n);
    metrics_render_hist(&o, sets, n, offsetof(struct metrics, recall_wait),
                        "memproxy_recall_wait_seconds",
                        "Time a request waited for its retrieval lookup.");
    metrics_render_hist(&o, sets, n, offsetof(struct metrics, read_wait),
                        "memproxy_storage_read_wait_seconds",
                        "PostgreSQL: time a read handed to the read pool (storage.pool) took, "
                        "queue included.");
    metrics_render_memory(&o, mem);
    *len = o.len;
    return o.buf;
}
