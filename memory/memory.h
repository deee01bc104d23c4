/*
 * memory: what memproxy remembers, behind the one interface proxy/ uses — sessions, their
 * turns, and the working set of recent turns that keeps a hot session's request off the
 * database (workset.h). The store (store.h, over its backend) and the reconciliation rules
 * (reconcile.h) sit behind it; a second backend plugs into the store without touching proxy/.
 *
 * Recording one chat request (struct memory_rec), on the worker that handles it:
 *   1. memory_rec_new() when the request has a session id: cheap, reads nothing;
 *   2. memory_rec_request() once the upstream transfer has started: reconciles the client's
 *      window against the session's recent turns (from the working set, or read through the
 *      worker's reader when the session is cold) and queues the writes — new turns, changed
 *      turns (an interruption coming back), the client's system messages. Nothing waits;
 *   3. memory_rec_reply() when the reply is complete or the client hung up: queues the
 *      assistant turn and, when asked, calls back on the worker's base once it is committed.
 *      Batches commit in submission order, so that callback also covers step 2's writes.
 *
 * The working set is shared by all workers: the table under one lock, each session under
 * its own, held while its window is reconciled and its writes are numbered and submitted —
 * so turns are numbered (seq) in the order they are committed even when two requests of one
 * session race. A session's entry holds at most memory.session_turns recent turns, all
 * entries together memory.max_turns; the least recently used entries with nothing in flight
 * go first. A failed commit makes the session's entry reload from the database.
 *
 * Turns are JSON objects in reconcile.h's stored shape. Entries never change a turn object
 * after sharing it (an update replaces it), so requests may hold references across threads.
 *
 * memory.c is the one door to the store: nothing above it reads or writes the database
 * another way. Its pure helpers (history.h, snapshot.h, cache.h, recall.h) are used directly.
 *
 * Ownership: memory_open() returns a handle closed by memory_close() after every reader is
 * closed and every rec freed. Readers are per thread. A rec borrows its reader and copies
 * its strings; memory_rec_free() may run before a commit it asked about is reported (the
 * report then still arrives, and the callback's arg must outlive it).
 */
#ifndef MEMPROXY_MEMORY_H
#define MEMPROXY_MEMORY_H

#include "base/hist.h"

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct jmemo;
struct memory;
struct memory_reader;
struct readpool;
struct memory_rec;
struct recall_pick;

struct memory_opts {
    const char *path;          /* the SQLite file */
    const char *url;           /* a PostgreSQL database instead (storage.url), or NULL */
    long statement_timeout_ms; /* PostgreSQL: statements running longer fail (0: none) */
    int64_t lease_ms;          /* PostgreSQL: a queue item taken is a replica's this long */
    int64_t replica_wait_ms;   /* PostgreSQL, stored mode: a heard part waits this long for its
                                  turn, another replica's (memory_rec_prepare) */
    int prepared_statements;   /* PostgreSQL: statements parsed once per connection */
    long busy_timeout_ms;      /* a connection waits this long for a lock */
    long retention_days;       /* > 0: sessions idle longer are deleted in the background */
    size_t session_turns;      /* recent turns kept per session */
    size_t max_turns;          /* kept over all sessions */
    size_t session_bytes;      /* per session's turns (0: no cap) */
    size_t max_bytes;          /* all sessions' turns (0: no cap) */
    int64_t touch_ms;          /* a session's updated time may lag its last request by this much
                                  (at most a minute; idle stops want it finer) */
    int64_t commit_delay_us;   /* group commit under load (store.h, store_opts) */
    int64_t commit_spin_us;    /* a reply's commit awaited without sleeping (store_opts) */
    int64_t wal_flush_after;   /* SQLite: the WAL's writeback each this many bytes (store_opts) */
};

struct memory *memory_open(const struct memory_opts *o, char **err);

/* Counters for /metrics: read from any thread, values may be a moment apart. */
struct memory_stats {
    uint64_t transactions;     /* committed by the writer */
    uint64_t batches_ok;       /* requests' and replies' writes committed */
    uint64_t batches_failed;   /* writes that could not be committed (logged) */
    uint64_t commit_delays;    /* transactions held for storage.commit_delay_us */
    uint64_t commit_spins;     /* reply commits a worker waited for without sleeping */
    uint64_t wal_flushes;      /* the WAL's writebacks started (walflush.h) */
    uint64_t checkpoints;      /* WAL checkpoints beside the writer (its checkpointer) */
    uint64_t checkpoints_held; /* ... and by the writer itself, holding the commits behind */
    struct hist_counts transaction_time; /* each of the writer's transactions (store.h) */
    uint64_t reach_back_turns; /* turns read for turn-id windows older than the working set */
    int64_t replies_pending;   /* recorded requests under way whose reply is not written yet */
    uint64_t sessions;         /* sessions in the working set */
    uint64_t turns;            /* turns in the working set */
    uint64_t bytes;            /* their size (base/jsize.h) */
};
void memory_stats(struct memory *m, struct memory_stats *out);
/* Wait until every write submitted so far is committed and its callback handed over. */
void memory_drain(struct memory *m);
void memory_close(struct memory *m);
/* A worker's base, attached while it runs: its commits are reported through an inbox of its
 * own rather than event_base_once (store_attach in memory/store.h). Detach after
 * memory_drain and before freeing the base. */
int memory_attach(struct memory *m, struct event_base *base);
void memory_detach(struct memory *m, struct event_base *base);

/* Whether other replicas share the database (PostgreSQL): reading a queue then takes what it
 * returns (a lease, memory/pgsql_read.h), and other replicas' work shows only when polled. */
int memory_shared(const struct memory *m);

struct memory_reader *memory_reader_open(struct memory *m, char **err);
void memory_reader_close(struct memory_reader *r);
/* With a shared store (PostgreSQL), r's recorded requests are prepared (memory_rec_prepare)
 * by reads on base's loop that never wait, and pool (memory/readpool.h) reads the older turns
 * a turn-id window reaches back to: call on base's thread, before its loop runs; r is then
 * closed on that thread too, or after its loop has stopped. Nothing with SQLite. */
void memory_reader_async(struct memory_reader *r, struct event_base *base, struct readpool *pool);
/* Whether a read since memory_reader_clear() went unanswered (PostgreSQL unreachable): what
 * it returned looks like "nothing there", so REST says 503 instead. */
int memory_reader_failed(const struct memory_reader *r);
void memory_reader_clear(struct memory_reader *r);

struct memory_rec_params {
    const char *tenant, *session_id;
    const char *user_id; /* NULL keeps the session's */
    const char *profile;
    json_t *messages;   /* the client's messages (increfed by the rec) */
    struct jmemo *memo; /* the calling worker's memo (jmemo.h) that read them, or NULL: how
                           reconciliation read a message is kept there; the rec must then be
                           used on that worker's thread only */
    json_t *turn_id;    /* the request's top-level turn_id (Agora), number or numeric string;
                           NULL when absent */
    int append;         /* stored history mode: the messages are all new (appended, each user
                           message opening a turn), not a window to reconcile */
    int embed;          /* retrieval: the user and assistant turns written wait for their
                           embedding (memory_to_embed()) */
    int track_window;   /* summary_threshold: how many turns the window spans is written
                           whenever it changes (memory/callsum.h) */
};

struct memory_rec *memory_rec_new(struct memory_reader *r, const struct memory_rec_params *p);

/* Before memory_rec_context() and memory_rec_request(): make the session's entry current
 * without the loop waiting for the database. With replicas (a shared store whose reader
 * has an async channel, memory_reader_async) the entry's version is checked, and the session
 * read again when another replica wrote it since (or read for the first time); cb(arg) runs
 * on the loop when that is done, or at once (inside this call) when there is nothing to read
 * (SQLite, or this process's own writes of the session still in flight). The rec must live
 * until cb. */
void memory_rec_prepare(struct memory_rec *rec, void (*cb)(void *arg), void *arg);
/* Whether memory_rec_prepare() would only check a version: the store is shared, the reader
 * has its async channel, and the session's entry is held and not to be read again. The
 * upstream request may then be built before the check (the transforms read the entry's
 * injected memory and params, not its turns; proxy/chat/chat.c). */
int memory_rec_warm(struct memory_rec *rec);

/* Retrieval: the request's question (its last user message's text, as reconcile stores it)
 * was embedded with model for its recall. Before memory_rec_request(): that turn takes this
 * embedding when it is written instead of being embedded again. vec is copied. */
void memory_rec_question(struct memory_rec *rec, const char *model, const char *text,
                         const float *vec, size_t dim);

/* What the upstream request is built from, before it is forwarded (from the working set; a
 * cold session is read through the rec's reader). Both arrays are new and may be NULL; the
 * turns and messages in them are the working set's own, shared with other requests and
 * threads, and never change once there (a turn that changes is replaced in the entry by a
 * new object): replace one in the array, never change it in place (the transforms' rule,
 * transforms/tx.h). params is the caller's own copy. The injected messages are read with
 * the session's entry: a change made behind memproxy's back (another process writing the
 * database) shows once the entry is read again. */
struct memory_context {
    json_t *history;   /* the session's recent turns, stored shape (want_history only), but
                          those the call's own summary stands in for */
    json_t *inject;    /* system messages for inject_memory: the session's runtime system
                          messages, the user's summary, the user's facts, the call's own
                          summary while its turns are not in the request (callsum.h) */
    json_t *params;    /* the session's runtime params (set over REST), an object */
    json_t *user_info; /* the session's labels and metadata for user_context, an object
                          shared with the working set (never changed: read only), or NULL */
    json_t *system;    /* want_history only: the client's last system messages, or NULL (never
                          changed: read only) */
};
void memory_rec_context(struct memory_rec *rec, int want_history, struct memory_context *out);

/* Stored history mode, with track_window: the turns the upstream request held (the stored
 * ones the transforms kept and the new ones), set before memory_rec_request(). A window's
 * span is counted from its messages. */
void memory_rec_window(struct memory_rec *rec, int64_t turns);

/* Reconcile the request's messages with the session and queue the writes. Runs once; later
 * calls do nothing. */
void memory_rec_request(struct memory_rec *rec);

struct memory_reply {
    const char *content;   /* as generated (what was sent before a hang-up) */
    const char *refusal;   /* the model's refusal instead of content (never spoken), or NULL:
                              kept as the turn's metadata.refusal */
    const char *reasoning; /* a reasoning model's thinking (never spoken), or NULL: kept as
                              the turn's metadata.reasoning */
    json_t *tool_calls;    /* or NULL */
    json_t *function_call; /* OpenAI's older functions API's call, or NULL: kept as the turn's
                              metadata.function_call (copied) */
    json_t *audio;         /* an audio reply's {id, expires_at}, or NULL: kept as the turn's
                              metadata.audio (copied); its transcript is the content */
    const char *model, *finish_reason;
    json_t *usage; /* or NULL */
    int64_t ttft_us, latency_us;
    int interrupted;    /* the client hung up before the end */
    const char *source; /* NULL: "llm"; "llm_failure" for a profile's fallback_reply */
};

typedef void (*memory_done_cb)(void *arg, int ok);

/*
 * Queue the reply as the session's assistant turn (after memory_rec_request()): its turn id
 * is the request's turn_id, else that of the latest user turn. When the request brought
 * nothing new and the session's last turn is a recorded reply (a retried request), the new
 * reply replaces that one: the client got this one. When base is non-NULL,
 * cb(arg, ok) runs on base's thread once the turn (and the request's writes) are committed;
 * ok is 0 when the transaction failed. Runs once per rec.
 */
void memory_rec_reply(struct memory_rec *rec, const struct memory_reply *reply,
                      struct event_base *base, memory_done_cb cb, void *arg);

int memory_rec_replied(const struct memory_rec *rec);

/* ---- the REST API's view (reads through the calling thread's reader) ---- */

/* The session (store.h's shape), or NULL when the tenant has none by that id. */
json_t *memory_session(struct memory_reader *r, const char *tenant, const char *id);
/* Its turns in order, the last limit of them (0 = all). */
json_t *memory_turns(struct memory_reader *r, const char *tenant, const char *id, size_t limit);
/* {"sessions": [...], "next": cursor|null}, newest first. */
json_t *memory_sessions(struct memory_reader *r, const char *tenant, const char *user_id,
                        const char *status, int64_t before, size_t limit);

enum memory_change {
    MEMORY_STOP,    /* status STOPPED; data (or NULL): {"hooks": [{url, event}], "idle_before":
                       ms} — the webhook dumps queued in the same transaction, and an idle
                       stop that does not happen when the session was used since */
    MEMORY_DELETE,  /* the session and its turns */
    MEMORY_RUNTIME, /* data: the runtime system messages (an array) */
    MEMORY_PATCH,   /* data: {labels?, metadata?, user_id?} */
};

/*
 * Change a session that exists. cb(arg, ok) runs on base's thread once committed; ok 0 when
 * it failed or the session is gone. The working set then reads the session again before its
 * next request, so a change (new runtime system messages) applies from the next request on.
 */
void memory_change(struct memory *m, const char *tenant, const char *id, enum memory_change what,
                   json_t *data, struct event_base *base, memory_done_cb cb, void *arg);
void memory_rec_free(struct memory_rec *rec);

/* ---- export and import (snapshot.h's shape) ---- */

/* The session and all its turns, or NULL when the tenant has none by that id. */
json_t *memory_export(struct memory_reader *r, const char *tenant, const char *id);
/* Create the session as exported (checked first); ok 0 when the id is taken meanwhile. */
void memory_import(struct memory *m, const char *tenant, json_t *snapshot, struct event_base *base,
                   memory_done_cb cb, void *arg);

/* ---- users ---- */

/* {user_id, summary: {text, from_ms, to_ms, updated_ms}|null, facts: [...]}. */
json_t *memory_user(struct memory_reader *r, const char *tenant, const char *user_id);
/* What is known of the user, the max_facts most confident facts: {summary|null, facts}. */
json_t *memory_user_known(struct memory_reader *r, const char *tenant, const char *user_id,
                          size_t max_facts);

enum memory_user_change {
    MEMORY_USER_ERASE,  /* everything held about the user: sessions, turns, summary, facts,
                           webhook dumps */
    MEMORY_USER_MEMORY, /* data replaces the summary and facts ({summary, facts}; {} clears) */
};
/* The tenant's sessions in the working set are read again after the change. */
void memory_user_change(struct memory *m, const char *tenant, const char *user_id,
                        enum memory_user_change what, json_t *data, struct event_base *base,
                        memory_done_cb cb, void *arg);

/* ---- long-term memory: summaries and facts (proxy/jobs/summarizer.h makes them) ---- */

/* STOPPED sessions waiting for their summary, due now: [{tenant, id, user_id, profile,
 * created_ms, stopped_ms, tries}], the longest waiting first. */
json_t *memory_to_summarize(struct memory_reader *r, size_t limit);
/* When the next of them is due, a failed one's retry included (-1: none waits). */
int64_t memory_summary_next(struct memory_reader *r);
/* RUNNING sessions of profile (with a user) that grew by threshold turns since their last
 * summary: [{tenant, id, user_id, profile, created_ms, updated_ms, seq}]. */
json_t *memory_running_to_summarize(struct memory_reader *r, const char *profile, long threshold,
                                    size_t limit);
/* Store a summary pass's outcome ({session_id, user_id, memory|null, from_ms, to_ms,
 * retry_ms?}, see
 * store_batch_summary()); the tenant's sessions in the working set read their injected memory
 * again. cb(arg, ok) on base's thread once committed. */
void memory_summary_done(struct memory *m, const char *tenant, json_t *outcome,
                         struct event_base *base, memory_done_cb cb, void *arg);

/* ---- the exact-match answer cache (cache.h makes the keys) ---- */

/* The live answer under key: {content, model}, or NULL. */
json_t *memory_cache_get(struct memory_reader *r, const char *key);
/* Keep an answer for ttl_ms (written in the background; user_id may be NULL). */
void memory_cache_put(struct memory *m, const char *tenant, const char *user_id, const char *key,
                      const char *content, const char *model, int64_t ttl_ms);

/* ---- retrieval (recall.h) ---- */

/* A lookup's scope is the user (user_id, or else the session's user; without one, the
 * session). Whether some turn in it has an embedding (else relevance has nothing to compare:
 * no need to wait for the question's); and offer p (recall.h) its latest limit user and
 * assistant turns, newest first, with their embeddings. */
int memory_recall_embedded(struct memory_reader *r, const char *tenant, const char *user_id,
                           const char *session_id);
void memory_recall(struct memory_reader *r, const char *tenant, const char *user_id,
                   const char *session_id, size_t limit, struct recall_pick *p);
/* Turns waiting for their embedding, due by now_ms: [{sid, seq, profile, text, attempts}];
 * and when the next is due (-1: none waits). */
json_t *memory_to_embed(struct memory_reader *r, int64_t now_ms, size_t limit);
int64_t memory_embed_next(struct memory_reader *r);
/* An embedder's outcome for one turn of memory_to_embed(). */
struct memory_embedding {
    int64_t sid, seq;  /* the row's */
    const char *model; /* the embedding model */
    const char *text;  /* the text embedded: kept only while the turn still reads so */
    const float *vec;  /* dim floats (copied); or NULL with error (none will be made: the turn
                          leaves the queue) or retry_ms (> 0: tried again then) */
    size_t dim;
    const char *error;
    int64_t retry_ms;
};
/* Store the outcomes; cb(arg, ok) on base's thread once committed. */
void memory_embedded(struct memory *m, const struct memory_embedding *v, size_t n,
                     struct event_base *base, memory_done_cb cb, void *arg);

/* ---- session lifecycle and the webhook outbox ---- */

/* RUNNING sessions (all tenants) not updated since before_ms: [{tenant, id, profile}], at
 * most limit. */
json_t *memory_idle_sessions(struct memory_reader *r, int64_t before_ms, size_t limit);
/* Pending webhook deliveries due by now_ms: [{id, notice_id, tenant, session_id, url, event,
 * payload (text), attempts}]; and when the next is due (-1: none pending). */
json_t *memory_outbox_due(struct memory_reader *r, int64_t now_ms, size_t limit);
int64_t memory_outbox_next(struct memory_reader *r);
/* Record a try's outcome: {id, status: pending|delivered|failed, next_ms, code?, error?};
 * cb(arg, ok) on base's thread once committed. */
void memory_outbox_result(struct memory *m, json_t *result, struct event_base *base,
                          memory_done_cb cb, void *arg);
/* A tenant's deliveries, newest first ({"deliveries": [...], "next": cursor|null}); NULL
 * filters match all. */
json_t *memory_deliveries(struct memory_reader *r, const char *tenant, const char *status,
                          const char *session_id, const char *notice_id, int64_t before,
                          size_t limit);
/* Make an undelivered notice due now, its tries counted afresh; ok 0 when there is none. */
void memory_delivery_retry(struct memory *m, const char *tenant, const char *notice_id,
                           struct event_base *base, memory_done_cb cb, void *arg);

#endif
