/*
 * store_batch: a list of writes that belong together (one request's turns, one REST change),
 * built on a worker and handed to the store's writer (store.h), which applies it through its
 * backend (store_backend.h) in one transaction with the batches queued beside it.
 *
 * The structs are open to the store and its backends: the writer queues batches through
 * their next field, and a backend reads their ops. Everyone else builds them with the
 * functions below.
 *
 * Ownership: a batch is its builder's until store_submit() takes it. Batches copy the JSON
 * they are given (deeply), except the turns of store_batch_insert, _update and _replace:
 * those are on every recorded request's path, and a copy made only to be freed again cost a
 * worker more than the rest of the recording. The batch keeps a reference to them instead,
 * and the caller must change neither the turn nor anything inside it afterwards (the working
 * set replaces a turn, never changes it). The writer only reads them, and jansson's
 * reference counts are atomic (JANSSON_THREAD_SAFE_REFCOUNT, checked at build time), so
 * either thread may drop the last reference.
 */
#ifndef MEMPROXY_STORE_BATCH_H
#define MEMPROXY_STORE_BATCH_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifndef JANSSON_THREAD_SAFE_REFCOUNT
#error "batches share turns with the writer thread: jansson must count references atomically"
#endif

/* ok: 1 when committed, 0 when the transaction failed (logged; the rows are not there). */
typedef void (*store_done_cb)(void *arg, int ok);

enum store_op_kind {
    STORE_OP_SESSION,
    STORE_OP_WINDOW,
    STORE_OP_WINDOW_TURNS,
    STORE_OP_INSERT,
    STORE_OP_UPDATE,
    STORE_OP_REPLACE,
    STORE_OP_STOP,
    STORE_OP_DELETE,
    STORE_OP_RUNTIME,
    STORE_OP_PATCH,
    /* in batches of no one session (store_batch_new(tenant, NULL)) */
    STORE_OP_IMPORT,
    STORE_OP_USER_ERASE,
    STORE_OP_USER_MEMORY,
    STORE_OP_OUTBOX_RESULT,
    STORE_OP_OUTBOX_RETRY,
    STORE_OP_SUMMARY,
    STORE_OP_CACHE_PUT,
    STORE_OP_EMBEDDING
};

struct store_op {
    enum store_op_kind kind;
    json_t *data;
    char *id;      /* the user id (session, user ops) or the notice id (outbox retry) */
    char *profile; /* a session op's profile */
    uint64_t hash;
    void *blob; /* an embedding's floats */
    size_t blob_len;
};

struct store_inbox;

struct store_batch {
    char *tenant, *session_id;
    struct store_op *ops;
    size_t n, cap;
    struct event_base *base;
    store_done_cb cb;
    void *arg;
    store_done_cb on_writer; /* store_batch_on_writer() */
    void *on_writer_arg;
    int ok;
    int existing;    /* the session must exist already: never created by this batch */
    int embed;       /* its user and assistant turns wait for their embedding */
    int reopened;    /* its session is running again (see store_reopen) */
    int running;     /* the writer knows its session is running (the sids cache) */
    int deferred;    /* may wait for the next batch (store_batch_defer) */
    int64_t version; /* a shared backend's: the session's version after this batch (0: none) */
    struct store_inbox *inbox; /* its base's, when attached (store_attach) */
    /* an embedding made already for a user turn's text (store_batch_known_embedding) */
    char *known_model, *known_text;
    void *known_vec;
    size_t known_len;
    struct store_batch *next;
};

/* A batch of one session's writes; with session_id NULL, a batch of the tenant's writes that
 * belong to no one session (import, the user and outbox operations below). */
struct store_batch *store_batch_new(const char *tenant, const char *session_id);
/* Create the session if new (RUNNING); set user and profile when given (NULL keeps them). */
void store_batch_session(struct store_batch *b, const char *user_id, const char *profile);
/* The client's latest system messages (NULL keeps the stored ones; written to the session's
 * row) and window fingerprint (reconcile's window_hash, written to a table of its own;
 * memory.c decides when either is worth writing). */
void store_batch_window(struct store_batch *b, json_t *system, uint64_t window_hash);
/* How many turns the client's window spans (sessions.window_turns): what a running call's
 * summary (summary_threshold) leaves to the window. */
void store_batch_window_turns(struct store_batch *b, int64_t turns);
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
 * facts} or null when none was made, from_ms, to_ms}. The summary replaces the user's (its
 * range widened to cover both), facts seen are reinforced and the user's others decay; the
 * session is marked summarized and its waiting dumps become due, carrying the summary. A pass
 * over a running call has {session_id, memory: null, seq (the last turn it covered),
 * call_summary (text, or null when none was made)}: only the call's own summary and how far
 * it goes are stored; the user's memory is left to the stop. With retry_ms instead (a stopped
 * session's summary failed upstream), the session waits again until then, its tries counted, and
 * its dumps go now without it. */
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
 * while the upstream answers — on SQLite; on a shared backend (PostgreSQL, where a commit
 * is a round trip and a sync) they wait for the reply even then (store_expect above 0). */
void store_batch_defer(struct store_batch *b);

/* cb(arg, ok) runs on the writer thread as soon as b's transaction is over, before b's report
 * is handed to the submitter's thread (store_submit): for bookkeeping that must not wait for
 * that thread's loop. It must be short and thread-safe. */
void store_batch_on_writer(struct store_batch *b, store_done_cb cb, void *arg);

/* A group (batches linked through next) in the order of its sessions' rows, by tenant and
 * session id; returns its new head. For a shared database: each session's first batch locks
 * that row until the COMMIT (pgsql_exec.c), and every write of the session comes after it.
 * Two replicas whose groups took the same two sessions' rows in opposite orders waited for
 * each other until PostgreSQL's deadlock_timeout (a second by default) ended one of them,
 * stalling every call of that replica; taken in one order, no cycle forms. Stable: a
 * session's batches keep their order. A batch of no session keeps its place, the session
 * batches before and after it sorted apart: it may depend on them (an embedding of a turn
 * written before it), or they on it. */
struct store_batch *store_batch_order(struct store_batch *list);

#endif
