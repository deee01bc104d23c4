/*
 * store: the SQLite database behind memproxy's memory — sessions and their turns.
 *
 * Writes: one writer thread owns the only write connection. Worker threads build a batch
 * (a list of writes that belong together, e.g. one request's turns) and submit it; the
 * writer takes everything queued, commits it in one transaction (group commit: one fsync for
 * many requests), then hands each batch's completion back to the event base of the thread
 * that submitted it. A caller that must know its rows are durable waits for that callback;
 * nothing on a worker ever waits on SQLite.
 *
 * Reads: each worker opens its own read-only connection (store_reader); WAL lets readers run
 * beside the writer.
 *
 * Settings: journal_mode=WAL, synchronous=NORMAL, busy_timeout, foreign_keys=ON,
 * journal_size_limit. The write connection is opened on memory/walbuf's VFS, which writes a
 * transaction's WAL frames in one system call rather than two per page. The schema version
 * lives in PRAGMA user_version; store_open() applies the missing migrations in order, each in
 * its own transaction.
 *
 * Turns are JSON objects in the shape memory/reconcile.h describes; the store maps them to
 * columns and back. A session is identified by (tenant, id): the same id used by two tenants
 * names two sessions.
 *
 * Ownership: store_open() returns a store closed with store_close(), which first commits
 * everything already submitted. A submitted batch belongs to the store. Batches copy the JSON
 * they are given (deeply), except the turns of store_batch_insert, _update and _replace: those
 * are on every recorded request's path, and a copy made only to be freed again cost a
 * worker more than the rest of the recording. The batch keeps a reference to them instead,
 * and the caller must change neither the turn nor anything inside it afterwards (the working
 * set replaces a turn, never changes it). The writer only reads them, and jansson's
 * reference counts are atomic (JANSSON_THREAD_SAFE_REFCOUNT, checked at build time), so
 * either thread may drop the last reference. JSON returned by readers is new (caller decrefs).
 */
#ifndef MEMPROXY_STORE_H
#define MEMPROXY_STORE_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION 9

struct recall_pick;
struct store;
struct store_batch;
struct store_reader;

struct store_opts {
    long busy_timeout_ms; /* every connection waits this long for a lock */
    int64_t retention_ms; /* > 0: sessions idle longer are deleted, at start and hourly */
    int64_t touch_ms;     /* a session's updated_ms lags its last write by at most this
                             (0: STORE_TOUCH_MS); idle stops need it finer than a minute */
    /* Group commit under load: when awaited batches (with a completion) arrive less than
     * this far apart while other replies are on their way (store_expect), the writer holds
     * a group's transaction until this long after its first awaited batch arrived, so that
     * the batches arriving meanwhile share the commit; 0 commits each group at once. One
     * request at a time and replies ending far apart are never held. See store_gather() in
     * store.c. */
    int64_t commit_delay_us;
};

/* Open (creating and migrating as needed). NULL with *err set on failure. */
struct store *store_open(const char *path, const struct store_opts *opts, char **err);
/* Since open: */
struct store_counts {
    uint64_t transactions; /* committed */
    uint64_t ok, failed;   /* batches committed, batches failed */
    uint64_t delayed;      /* groups held by commit_delay_us */
    uint64_t checkpoints;  /* WAL checkpoints the writer ran (after reporting its group) */
    int64_t expected;      /* replies on their way now (store_expect) */
};
void store_counts(struct store *st, struct store_counts *out);

/* Wait until everything submitted so far is committed and its completion handed over. */
void store_drain(struct store *st);
/* Commit what is queued, stop the writer, close. */
void store_close(struct store *st);

/* ---- writes ---- */

/* A batch of one session's writes; with session_id NULL, a batch of the tenant's writes that
 * belong to no one session (import, the user and outbox operations below). */
struct store_batch *store_batch_new(const char *tenant, const char *session_id);
/* Create the session if new (RUNNING); set user and profile when given (NULL keeps them). */
void store_batch_session(struct store_batch *b, const char *user_id, const char *profile);
/* The client's latest system messages (NULL keeps the stored ones) and window fingerprint
 * (reconcile's window_hash; memory.c decides when either is worth writing). */
void store_batch_window(struct store_batch *b, json_t *system, uint64_t window_hash);
/* A new turn (reconcile's insert, or a recorded reply) at its "seq": the caller numbers a
 * session's turns and submits them in that order. A turn whose (turn_id, role, turn_idx)
 * exists is skipped, so a write repeated after a crash or a race stores nothing twice. */
void store_batch_insert(struct store_batch *b, json_t *turn);
/* Change a stored turn: reconcile's update {seq, content, original, interrupted,
 * interrupt_timestamp}. */
void store_batch_update(struct store_batch *b, json_t *update);
/* Overwrite the reply stored at turn's "seq" with turn (a request retried: the new reply is
 * the one the client got). */
void store_batch_replace(struct store_batch *b, json_t *turn);
/* (These three reference their JSON, never copy it: see Ownership above.) */
/* The REST API's changes. A batch marked existing fails (ok 0) when the session is gone,
 * rather than creating it. */
void store_batch_existing(struct store_batch *b);
/*
 * Status STOPPED, stopped_ms now — unless it is stopped already, or how.idle_before (ms) is
 * given and the session was updated since. When it stops, one outbox row per how.hooks
 * item ({url, event}) is written in the same transaction, its payload (history.h) read there
 * too, with a fresh random notice id. With how.summarize (and a user on the session) the
 * session waits for its summary (store_to_summarize()) and the rows are due how.hold_ms
 * later, unless the summary comes sooner. how may be NULL.
 */
void store_batch_stop(struct store_batch *b, json_t *how);
void store_batch_delete(struct store_batch *b); /* the session and its turns */
void store_batch_runtime(struct store_batch *b, json_t *system_messages);
void store_batch_patch(struct store_batch *b, json_t *fields); /* labels, metadata, user_id */
/* Tenant batches (session_id NULL). */
/* A session from an export (snapshot_check() passed); fails when the id is taken. */
void store_batch_import(struct store_batch *b, json_t *snapshot);
/* Every session of the user (and their turns), their summary, facts, webhook dumps and the
 * cached answers their requests made. */
void store_batch_user_erase(struct store_batch *b, const char *user_id);
/* Replace the user's summary and facts: {summary: {text, from_ms?, to_ms?}|null,
 * facts: [{category, key, value, confidence}]}; NULL or {} removes them. */
void store_batch_user_memory(struct store_batch *b, const char *user_id, json_t *memory);
/* A delivery's outcome: {id, status: pending|delivered|failed, next_ms, code?, error?};
 * attempts counts up. Only a pending row changes. */
void store_batch_outbox_result(struct store_batch *b, json_t *result);
/* A summary pass over a stopped session: {session_id, user_id, memory: {summary: {text},
 * facts} or null when none was made, from_ms, to_ms}; over a running one, seq (the last turn
 * it covered) too, and then only the summary, the facts and how far it went are stored. The summary
 * replaces the user's (its range widened to cover both), facts seen are reinforced and the user's
 * others decay; the session is marked summarized and its waiting dumps become due, carrying the
 * summary. With retry_ms instead (a stopped session's summary failed upstream), the session
 * waits again until then, its tries counted, and its dumps go now without it. */
void store_batch_summary(struct store_batch *b, json_t *outcome);
/* An answer for the exact-match cache: {key, user_id, content, model, expires_ms}. */
void store_batch_cache_put(struct store_batch *b, json_t *entry);
/* Make a failed (or pending) delivery due now with its tries counted afresh; the batch fails
 * when the tenant has no such undelivered notice. */
void store_batch_outbox_retry(struct store_batch *b, const char *notice_id);
/* Retrieval: this batch's user and assistant turns (inserted, or changed: their embedding is
 * then dropped) are queued for the embedder (store_to_embed()). */
void store_batch_embed(struct store_batch *b);
/* Retrieval: an embedding made already (a request's question, looked up for its recall). A
 * user turn of this embed batch that reads exactly text takes it at once instead of being
 * queued, so the question is not embedded twice. Everything is copied. */
void store_batch_known_embedding(struct store_batch *b, const char *model, const char *text,
                                 const float *vec, size_t dim);
/* An embedder's outcome for one queued turn (in a batch of tenant "", session NULL). */
struct store_embedding {
    int64_t sid, seq;  /* the turn (store_to_embed()'s row) */
    const char *model; /* the embedding model */
    const char *text;  /* the text embedded: stored only while the turn still reads so */
    const float *vec;  /* dim floats, copied; or NULL with error (no embedding will be made:
                          the turn leaves the queue) or retry_ms (> 0: try again then) */
    size_t dim;
    const char *error;
    int64_t retry_ms;
};
void store_batch_embedding(struct store_batch *b, const struct store_embedding *e);
size_t store_batch_ops(const struct store_batch *b);
void store_batch_free(struct store_batch *b);

/* b, submitted without a completion while other replies are on their way (store_expect
 * above 1), is not committed on its own: it waits for the next batch that is not deferred (a
 * reply's) and shares its transaction, or commit_delay_us at most (the first one deferred
 * into an empty queue wakes the writer only to set that timeout). For a request's own turns:
 * under load each request otherwise cost a transaction of its own before its reply's,
 * writing its session's pages twice. One request at a time they are committed at once,
 * while the upstream answers. */
void store_batch_defer(struct store_batch *b);

/* ok: 1 when committed, 0 when the transaction failed (logged; the rows are not there). */
typedef void (*store_done_cb)(void *arg, int ok);

/* cb(arg, ok) runs on the writer thread as soon as b's transaction is over, before b's report
 * is handed to the submitter's thread (store_submit): for bookkeeping that must not wait for
 * that thread's loop. It must be short and thread-safe. */
void store_batch_on_writer(struct store_batch *b, store_done_cb cb, void *arg);

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

/* The session as JSON (id, tenant, user_id, profile, status, system_messages, window_hash,
 * created/updated/stopped ms, turn count, runtime_system, labels, metadata, runtime_params),
 * or NULL when there is none. */
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
struct store_delivery_query {
    const char *tenant, *status, *session_id, *notice_id;
    int64_t before; /* a previous page's next, or 0 */
    size_t limit;
};
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
/* RUNNING sessions of profile with a user and at least threshold turns after the last summary
 * of theirs: [{tenant, id, user_id, profile, created_ms, updated_ms, seq (the last turn)}]. */
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
