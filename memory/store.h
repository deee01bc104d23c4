/*
 * store: the database behind memproxy's memory — sessions and their turns — as a queue and a
 * writer thread over a backend (store_backend.h; SQLite, sqlite.h, is the default).
 *
 * Writes: one writer thread owns the backend's only write connection. Worker threads build a
 * batch (store_batch.h: a list of writes that belong together, e.g. one request's turns) and
 * submit it; the writer takes everything queued, commits it in one transaction (group
 * commit: one sync for many requests), then hands each batch's completion back to the event
 * base of the thread that submitted it. A caller that must know its rows are durable waits
 * for that callback; nothing on a worker ever waits on the database.
 *
 * Reads: each worker opens its own reader (store_reader_open); the calls below go to the
 * backend's.
 *
 * Turns are JSON objects in the shape memory/reconcile.h describes; the backend maps them to
 * columns and back. A session is identified by (tenant, id): the same id used by two tenants
 * names two sessions.
 *
 * Ownership: store_open() returns a store closed with store_close(), which first commits
 * everything already submitted. A submitted batch belongs to the store. JSON returned by
 * readers is new (caller decrefs).
 */
#ifndef MEMPROXY_STORE_H
#define MEMPROXY_STORE_H

#include "base/hist.h"
#include "memory/store_backend.h"

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct recall_pick;
struct store;
struct store_batch;
struct store_reader;

/* Open (creating and migrating as needed). NULL with *err set on failure. */
struct store *store_open(const char *path, const struct store_opts *opts, char **err);
/* Since open: */
struct store_counts {
    uint64_t transactions;     /* committed */
    uint64_t ok, failed;       /* batches committed, batches failed */
    uint64_t delayed;          /* groups held by commit_delay_us */
    uint64_t spun;             /* completions a loop waited for without sleeping (commit_spin_us) */
    uint64_t checkpoints;      /* WAL checkpoints beside the writer (SQLite's checkpointer) */
    uint64_t checkpoints_held; /* ... and on it, after reporting its group, holding the next */
    uint64_t wal_flushes;      /* the WAL's writebacks started (SQLite: wal_flush_after) */
    /* How long each of the writer's transactions took, failed ones too: the statements and
     * the commit (on PostgreSQL also the round trip and the server's sync to disk). */
    struct hist_counts transaction_time;
    int64_t expected; /* replies on their way now (store_expect) */
};
void store_counts(struct store *st, struct store_counts *out);

/* Wait until everything submitted so far is committed and its completion handed over, and
 * the upkeep that set off beside the writer is done (a WAL checkpoint). */
void store_drain(struct store *st);
/* Commit what is queued, stop the writer, close. */
void store_close(struct store *st);

/* ---- writes (store_batch.h builds them) ---- */

/*
 * Queue b for the writer; batches are applied in the order they were submitted. When b is
 * committed (or failed), cb(arg, ok) runs on base's thread and b is freed there: its memory
 * goes back to the allocator of the thread that built it, instead of the writer taking that
 * thread's allocator lock for every free while it allocates (measured: 9% of memproxy's CPU
 * under load). With base NULL, cb runs on the writer thread itself, so it must be short and
 * thread-safe, and the writer frees b. cb may be NULL. Takes b.
 */
void store_submit(struct store *st, struct store_batch *b, struct event_base *base,
                  store_done_cb cb, void *arg);
/* Replies on their way, for the group commit's wait (store_opts.commit_delay_us): +1 when a
 * recorded request's upstream transfer has started, -1 when its reply is submitted (before
 * the submit) or when it ends without one. Any thread. */
void store_expect(struct store *st, int delta);
/* A base that submits often (a worker's) can be attached: its completions then go through
 * an inbox of its own (a list and an eventfd watched by the base, written after the list's
 * lock is released) instead of event_base_once, which writes the base's wake-up while holding
 * the base's lock, so the woken loop often slept again on that lock until the writer let go.
 * Attach on the base's thread or before its loop runs; detach (on that thread, after
 * store_drain) before freeing the base: completions still in the inbox run there. Without
 * attaching, completions go through event_base_once as before. -1 if out of descriptors. */
int store_attach(struct store *st, struct event_base *base);
void store_detach(struct store *st, struct event_base *base);

/* ---- reads (one reader per thread) ---- */

struct store_reader *store_reader_open(struct store *st, char **err);
void store_reader_close(struct store_reader *r);
/* Whether a read since store_reader_clear() went unanswered (the database is unreachable):
 * what it returned looks like "nothing there", which the REST API must not say. Always 0 on
 * SQLite. */
int store_reader_failed(const struct store_reader *r);
void store_reader_clear(struct store_reader *r);
/* Whether other processes (replicas) may write the database too (PostgreSQL). */
int store_shared(const struct store *st);
/* A shared backend's version of the session (store_backend.h): 0 when there is none (or the
 * backend is not shared), -1 when the read failed. */
int64_t store_session_version(struct store_reader *r, const char *tenant, const char *session_id);
/* ---- reads that never wait on a loop (shared backends) ---- */

struct store_async;
/* A channel for base's thread (on it), or NULL when the backend reads in place (SQLite):
 * then use the reader. Closed on base's thread; callbacks of reads still on their way run
 * then, as failures. */
struct store_async *store_async_open(struct store *st, struct event_base *base);
void store_async_close(struct store_async *a);
/* The session's version (store_session_version) to cb on base's thread. */
void store_async_version(struct store_async *a, const char *tenant, const char *session_id,
                         store_version_cb cb, void *arg);
/* The session's version, row, last `turns` turns and user_id's memory (its max_facts most
 * confident facts; user_id NULL: the session's user), to cb on base's thread. */
void store_async_load(struct store_async *a, const char *tenant, const char *session_id,
                      const char *user_id, size_t turns, size_t max_facts, store_loaded_cb cb,
                      void *arg);

/* "sqlite" or "postgresql". */
const char *store_backend_name(const struct store *st);

/* The session as JSON (id, tenant, user_id, profile, status, system_messages, window_hash,
 * created/updated/stopped ms, turn count, runtime_system, labels, metadata, runtime_params,
 * call_summary {text, through_seq} or null, window_turns), or NULL when there is none. */
json_t *store_session_get(struct store_reader *r, const char *tenant, const char *session_id);

/* The session's turns in seq order: those with turn_id >= min_turn, at most the last
 * limit of them (0 = all). An unknown session gives an empty array. */
json_t *store_turns(struct store_reader *r, const char *tenant, const char *session_id,
                    int64_t min_turn, size_t limit);
/* The session's turns of these n turn ids (turn_ids >= 0), in seq order, at most limit of
 * them (0 = all). Read through the index on turn ids: the session's other turns are never
 * visited, however many it has. */
json_t *store_turns_of(struct store_reader *r, const char *tenant, const char *session_id,
                       const int64_t *turn_ids, size_t n, size_t limit);

/* A tenant's sessions, newest first, optionally of one user and/or status, at most limit:
 * {"sessions": [...], "next": cursor|null}; pass next back as before for the next page. */
json_t *store_sessions(struct store_reader *r, const char *tenant, const char *user_id,
                       const char *status, int64_t before, size_t limit);

/* What is remembered about a user: {"summary": {text, from_ms, to_ms, updated_ms}|null,
 * "facts": [{category, key, value, confidence, seen, updated_ms}, ...]} with at most
 * max_facts facts, the most confident first. */
json_t *store_user_memory(struct store_reader *r, const char *tenant, const char *user_id,
                          size_t max_facts);

/* Webhook deliveries of a tenant, newest first: {"deliveries": [{id (the notice id),
 * session_id, url, event, status, attempts, next_try_ms, last_status, last_error, created_ms,
 * updated_ms}], "next": cursor|null}. NULL filters match all. */
json_t *store_deliveries(struct store_reader *r, const struct store_delivery_query *q);

/* Pending deliveries due by now_ms, the most overdue first, at most limit:
 * [{id, notice_id, tenant, session_id, url, event, payload (text), attempts}]. */
json_t *store_outbox_due(struct store_reader *r, int64_t now_ms, size_t limit);
/* When the next pending delivery is due (ms), or -1 when none is pending. */
int64_t store_outbox_next(struct store_reader *r);

/* STOPPED sessions waiting for their summary and due by now_ms (a retry waits), the longest
 * first: [{tenant, id, user_id, profile, created_ms, stopped_ms, tries}]. */
json_t *store_to_summarize(struct store_reader *r, int64_t now_ms, size_t limit);
/* When the next of them is due (-1: none waits). */
int64_t store_summary_next(struct store_reader *r);
/* RUNNING sessions of profile whose client's window left at least threshold turns out since
 * their call summary's last pass (docs/proxy/jobs.md): [{tenant, id, user_id|null, profile,
 * created_ms, updated_ms, seq (the newest turn to cover), after_seq (the summary so far covers
 * up to it), call_summary (its text, or null)}]. */
json_t *store_running_to_summarize(struct store_reader *r, const char *profile, long threshold,
                                   size_t limit);

/* The cached answer under key that has not expired: {content, model}, or NULL. */
json_t *store_cache_get(struct store_reader *r, const char *key, int64_t now_ms);

/* Turns waiting for their embedding, due by now_ms, the longest waiting first:
 * [{sid, seq, profile, text, attempts}]. And when the next is due (-1: none waits). */
json_t *store_to_embed(struct store_reader *r, int64_t now_ms, size_t limit);
int64_t store_embed_next(struct store_reader *r);
/* Retrieval's scope is the user (user_id, or else the session's user; without one, the
 * session). Whether some turn in it has an embedding; and offer p its latest limit user and
 * assistant turns, newest first, with their embeddings. */
int store_recall_embedded(struct store_reader *r, const char *tenant, const char *user_id,
                          const char *session_id);
void store_recall(struct store_reader *r, const char *tenant, const char *user_id,
                  const char *session_id, size_t limit, struct recall_pick *p);

/* RUNNING sessions not updated since before_ms, the longest idle first: [{tenant, id,
 * profile}]. */
json_t *store_idle_sessions(struct store_reader *r, int64_t before_ms, size_t limit);

#endif
