#include "memory/store.h"

#include "base/jtext.h"
#include "base/log.h"
#include "base/util.h"

#include "memory/history.h"
#include "memory/recall.h"
#include "memory/walbuf.h"

#include <openssl/rand.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <string.h>

#ifndef JANSSON_THREAD_SAFE_REFCOUNT
#error "batches share turns with the writer thread: jansson must count references atomically"
#endif

/* ---- schema ---- */

static const char *const store_migrations[STORE_SCHEMA_VERSION] = {
    /* 1: sessions and their turns */
    "CREATE TABLE sessions ("
    "  sid INTEGER PRIMARY KEY,"
    "  tenant TEXT NOT NULL, id TEXT NOT NULL,"
    "  user_id TEXT, profile TEXT NOT NULL DEFAULT 'default',"
    "  status TEXT NOT NULL DEFAULT 'RUNNING',"
    "  labels TEXT NOT NULL DEFAULT '{}', metadata TEXT NOT NULL DEFAULT '{}',"
    "  system_messages TEXT, window_hash INTEGER,"
    "  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, stopped_ms INTEGER,"
    "  UNIQUE (tenant, id));"
    "CREATE INDEX sessions_user ON sessions(tenant, user_id);"
    "CREATE TABLE messages ("
    "  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL, turn_id INTEGER NOT NULL, turn_idx INTEGER NOT NULL,"
    "  role TEXT NOT NULL, content TEXT NOT NULL, source TEXT,"
    "  interrupted INTEGER NOT NULL DEFAULT 0, interrupt_ms INTEGER, original TEXT,"
    "  metadata TEXT NOT NULL DEFAULT '{}', tool_calls TEXT, tool_call_id TEXT, name TEXT,"
    "  timestamp_ms INTEGER NOT NULL, importance REAL NOT NULL,"
    "  model TEXT, usage TEXT, finish_reason TEXT, ttft_us INTEGER, latency_us INTEGER,"
    "  PRIMARY KEY (sid, seq),"
    "  UNIQUE (sid, turn_id, role, turn_idx)) WITHOUT ROWID;",
    /* 2: retention finds idle sessions without a scan */
    "CREATE INDEX sessions_updated ON sessions(updated_ms);",
    /* 3: what inject_memory adds: a session's runtime system messages (set over REST), a
     * user's long-term summary and facts */
    "ALTER TABLE sessions ADD COLUMN runtime_system TEXT;"
    "CREATE TABLE user_summaries ("
    "  tenant TEXT NOT NULL, user_id TEXT NOT NULL, summary TEXT NOT NULL,"
    "  from_ms INTEGER, to_ms INTEGER, updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant, user_id));"
    "CREATE TABLE user_facts ("
    "  tenant TEXT NOT NULL, user_id TEXT NOT NULL, category TEXT NOT NULL, key TEXT NOT NULL,"
    "  value TEXT NOT NULL, confidence REAL NOT NULL DEFAULT 0.5, seen INTEGER NOT NULL DEFAULT 1,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant, user_id, category, key));",
    /* 4: runtime params (set over REST); the webhook outbox, filled in the transaction that
     * stops a session and emptied by deliveries */
    "ALTER TABLE sessions ADD COLUMN runtime_params TEXT;"
    "CREATE TABLE webhook_outbox ("
    "  id INTEGER PRIMARY KEY, notice_id TEXT NOT NULL UNIQUE,"
    "  tenant TEXT NOT NULL, session_id TEXT NOT NULL, user_id TEXT,"
    "  url TEXT NOT NULL, event INTEGER NOT NULL, payload TEXT NOT NULL,"
    "  status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
    "  next_ms INTEGER NOT NULL, last_status INTEGER, last_error TEXT,"
    "  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);"
    "CREATE INDEX outbox_due ON webhook_outbox(status, next_ms);"
    "CREATE INDEX outbox_tenant ON webhook_outbox(tenant, id);"
    "CREATE INDEX outbox_user ON webhook_outbox(tenant, user_id);",
    /* 5: which stopped sessions still wait for their summary (NULL; 0 = none wanted) */
    "ALTER TABLE sessions ADD COLUMN summarized_ms INTEGER;"
    "UPDATE sessions SET summarized_ms = 0;"
    "CREATE INDEX sessions_to_summarize ON sessions(stopped_ms) WHERE summarized_ms IS NULL;",
    /* 6: how far a running session was summarized (summary_threshold) */
    "ALTER TABLE sessions ADD COLUMN summarized_seq INTEGER NOT NULL DEFAULT 0;",
    /* 7: the exact-match answer cache (cache.h) */
    "CREATE TABLE answer_cache ("
    "  key TEXT PRIMARY KEY, tenant TEXT NOT NULL, user_id TEXT, content TEXT NOT NULL,"
    "  model TEXT, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX answer_cache_user ON answer_cache(tenant, user_id);"
    "CREATE INDEX answer_cache_expires ON answer_cache(expires_ms);",
    /* 8: retrieval (recall.h): the turns waiting for their embedding, the embeddings (gone
     * with their turn); a user's sessions newest first without a sort */
    "CREATE TABLE embed_queue ("
    "  sid INTEGER NOT NULL, seq INTEGER NOT NULL,"
    "  attempts INTEGER NOT NULL DEFAULT 0, next_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (sid, seq),"
    "  FOREIGN KEY (sid, seq) REFERENCES messages(sid, seq) ON DELETE CASCADE) WITHOUT ROWID;"
    "CREATE INDEX embed_queue_due ON embed_queue(next_ms);"
    "CREATE TABLE embeddings ("
    "  sid INTEGER NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, vec BLOB, error TEXT,"
    "  created_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (sid, seq),"
    "  FOREIGN KEY (sid, seq) REFERENCES messages(sid, seq) ON DELETE CASCADE) WITHOUT ROWID;"
    "DROP INDEX sessions_user;"
    "CREATE INDEX sessions_user ON sessions(tenant, user_id, created_ms);",
    /* 9: a stopped session's summary that failed upstream is tried again later */
    ("ALTER TABLE sessions ADD COLUMN summary_tries INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE sessions ADD COLUMN summary_next_ms INTEGER NOT NULL DEFAULT 0;"),
};

static const char store_pragmas[] = "PRAGMA journal_mode=WAL;"
                                    "PRAGMA synchronous=NORMAL;"
                                    "PRAGMA foreign_keys=ON;"
                                    "PRAGMA journal_size_limit=67108864;";

/* ---- types ---- */

enum store_op_kind {
    STORE_OP_SESSION,
    STORE_OP_WINDOW,
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
    char *a, *b; /* user_id, profile */
    uint64_t hash;
    void *blob; /* an embedding's floats */
    size_t blob_len;
};

/* Completions waiting for an attached base's loop: the writer appends and writes efd after
 * unlocking; the base's event on efd takes the whole list. Where the backend has edge
 * triggering (epoll) the event is edge-triggered and efd is read only every 65536th wake-up
 * (so its counter stays far from full): each write is one wake-up, and the read level
 * triggering needs each time (a system call, on the response's path) is saved. */
struct store_inbox {
    struct event_base *base;
    struct event *ev;
    int efd;
    int edge;       /* ev is edge-triggered: efd is read only now and then */
    unsigned wakes; /* on the base's thread */
    pthread_mutex_t mu;
    struct store_batch *head, *tail;
    struct store_inbox *next;
};

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
    int existing;              /* the session must exist already: never created by this batch */
    int embed;                 /* its user and assistant turns wait for their embedding */
    int reopened;              /* its session is running again (see store_reopen) */
    int running;               /* the writer knows its session is running (the sids cache) */
    int deferred;              /* may wait for the next batch (store_batch_defer) */
    struct store_inbox *inbox; /* its base's, when attached (store_attach) */
    /* an embedding made already for a user turn's text (store_batch_known_embedding) */
    char *known_model, *known_text;
    void *known_vec;
    size_t known_len;
    struct store_batch *next;
};

enum store_stmt {
    ST_SESSION_ENSURE,
    ST_SESSION_SID,
    ST_SESSION_SET,
    ST_SESSION_WINDOW,
    ST_INSERT,
    ST_UPDATE,
    ST_REPLACE,
    ST_STOP,
    ST_REOPEN,
    ST_DELETE,
    ST_RUNTIME,
    ST_PATCH,
    ST_PURGE,
    ST_PURGE_OUTBOX,
    ST_OUTBOX_ADD,
    ST_OUTBOX_RESULT,
    ST_OUTBOX_RETRY,
    ST_IMPORT,
    ST_USER_SESSIONS,
    ST_USER_SUMMARY_DEL,
    ST_USER_FACTS_DEL,
    ST_USER_OUTBOX_DEL,
    ST_USER_CACHE_DEL,
    ST_CACHE_PUT,
    ST_CACHE_EXPIRE,
    ST_SUMMARY_SET,
    ST_FACT_SET,
    ST_SUMMARY_FOLD,
    ST_FACT_SEEN,
    ST_FACT_DECAY,
    ST_FACT_FORGET,
    ST_SUMMARIZED,
    ST_SUMMARIZED_SEQ,
    ST_SUMMARY_RETRY,
    ST_OUTBOX_SUMMARY,
    ST_EMBED_QUEUE,
    ST_EMBED_FORGET,
    ST_EMBED_PUT,
    ST_EMBED_DONE,
    ST_EMBED_RETRY,
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST__COUNT
};

/* Facts (DESIGN §10): one seen again gains confidence, one not seen in a summary pass of its
 * user loses a tenth of it, and one under the floor is forgotten. */
#define STORE_FACT_BOOST "0.1"
#define STORE_FACT_DECAY "0.9"
#define STORE_FACT_FLOOR "0.1"

static const char *const store_sql[ST__COUNT] = {
    [ST_SESSION_ENSURE] = "INSERT INTO sessions(tenant, id, created_ms, updated_ms) "
                          "VALUES (?1, ?2, ?3, ?3) "
                          "ON CONFLICT(tenant, id) DO UPDATE SET updated_ms = excluded.updated_ms",
    [ST_SESSION_SID] = "SELECT sid FROM sessions WHERE tenant = ?1 AND id = ?2",
    [ST_SESSION_SET] = "UPDATE sessions SET user_id = COALESCE(?2, user_id), "
                       "profile = COALESCE(?3, profile) WHERE sid = ?1",
    [ST_SESSION_WINDOW] = "UPDATE sessions SET system_messages = COALESCE(?2, system_messages), "
                          "window_hash = ?3 WHERE sid = ?1",
    [ST_INSERT] = "INSERT INTO messages(sid, seq, turn_id, turn_idx, role, content, "
                  "source, interrupted, interrupt_ms, original, metadata, tool_calls, "
                  "tool_call_id, name, timestamp_ms, importance, model, usage, finish_reason, "
                  "ttft_us, latency_us) VALUES (?1, ?21, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                  "?12, ?13, ?14, ?15, ?16, ?17, ?18, "
                  "?19, ?20) ON CONFLICT (sid, turn_id, role, turn_idx) DO NOTHING",
    [ST_UPDATE] = "UPDATE messages SET content = ?3, original = ?4, interrupted = ?5, "
                  "interrupt_ms = ?6 WHERE sid = ?1 AND seq = ?2",
    [ST_REPLACE] = "UPDATE messages SET content = ?3, original = ?4, interrupted = ?5, "
                   "interrupt_ms = ?6, model = ?7, usage = ?8, finish_reason = ?9, ttft_us = ?10, "
                   "latency_us = ?11, timestamp_ms = ?12, tool_calls = ?13 "
                   "WHERE sid = ?1 AND seq = ?2",
    [ST_STOP] = "UPDATE sessions SET status = 'STOPPED', stopped_ms = ?2, updated_ms = ?2, "
                "summarized_ms = CASE WHEN ?4 AND user_id IS NOT NULL THEN NULL ELSE 0 END "
                "WHERE sid = ?1 AND status != 'STOPPED' AND updated_ms < ?3",
    [ST_REOPEN] = "UPDATE sessions SET status = 'RUNNING', stopped_ms = NULL, updated_ms = ?2 "
                  "WHERE sid = ?1 AND status = 'STOPPED'",
    [ST_DELETE] = "DELETE FROM sessions WHERE sid = ?1",
    [ST_RUNTIME] = "UPDATE sessions SET runtime_system = COALESCE(?2, runtime_system), "
                   "runtime_params = COALESCE(?4, runtime_params), updated_ms = ?3 WHERE sid = ?1",
    [ST_PATCH] = "UPDATE sessions SET labels = COALESCE(?2, labels), metadata = COALESCE(?3, "
                 "metadata), user_id = COALESCE(?4, user_id), updated_ms = ?5 WHERE sid = ?1",
    [ST_PURGE] = "DELETE FROM sessions WHERE sid IN (SELECT sid FROM sessions "
                 "WHERE updated_ms < ?1 LIMIT ?2)",
    [ST_PURGE_OUTBOX] = "DELETE FROM webhook_outbox WHERE id IN (SELECT id FROM webhook_outbox "
                        "WHERE status != 'pending' AND updated_ms < ?1 LIMIT ?2)",
    [ST_OUTBOX_ADD] = "INSERT INTO webhook_outbox(notice_id, tenant, session_id, user_id, url, "
                      "event, payload, next_ms, created_ms, updated_ms) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
    [ST_OUTBOX_RESULT] = "UPDATE webhook_outbox SET status = ?2, attempts = attempts + 1, "
                         "next_ms = ?3, last_status = ?4, last_error = ?5, updated_ms = ?6 "
                         "WHERE id = ?1 AND status = 'pending'",
    [ST_OUTBOX_RETRY] = "UPDATE webhook_outbox SET status = 'pending', attempts = 0, "
                        "next_ms = ?3, updated_ms = ?3 WHERE tenant = ?1 AND notice_id = ?2 "
                        "AND status != 'delivered'",
    [ST_IMPORT] = "INSERT INTO sessions(tenant, id, user_id, profile, status, labels, metadata, "
                  "system_messages, window_hash, created_ms, updated_ms, stopped_ms, "
                  "runtime_system, runtime_params) VALUES (?1, ?2, ?3, ?4, ?5, "
                  "COALESCE(?6, '{}'), COALESCE(?7, '{}'), ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [ST_USER_SESSIONS] = "DELETE FROM sessions WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_SUMMARY_DEL] = "DELETE FROM user_summaries WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_FACTS_DEL] = "DELETE FROM user_facts WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_OUTBOX_DEL] = "DELETE FROM webhook_outbox WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_CACHE_DEL] = "DELETE FROM answer_cache WHERE tenant = ?1 AND user_id = ?2",
    [ST_CACHE_PUT] = "INSERT OR REPLACE INTO answer_cache(key, tenant, user_id, content, model, "
                     "created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_CACHE_EXPIRE] = "DELETE FROM answer_cache WHERE key IN (SELECT key FROM answer_cache "
                        "WHERE expires_ms < ?1 LIMIT 16)",
    [ST_SUMMARY_SET] = "INSERT INTO user_summaries(tenant, user_id, summary, from_ms, to_ms, "
                       "updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_FACT_SET] = "INSERT INTO user_facts(tenant, user_id, category, key, value, confidence, "
                    "seen, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7) "
                    "ON CONFLICT(tenant, user_id, category, key) DO UPDATE SET "
                    "value = excluded.value, confidence = excluded.confidence, "
                    "updated_ms = excluded.updated_ms",
    [ST_SUMMARY_FOLD] = "INSERT INTO user_summaries(tenant, user_id, summary, from_ms, to_ms, "
                        "updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                        "ON CONFLICT(tenant, user_id) DO UPDATE SET summary = excluded.summary, "
                        "from_ms = MIN(COALESCE(from_ms, excluded.from_ms), excluded.from_ms), "
                        "to_ms = MAX(COALESCE(to_ms, excluded.to_ms), excluded.to_ms), "
                        "updated_ms = excluded.updated_ms",
    [ST_FACT_SEEN] = "INSERT INTO user_facts(tenant, user_id, category, key, value, confidence, "
                     "seen, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7) "
                     "ON CONFLICT(tenant, user_id, category, key) DO UPDATE SET "
                     "value = excluded.value, confidence = MIN(1.0, MAX(confidence, "
                     "excluded.confidence) + " STORE_FACT_BOOST "), seen = seen + 1, "
                     "updated_ms = excluded.updated_ms",
    [ST_FACT_DECAY] = "UPDATE user_facts SET confidence = confidence * " STORE_FACT_DECAY
                      " WHERE tenant = ?1 AND user_id = ?2 AND updated_ms < ?3",
    [ST_FACT_FORGET] = "DELETE FROM user_facts WHERE tenant = ?1 AND user_id = ?2 AND "
                       "confidence < " STORE_FACT_FLOOR,
    [ST_SUMMARIZED] = "UPDATE sessions SET summarized_ms = ?3 WHERE tenant = ?1 AND id = ?2",
    [ST_SUMMARIZED_SEQ] = "UPDATE sessions SET summarized_seq = MAX(summarized_seq, ?3) "
                          "WHERE tenant = ?1 AND id = ?2",
    [ST_SUMMARY_RETRY] = "UPDATE sessions SET summary_tries = summary_tries + 1, "
                         "summary_next_ms = ?3 WHERE tenant = ?1 AND id = ?2",
    [ST_OUTBOX_SUMMARY] = "UPDATE webhook_outbox SET payload = CASE WHEN ?3 IS NULL THEN payload "
                          "ELSE json_set(payload, '$.summary', ?3) END, next_ms = MIN(next_ms, ?4) "
                          "WHERE tenant = ?1 AND session_id = ?2 AND status = 'pending'",
    [ST_EMBED_QUEUE] = "INSERT OR REPLACE INTO embed_queue(sid, seq, attempts, next_ms) "
                       "SELECT sid, seq, 0, ?3 FROM messages WHERE sid = ?1 AND seq = ?2 "
                       "AND role IN ('user', 'assistant') AND content <> ''",
    [ST_EMBED_FORGET] = "DELETE FROM embeddings WHERE sid = ?1 AND seq = ?2",
    /* only while the turn still reads as what was embedded (an interruption may have changed
     * it meanwhile: it was queued again) */
    [ST_EMBED_PUT] = "INSERT OR REPLACE INTO embeddings(sid, seq, model, vec, error, created_ms) "
                     "SELECT sid, seq, ?3, ?4, ?5, ?6 FROM messages "
                     "WHERE sid = ?1 AND seq = ?2 AND content = ?7",
    [ST_EMBED_DONE] = "DELETE FROM embed_queue WHERE sid = ?1 AND seq = ?2",
    [ST_EMBED_RETRY] = "UPDATE embed_queue SET attempts = attempts + 1, next_ms = ?3 "
                       "WHERE sid = ?1 AND seq = ?2",
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
};

/* The writer remembers the sessions it has seen (key -> [sid, last touch, running]) so a
 * batch of a known session costs no lookup; updated_ms (idle time, retention) is refreshed at
 * most this often per session. "running" is set once the writer has made the session running
 * (store_reopen) and dropped with the entry when a stop runs, so a recorded turn does not
 * UPDATE its session's status every time. Cleared when it grows past its cap and whenever a
 * write fails (a rolled back batch may have created or reopened the session it remembers). */
#define STORE_TOUCH_MS  60000
#define STORE_SID_CACHE 100000

/* The writer's checkpoints: when a commit leaves at least this many frames in the WAL, the
 * writer copies them into the database after it has reported the group (SQLite's own
 * automatic checkpoint, which it replaces on the write connection, uses the same count but
 * runs inside the COMMIT). Why after: a checkpoint syncs the WAL and then the database
 * (synchronous=NORMAL), ~3 ms of fdatasync on the benchmark's VM and more on a network disk;
 * inside the COMMIT every response waiting for that commit waited for the disk too, one
 * recorded reply in ~250 in a call (~4 frames a request) and in ~1,000 when the window is
 * replayed. The writer still runs it itself, between groups: a checkpoint beside a writer
 * that keeps appending never catches up with it, and the WAL restarts from its start only
 * once a checkpoint has copied every frame. */
#define STORE_CKPT_FRAMES 1000

struct store {
    char *path;
    struct store_opts opts;
    sqlite3 *db; /* the write connection: the writer thread's alone after open */
    sqlite3_stmt *stmt[ST__COUNT];
    pthread_t thread;
    pthread_mutex_t mu;
    /* The writer sleeps on wake while sleeping is set; whoever queues work or asks for the
     * stop clears it and posts once. A semaphore, not a condition variable: glibc takes a
     * condition variable's mutex back in its contended state, so each wake-up cost the
     * writer one more futex call at its next unlock, with nobody to wake. */
    sem_t wake;
    int sleeping;
    /* For store_gather, about the batches someone waits for (with a completion callback):
     * when the queue's first such batch arrived (0: it holds none), the gap between it and
     * the one before it, and when the last one arrived (CLOCK_MONOTONIC ns). */
    uint64_t wait_ns, wait_gap_ns, last_wait_ns;
    pthread_cond_t idle_cv; /* the writer finished a group */
    struct store_batch *head, *tail;
    /* When the writer takes the queue (CLOCK_MONOTONIC ns): 0 once it holds a batch not
     * deferred, else commit_delay_us after its first deferred batch arrived. */
    uint64_t due_ns;
    int busy;                    /* the writer holds a group not yet completed */
    json_t *sids;                /* the writer's session cache (see STORE_TOUCH_MS) */
    int embedded;                /* the embeddings table may hold a row */
    struct store_inbox *inboxes; /* attached bases (store_attach) */
    pthread_rwlock_t inboxes_lock;
    /* written by the writer, read by /metrics */
    atomic_uint_fast64_t n_tx, n_ok, n_failed, n_delayed, n_ckpt;
    /* the writer's alone: frames in the WAL after its last commit (store_wal_hook), and
     * whether the last checkpoint failed (logged once, until one succeeds again) */
    int wal_frames, ckpt_failing;
    atomic_int_fast64_t expected; /* store_expect */
    struct store_reader *wr;      /* reads inside the writer's transaction (the stop-time dump) */
    int stopping;
    int64_t next_purge_ms;
};

enum store_rstmt {
    RS_TURNS,
    RS_TURNS_OF,
    RS_SESSION,
    RS_SUMMARY,
    RS_FACTS,
    RS_LIST,
    RS_OUTBOX_DUE,
    RS_OUTBOX_NEXT,
    RS_DELIVERIES,
    RS_IDLE,
    RS_TO_SUMMARIZE,
    RS_SUMMARY_NEXT,
    RS_RUNNING_TO_SUMMARIZE,
    RS_CACHE_GET,
    RS_TO_EMBED,
    RS_EMBED_NEXT,
    RS_SESSION_USER,
    RS_RECALL_USER, /* each *_USER statement is followed by its *_SESSION twin */
    RS_RECALL_SESSION,
    RS_EMBEDDED_USER,
    RS_EMBEDDED_SESSION,
    RS__COUNT
};

struct store_reader {
    sqlite3 *db;
    int own_db; /* 0 for the writer's own reader, which borrows the write connection */
    sqlite3_stmt *stmt[RS__COUNT];
};

static int store_reader_prepare(struct store_reader *r);

/* ---- batches ---- */

struct store_batch *store_batch_new(const char *tenant, const char *session_id)
{
    struct store_batch *b = xcalloc(1, sizeof(*b));
    b->tenant = xstrdup(tenant);
    b->session_id = session_id ? xstrdup(session_id) : NULL;
    return b;
}

/* data is copied unless shared: then the batch keeps a reference (store.h, Ownership). */
static struct store_op *store_batch_push(struct store_batch *b, enum store_op_kind kind,
                                         json_t *data, int shared)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 8;
        b->ops = xrealloc(b->ops, b->cap * sizeof(*b->ops));
    }
    struct store_op *op = &b->ops[b->n++];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    if (data != NULL)
        op->data = shared ? json_incref(data) : json_deep_copy(data);
    return op;
}

static struct store_op *store_batch_add(struct store_batch *b, enum store_op_kind kind,
                                        json_t *data)
{
    return store_batch_push(b, kind, data, 0);
}

void store_batch_session(struct store_batch *b, const char *user_id, const char *profile)
{
    struct store_op *op = store_batch_add(b, STORE_OP_SESSION, NULL);
    op->a = user_id ? xstrdup(user_id) : NULL;
    op->b = profile ? xstrdup(profile) : NULL;
}

void store_batch_window(struct store_batch *b, json_t *system, uint64_t window_hash)
{
    store_batch_add(b, STORE_OP_WINDOW, system)->hash = window_hash;
}

void store_batch_insert(struct store_batch *b, json_t *turn)
{
    store_batch_push(b, STORE_OP_INSERT, turn, 1);
}

void store_batch_update(struct store_batch *b, json_t *update)
{
    store_batch_push(b, STORE_OP_UPDATE, update, 1);
}

void store_batch_replace(struct store_batch *b, json_t *turn)
{
    store_batch_push(b, STORE_OP_REPLACE, turn, 1);
}

void store_batch_embed(struct store_batch *b)
{
    b->embed = 1;
}

void store_batch_known_embedding(struct store_batch *b, const char *model, const char *text,
                                 const float *vec, size_t dim)
{
    free(b->known_model);
    free(b->known_text);
    free(b->known_vec);
    b->known_model = xstrdup(model);
    b->known_text = xstrdup(text);
    b->known_len = dim * sizeof(float);
    b->known_vec = xmalloc(b->known_len);
    memcpy(b->known_vec, vec, b->known_len);
}

void store_batch_embedding(struct store_batch *b, const struct store_embedding *e)
{
    json_t *d = json_pack("{s:I, s:I, s:s, s:s, s:s?, s:I}", "sid", (json_int_t)e->sid, "seq",
                          (json_int_t)e->seq, "model", e->model, "text", e->text, "error", e->error,
                          "retry_ms", (json_int_t)e->retry_ms);
    struct store_op *op = store_batch_add(b, STORE_OP_EMBEDDING, d);
    json_decref(d);
    if (e->vec != NULL && e->error == NULL && e->retry_ms == 0) {
        op->blob_len = e->dim * sizeof(float);
        op->blob = xmalloc(op->blob_len);
        memcpy(op->blob, e->vec, op->blob_len);
    }
}

void store_batch_existing(struct store_batch *b)
{
    b->existing = 1;
}

void store_batch_stop(struct store_batch *b, json_t *how)
{
    store_batch_add(b, STORE_OP_STOP, how);
}

void store_batch_delete(struct store_batch *b)
{
    store_batch_add(b, STORE_OP_DELETE, NULL);
}

void store_batch_runtime(struct store_batch *b, json_t *system_messages)
{
    store_batch_add(b, STORE_OP_RUNTIME, system_messages);
}

void store_batch_patch(struct store_batch *b, json_t *fields)
{
    store_batch_add(b, STORE_OP_PATCH, fields);
}

void store_batch_import(struct store_batch *b, json_t *snapshot)
{
    store_batch_add(b, STORE_OP_IMPORT, snapshot);
}

void store_batch_user_erase(struct store_batch *b, const char *user_id)
{
    store_batch_add(b, STORE_OP_USER_ERASE, NULL)->a = xstrdup(user_id);
}

void store_batch_user_memory(struct store_batch *b, const char *user_id, json_t *memory)
{
    store_batch_add(b, STORE_OP_USER_MEMORY, memory)->a = xstrdup(user_id);
}

void store_batch_outbox_result(struct store_batch *b, json_t *result)
{
    store_batch_add(b, STORE_OP_OUTBOX_RESULT, result);
}

void store_batch_cache_put(struct store_batch *b, json_t *entry)
{
    store_batch_add(b, STORE_OP_CACHE_PUT, entry);
}

void store_batch_summary(struct store_batch *b, json_t *outcome)
{
    store_batch_add(b, STORE_OP_SUMMARY, outcome);
}

void store_batch_outbox_retry(struct store_batch *b, const char *notice_id)
{
    store_batch_add(b, STORE_OP_OUTBOX_RETRY, NULL)->a = xstrdup(notice_id);
}

void store_batch_defer(struct store_batch *b)
{
    b->deferred = 1;
}

void store_batch_on_writer(struct store_batch *b, store_done_cb cb, void *arg)
{
    b->on_writer = cb;
    b->on_writer_arg = arg;
}

size_t store_batch_ops(const struct store_batch *b)
{
    return b->n;
}

void store_batch_free(struct store_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n; i++) {
        json_decref(b->ops[i].data);
        free(b->ops[i].a);
        free(b->ops[i].b);
        free(b->ops[i].blob);
    }
    free(b->ops);
    free(b->tenant);
    free(b->session_id);
    free(b->known_model);
    free(b->known_text);
    free(b->known_vec);
    free(b);
}

/* ---- binding turns to columns ---- */

static void store_bind_text(sqlite3_stmt *s, int i, json_t *v)
{
    if (json_is_string(v))
        sqlite3_bind_text(s, i, json_string_value(v), (int)json_string_length(v), SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

/* JSON values (objects, arrays) are stored as their compact text. */
static void store_bind_json(sqlite3_stmt *s, int i, json_t *v)
{
    char *text = json_is_object(v) || json_is_array(v) ? jtext_dump(v, NULL) : NULL;
    if (text)
        sqlite3_bind_text(s, i, text, -1, free);
    else
        sqlite3_bind_null(s, i);
}

static void store_bind_int(sqlite3_stmt *s, int i, json_t *v)
{
    if (json_is_integer(v))
        sqlite3_bind_int64(s, i, json_integer_value(v));
    else
        sqlite3_bind_null(s, i);
}

static void store_bind_turn(sqlite3_stmt *s, json_t *t)
{
    json_t *meta = json_object_get(t, "metadata");
    store_bind_int(s, 2, json_object_get(t, "turn_id"));
    store_bind_int(s, 3, json_object_get(t, "turn_idx"));
    store_bind_text(s, 4, json_object_get(t, "role"));
    store_bind_text(s, 5, json_object_get(t, "content"));
    store_bind_text(s, 6, json_object_get(t, "source"));
    sqlite3_bind_int(s, 7, json_is_true(json_object_get(t, "interrupted")));
    store_bind_int(s, 8, json_object_get(t, "interrupt_timestamp"));
    store_bind_text(s, 9, json_object_get(t, "original"));
    if (json_is_object(meta))
        store_bind_json(s, 10, meta);
    else
        sqlite3_bind_text(s, 10, "{}", 2, SQLITE_STATIC);
    store_bind_json(s, 11, json_object_get(t, "tool_calls"));
    store_bind_text(s, 12, json_object_get(t, "tool_call_id"));
    store_bind_text(s, 13, json_object_get(t, "name"));
    store_bind_int(s, 14, json_object_get(t, "timestamp"));
    sqlite3_bind_double(s, 15, json_number_value(json_object_get(t, "importance")));
    store_bind_text(s, 16, json_object_get(t, "model"));
    store_bind_json(s, 17, json_object_get(t, "usage"));
    store_bind_text(s, 18, json_object_get(t, "finish_reason"));
    store_bind_int(s, 19, json_object_get(t, "ttft_us"));
    store_bind_int(s, 20, json_object_get(t, "latency_us"));
    store_bind_int(s, 21, json_object_get(t, "seq"));
}

/* A replaced reply's own columns (ST_REPLACE's ?7..?13). */
static void store_bind_reply(sqlite3_stmt *s, json_t *t)
{
    store_bind_text(s, 7, json_object_get(t, "model"));
    store_bind_json(s, 8, json_object_get(t, "usage"));
    store_bind_text(s, 9, json_object_get(t, "finish_reason"));
    store_bind_int(s, 10, json_object_get(t, "ttft_us"));
    store_bind_int(s, 11, json_object_get(t, "latency_us"));
    store_bind_int(s, 12, json_object_get(t, "timestamp"));
    store_bind_json(s, 13, json_object_get(t, "tool_calls"));
}

/* ---- the writer ---- */

static int store_step(sqlite3 *db, sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        log_error("store: %s", sqlite3_errmsg(db));
        return -1;
    }
    return 0;
}

static int store_run(struct store *st, enum store_stmt which)
{
    return store_step(st->db, st->stmt[which]);
}

/* The id of a session that must exist, or -1 (the batch then fails). */
static int64_t store_sid_existing(struct store *st, struct store_batch *b)
{
    sqlite3_stmt *s = st->stmt[ST_SESSION_SID];
    sqlite3_bind_text(s, 1, b->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, b->session_id, -1, SQLITE_STATIC);
    int64_t sid = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return sid;
}

/* The session's row id, creating the session when new and touching updated_ms. */
static int64_t store_sid_lookup(struct store *st, struct store_batch *b, int64_t now)
{
    sqlite3_stmt *s = st->stmt[ST_SESSION_ENSURE];
    sqlite3_bind_text(s, 1, b->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, b->session_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now);
    if (store_step(st->db, s) != 0)
        return -1;
    return store_sid_existing(st, b);
}
/* The batch's session's key in the writer's session cache. Malloc'd. */
static char *store_sid_key(const struct store_batch *b)
{
    return xjoin(b->tenant, '\x1f', b->session_id);
}

static int64_t store_sid(struct store *st, struct store_batch *b)
{
    int64_t now = util_wall_ms(), sid;
    if (b->existing)
        return store_sid_existing(st, b);
    char *key = store_sid_key(b);
    json_t *hit = json_object_get(st->sids, key);
    if (hit != NULL && now - json_integer_value(json_array_get(hit, 1)) < st->opts.touch_ms) {
        sid = json_integer_value(json_array_get(hit, 0));
        b->running = json_is_true(json_array_get(hit, 2));
    } else {
        sid = store_sid_lookup(st, b, now);
        if (json_object_size(st->sids) >= STORE_SID_CACHE)
            json_object_clear(st->sids);
        if (sid >= 0)
            json_object_set_new(st->sids, key, json_pack("[I, I, b]", (json_int_t)sid, now, 0));
    }
    free(key);
    return sid;
}

/* The batch's session is running now (it was reopened in this transaction). */
static void store_sid_running(struct store *st, struct store_batch *b)
{
    char *key = store_sid_key(b);
    json_t *hit = json_object_get(st->sids, key);
    if (hit != NULL)
        json_array_set_new(hit, 2, json_true());
    free(key);
}

static void store_sid_forget(struct store *st, struct store_batch *b)
{
    char *key = store_sid_key(b);
    json_object_del(st->sids, key);
    free(key);
}

/* A notice id: random, so that it stays unique across databases and restarts; the event
 * type after it, as in Agora's ids. */
static void store_notice_id(char *out, size_t len, json_int_t event)
{
    unsigned char raw[12];
    char hex[2 * sizeof(raw) + 1];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        abort(); /* the CSPRNG failing is not something to carry on from */
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    snprintf(out, len, "%s:%" JSON_INTEGER_FORMAT, hex, event);
}

/* One outbox row per hook for the session b just stopped, its payload read inside this
 * transaction (so it holds exactly what was committed with it). */
static int store_outbox_fill(struct store *st, struct store_batch *b, json_t *how, int64_t now)
{
    json_t *sess = store_session_get(st->wr, b->tenant, b->session_id);
    json_t *turns = store_turns(st->wr, b->tenant, b->session_id, INT64_MIN, 0), *h;
    json_t *hooks = json_object_get(how, "hooks");
    /* a summary on its way: the dumps wait for it, at most hold_ms */
    int64_t due = now;
    if (json_is_true(json_object_get(how, "summarize")) &&
        json_is_string(json_object_get(sess, "user_id")))
        due += json_integer_value(json_object_get(how, "hold_ms"));
    sqlite3_stmt *s = st->stmt[ST_OUTBOX_ADD];
    size_t i;
    int rc = sess ? 0 : -1;
    json_array_foreach(hooks, i, h)
    {
        json_int_t event = json_integer_value(json_object_get(h, "event"));
        json_t *payload = history_payload(sess, turns, (int)event);
        char notice[64];
        store_notice_id(notice, sizeof(notice), event);
        sqlite3_bind_text(s, 1, notice, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, b->tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, b->session_id, -1, SQLITE_STATIC);
        store_bind_text(s, 4, json_object_get(sess, "user_id"));
        store_bind_text(s, 5, json_object_get(h, "url"));
        sqlite3_bind_int64(s, 6, event);
        store_bind_json(s, 7, payload);
        sqlite3_bind_int64(s, 8, due);
        sqlite3_bind_int64(s, 9, now);
        json_decref(payload);
        if (rc != 0 || (rc = store_step(st->db, s)) != 0)
            break;
    }
    json_decref(sess);
    json_decref(turns);
    return rc;
}

/* Stop the session (unless it is stopped already, or had a request since how.idle_before)
 * and queue its dumps. */
static int store_exec_stop(struct store *st, struct store_batch *b, int64_t sid, json_t *how)
{
    int64_t now = util_wall_ms();
    json_t *idle = json_object_get(how, "idle_before");
    sqlite3_stmt *s = st->stmt[ST_STOP];
    sqlite3_bind_int64(s, 1, sid);
    sqlite3_bind_int64(s, 2, now);
    sqlite3_bind_int64(s, 3, json_is_integer(idle) ? json_integer_value(idle) : INT64_MAX);
    sqlite3_bind_int(s, 4, json_is_true(json_object_get(how, "summarize")));
    store_sid_forget(st, b); /* no longer known to be running */
    if (store_step(st->db, s) != 0)
        return -1;
    if (sqlite3_changes(st->db) == 0 || json_array_size(json_object_get(how, "hooks")) == 0)
        return 0;
    return store_outbox_fill(st, b, how, now);
}

/* The REST API's changes to a session row. */
static int store_exec_session_op(struct store *st, int64_t sid, struct store_op *op)
{
    int64_t now = util_wall_ms();
    sqlite3_stmt *s = NULL;
    switch (op->kind) {
    case STORE_OP_DELETE:
        s = st->stmt[ST_DELETE];
        json_object_clear(st->sids); /* its id must not be reused */
        break;
    case STORE_OP_RUNTIME:
        s = st->stmt[ST_RUNTIME];
        store_bind_json(s, 2, json_object_get(op->data, "system_messages"));
        sqlite3_bind_int64(s, 3, now);
        store_bind_json(s, 4, json_object_get(op->data, "params"));
        break;
    default: /* STORE_OP_PATCH */
        s = st->stmt[ST_PATCH];
        store_bind_json(s, 2, json_object_get(op->data, "labels"));
        store_bind_json(s, 3, json_object_get(op->data, "metadata"));
        store_bind_text(s, 4, json_object_get(op->data, "user_id"));
        sqlite3_bind_int64(s, 5, now);
        break;
    }
    sqlite3_bind_int64(s, 1, sid);
    return store_step(st->db, s);
}

/* Bind tenant and user as ?1, ?2 of s and run it. */
static int store_exec_user(struct store *st, enum store_stmt which, const char *tenant,
                           const char *user)
{
    sqlite3_stmt *s = st->stmt[which];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
    return store_step(st->db, s);
}

/* A user's summary through which (ST_SUMMARY_SET or ST_SUMMARY_FOLD). */
static int store_put_summary(struct store *st, enum store_stmt which, const char *tenant,
                             const char *user, json_t *text, json_t *from, json_t *to, int64_t now)
{
    sqlite3_stmt *s = st->stmt[which];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
    store_bind_text(s, 3, text);
    store_bind_int(s, 4, from);
    store_bind_int(s, 5, to);
    sqlite3_bind_int64(s, 6, now);
    return store_step(st->db, s);
}

/* A user's facts through which (ST_FACT_SET or ST_FACT_SEEN). */
static int store_put_facts(struct store *st, enum store_stmt which, const char *tenant,
                           const char *user, json_t *facts, int64_t now)
{
    sqlite3_stmt *s = st->stmt[which];
    json_t *f;
    size_t i;
    json_array_foreach(facts, i, f)
    {
        sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
        store_bind_text(s, 3, json_object_get(f, "category"));
        store_bind_text(s, 4, json_object_get(f, "key"));
        store_bind_text(s, 5, json_object_get(f, "value"));
        sqlite3_bind_double(s, 6, json_number_value(json_object_get(f, "confidence")));
        sqlite3_bind_int64(s, 7, now);
        if (store_step(st->db, s) != 0)
            return -1;
    }
    return 0;
}

/* Replace what is remembered about a user with m ({summary?, facts?}; NULL: nothing). */
static int store_exec_user_memory(struct store *st, const char *tenant, const char *user, json_t *m)
{
    int64_t now = util_wall_ms();
    json_t *sum = json_object_get(m, "summary");
    if (store_exec_user(st, ST_USER_SUMMARY_DEL, tenant, user) != 0 ||
        store_exec_user(st, ST_USER_FACTS_DEL, tenant, user) != 0)
        return -1;
    if (json_is_object(sum) &&
        store_put_summary(st, ST_SUMMARY_SET, tenant, user, json_object_get(sum, "text"),
                          json_object_get(sum, "from_ms"), json_object_get(sum, "to_ms"), now) != 0)
        return -1;
    return store_put_facts(st, ST_FACT_SET, tenant, user, json_object_get(m, "facts"), now);
}

/* Everything held about a user: sessions (turns by cascade), summary, facts, dumps. */
static int store_exec_user_erase(struct store *st, const char *tenant, const char *user)
{
    json_object_clear(st->sids); /* deleted sessions' ids must not be reused */
    return store_exec_user(st, ST_USER_SESSIONS, tenant, user) ||
                   store_exec_user(st, ST_USER_SUMMARY_DEL, tenant, user) ||
                   store_exec_user(st, ST_USER_FACTS_DEL, tenant, user) ||
                   store_exec_user(st, ST_USER_OUTBOX_DEL, tenant, user) ||
                   store_exec_user(st, ST_USER_CACHE_DEL, tenant, user)
               ? -1
               : 0;
}

/* A session from an export (snapshot.h, checked): the row as it was, then its turns. Fails
 * when the tenant has a session by that id. */
static int store_exec_import(struct store *st, const char *tenant, json_t *snap)
{
    static const char *const cols[] = {"user_id",     "profile",        "status",
                                       "labels",      "metadata",       "system_messages",
                                       "window_hash", "created_ms",     "updated_ms",
                                       "stopped_ms",  "runtime_system", "runtime_params"};
    json_t *sess = json_object_get(snap, "session"), *t;
    sqlite3_stmt *s = st->stmt[ST_IMPORT];
    size_t i;
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    store_bind_text(s, 2, json_object_get(sess, "id"));
    for (i = 0; i < UTIL_ARRAY_LEN(cols); i++) {
        json_t *v = json_object_get(sess, cols[i]);
        if (json_is_integer(v))
            store_bind_int(s, (int)i + 3, v);
        else if (json_is_string(v))
            store_bind_text(s, (int)i + 3, v);
        else
            store_bind_json(s, (int)i + 3, v);
    }
    if (store_step(st->db, s) != 0)
        return -1;
    int64_t sid = sqlite3_last_insert_rowid(st->db);
    s = st->stmt[ST_INSERT];
    json_array_foreach(json_object_get(snap, "turns"), i, t)
    {
        store_bind_turn(s, t);
        sqlite3_bind_int64(s, 1, sid);
        if (store_step(st->db, s) != 0)
            return -1;
    }
    return 0;
}

static int store_exec_outbox(struct store *st, const char *tenant, struct store_op *op)
{
    int64_t now = util_wall_ms();
    sqlite3_stmt *s;
    if (op->kind == STORE_OP_OUTBOX_RETRY) {
        s = st->stmt[ST_OUTBOX_RETRY];
        sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, op->a, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, now);
        return store_step(st->db, s) != 0 || sqlite3_changes(st->db) == 0 ? -1 : 0;
    }
    s = st->stmt[ST_OUTBOX_RESULT];
    store_bind_int(s, 1, json_object_get(op->data, "id"));
    store_bind_text(s, 2, json_object_get(op->data, "status"));
    store_bind_int(s, 3, json_object_get(op->data, "next_ms"));
    store_bind_int(s, 4, json_object_get(op->data, "code"));
    store_bind_text(s, 5, json_object_get(op->data, "error"));
    sqlite3_bind_int64(s, 6, now);
    return store_step(st->db, s);
}

/* A summary pass's outcome for a stopped session (store_batch_summary()). */
static int store_exec_summary(struct store *st, const char *tenant, json_t *d)
{
    int64_t now = util_wall_ms();
    const char *sid = json_string_value(json_object_get(d, "session_id"));
    const char *user = json_string_value(json_object_get(d, "user_id"));
    json_t *mem = json_object_get(d, "memory");
    json_t *text = json_object_get(json_object_get(mem, "summary"), "text");
    sqlite3_stmt *s;
    if (json_is_string(text)) {
        if (store_put_summary(st, ST_SUMMARY_FOLD, tenant, user, text,
                              json_object_get(d, "from_ms"), json_object_get(d, "to_ms"),
                              now) != 0 ||
            store_put_facts(st, ST_FACT_SEEN, tenant, user, json_object_get(mem, "facts"), now) !=
                0)
            return -1;
        s = st->stmt[ST_FACT_DECAY];
        sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, now);
        if (store_step(st->db, s) != 0 || store_exec_user(st, ST_FACT_FORGET, tenant, user) != 0)
            return -1;
    }
    json_t *seq = json_object_get(d, "seq");        /* a running session's pass: how far it went */
    json_t *retry = json_object_get(d, "retry_ms"); /* failed upstream: it waits again */
    s = st->stmt[retry ? ST_SUMMARY_RETRY : seq ? ST_SUMMARIZED_SEQ : ST_SUMMARIZED];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, sid, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3,
                       retry ? json_integer_value(retry)
                       : seq ? json_integer_value(seq)
                             : now);
    if (store_step(st->db, s) != 0)
        return -1;
    if (seq != NULL)
        return 0;                    /* the session goes on: no dumps wait for this one */
    s = st->stmt[ST_OUTBOX_SUMMARY]; /* the dumps waiting for it go now, with it if made */
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, sid, -1, SQLITE_STATIC);
    store_bind_text(s, 3, text);
    sqlite3_bind_int64(s, 4, now);
    return store_step(st->db, s);
}

/* An answer for the cache ({key, user_id, content, model, expires_ms}); a few expired entries
 * go with each put, so the table does not grow with dead answers. */
static int store_exec_cache_put(struct store *st, const char *tenant, json_t *d)
{
    int64_t now = util_wall_ms();
    sqlite3_stmt *s = st->stmt[ST_CACHE_PUT];
    store_bind_text(s, 1, json_object_get(d, "key"));
    sqlite3_bind_text(s, 2, tenant, -1, SQLITE_STATIC);
    store_bind_text(s, 3, json_object_get(d, "user_id"));
    store_bind_text(s, 4, json_object_get(d, "content"));
    store_bind_text(s, 5, json_object_get(d, "model"));
    sqlite3_bind_int64(s, 6, now);
    store_bind_int(s, 7, json_object_get(d, "expires_ms"));
    if (store_step(st->db, s) != 0)
        return -1;
    s = st->stmt[ST_CACHE_EXPIRE];
    sqlite3_bind_int64(s, 1, now);
    return store_step(st->db, s);
}

/* The ops of batches that belong to no one session. */
/* Bind ?1 sid, ?2 seq of a turn's statement. */
static void store_bind_turn_key(sqlite3_stmt *s, int64_t sid, int64_t seq)
{
    sqlite3_bind_int64(s, 1, sid);
    sqlite3_bind_int64(s, 2, seq);
}

/* A user turn that reads exactly as the batch's known embedding's text takes that embedding
 * (1) instead of waiting in the queue; 0 when it does not apply, -1 on failure. */
static int store_embed_known(struct store *st, struct store_batch *b, int64_t sid, json_t *turn)
{
    const char *role = json_string_value(json_object_get(turn, "role"));
    if (b->known_vec == NULL || role == NULL || strcmp(role, "user") != 0)
        return 0;
    sqlite3_stmt *s = st->stmt[ST_EMBED_PUT];
    st->embedded = 1;
    store_bind_turn_key(s, sid, json_integer_value(json_object_get(turn, "seq")));
    sqlite3_bind_text(s, 3, b->known_model, -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 4, b->known_vec, (int)b->known_len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, util_wall_ms());
    sqlite3_bind_text(s, 7, b->known_text, -1, SQLITE_STATIC);
    if (store_step(st->db, s) != 0)
        return -1;
    return sqlite3_changes(st->db) > 0;
}

/* A turn was written: an embedding of its earlier text is stale (changed), and a batch that
 * wants embeddings queues it (ST_EMBED_QUEUE keeps to user and assistant turns with text). */
static int store_embed_turn(struct store *st, struct store_batch *b, int64_t sid, json_t *turn,
                            int changed)
{
    int64_t seq = json_integer_value(json_object_get(turn, "seq"));
    sqlite3_stmt *s = st->stmt[ST_EMBED_FORGET];
    if (changed && st->embedded) { /* else no embedding can be stale */
        store_bind_turn_key(s, sid, seq);
        if (store_step(st->db, s) != 0)
            return -1;
    }
    if (!b->embed)
        return 0;
    int known = store_embed_known(st, b, sid, turn);
    if (known != 0)
        return known > 0 ? 0 : -1;
    s = st->stmt[ST_EMBED_QUEUE];
    store_bind_turn_key(s, sid, seq);
    sqlite3_bind_int64(s, 3, util_wall_ms());
    return store_step(st->db, s);
}

/* An embedder's outcome for one turn: tried again later, or its embedding (or why none can
 * be made) stored and the turn taken off the queue. */
static int store_exec_embedding(struct store *st, struct store_op *op)
{
    json_t *d = op->data;
    int64_t sid = json_integer_value(json_object_get(d, "sid"));
    int64_t seq = json_integer_value(json_object_get(d, "seq"));
    json_int_t retry = json_integer_value(json_object_get(d, "retry_ms"));
    sqlite3_stmt *s = st->stmt[retry > 0 ? ST_EMBED_RETRY : ST_EMBED_PUT];
    st->embedded |= retry <= 0;
    store_bind_turn_key(s, sid, seq);
    if (retry > 0) {
        sqlite3_bind_int64(s, 3, retry);
        return store_step(st->db, s);
    }
    store_bind_text(s, 3, json_object_get(d, "model"));
    if (op->blob != NULL)
        sqlite3_bind_blob(s, 4, op->blob, (int)op->blob_len, SQLITE_STATIC);
    store_bind_text(s, 5, json_object_get(d, "error"));
    sqlite3_bind_int64(s, 6, util_wall_ms());
    store_bind_text(s, 7, json_object_get(d, "text"));
    if (store_step(st->db, s) != 0)
        return -1;
    if (sqlite3_changes(st->db) == 0)
        return 0; /* changed or gone meanwhile: it stays queued (or went with its turn) */
    s = st->stmt[ST_EMBED_DONE];
    store_bind_turn_key(s, sid, seq);
    return store_step(st->db, s);
}

static int store_exec_global(struct store *st, struct store_batch *b, struct store_op *op)
{
    switch (op->kind) {
    case STORE_OP_IMPORT:
        return store_exec_import(st, b->tenant, op->data);
    case STORE_OP_USER_ERASE:
        return store_exec_user_erase(st, b->tenant, op->a);
    case STORE_OP_USER_MEMORY:
        return store_exec_user_memory(st, b->tenant, op->a, op->data);
    case STORE_OP_SUMMARY:
        return store_exec_summary(st, b->tenant, op->data);
    case STORE_OP_CACHE_PUT:
        return store_exec_cache_put(st, b->tenant, op->data);
    case STORE_OP_EMBEDDING:
        return store_exec_embedding(st, op);
    default:
        return store_exec_outbox(st, b->tenant, op);
    }
}

/* A turn written to a stopped session (its call went on, or a reply landed after the stop)
 * makes it running again: its dump went out without that turn, and the next stop (REST, an
 * Agora notification, the idle timeout) sends a new one that holds it. Once per batch. */
static int store_reopen(struct store *st, struct store_batch *b, int64_t sid)
{
    if (b->reopened || b->running)
        return 0;
    b->reopened = 1;
    sqlite3_stmt *s = st->stmt[ST_REOPEN];
    sqlite3_bind_int64(s, 1, sid);
    sqlite3_bind_int64(s, 2, util_wall_ms());
    if (store_step(st->db, s) != 0)
        return -1;
    store_sid_running(st, b);
    return 0;
}

static int store_exec_op(struct store *st, struct store_batch *b, int64_t sid, struct store_op *op)
{
    sqlite3_stmt *s = NULL;
    if (b->session_id == NULL)
        return store_exec_global(st, b, op);
    switch (op->kind) {
    case STORE_OP_SESSION:
        s = st->stmt[ST_SESSION_SET];
        sqlite3_bind_text(s, 2, op->a, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, op->b, -1, SQLITE_STATIC);
        break;
    case STORE_OP_WINDOW:
        s = st->stmt[ST_SESSION_WINDOW];
        store_bind_json(s, 2, op->data);
        sqlite3_bind_int64(s, 3, (sqlite3_int64)op->hash);
        break;
    case STORE_OP_INSERT:
        s = st->stmt[ST_INSERT];
        store_bind_turn(s, op->data);
        break;
    case STORE_OP_STOP:
        return store_exec_stop(st, b, sid, op->data);
    case STORE_OP_DELETE:
    case STORE_OP_RUNTIME:
    case STORE_OP_PATCH:
        return store_exec_session_op(st, sid, op);
    default: /* a global op in a session's batch: a caller's mistake */
        log_error("store: an operation of no session was queued with session '%s'", b->session_id);
        return -1;
    case STORE_OP_UPDATE:
    case STORE_OP_REPLACE:
        s = st->stmt[op->kind == STORE_OP_UPDATE ? ST_UPDATE : ST_REPLACE];
        store_bind_int(s, 2, json_object_get(op->data, "seq"));
        store_bind_text(s, 3, json_object_get(op->data, "content"));
        store_bind_text(s, 4, json_object_get(op->data, "original"));
        sqlite3_bind_int(s, 5, json_is_true(json_object_get(op->data, "interrupted")));
        store_bind_int(s, 6, json_object_get(op->data, "interrupt_timestamp"));
        if (op->kind == STORE_OP_REPLACE)
            store_bind_reply(s, op->data);
        break;
    }
    sqlite3_bind_int64(s, 1, sid);
    if (store_step(st->db, s) != 0)
        return -1;
    if (op->kind != STORE_OP_INSERT && op->kind != STORE_OP_UPDATE && op->kind != STORE_OP_REPLACE)
        return 0;
    int written = sqlite3_changes(st->db) > 0; /* an insert repeated is skipped */
    if (!written)
        return 0;
    if (store_reopen(st, b, sid) != 0)
        return -1;
    return store_embed_turn(st, b, sid, op->data, op->kind != STORE_OP_INSERT);
}

static int store_sql_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    log_error("store: %s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    return -1;
}

/* One batch inside the group's transaction. No savepoint around it: a batch that fails
 * makes the whole transaction roll back (store_commit_group then runs each batch alone). A
 * savepoint per batch cost two more statements and, in SQLite, a copy of every page the
 * batch touches into the statement journal, on every batch, for a failure that is rare. */
static void store_apply(struct store *st, struct store_batch *b)
{
    b->reopened = b->running = 0; /* a batch run again starts afresh */
    int64_t sid = b->session_id ? store_sid(st, b) : 0;
    b->ok = sid >= 0;
    for (size_t i = 0; b->ok && i < b->n; i++)
        b->ok = store_exec_op(st, b, sid, &b->ops[i]) == 0;
}

/* ---- retention ---- */

#define STORE_PURGE_EVERY_MS (3600 * 1000LL)
#define STORE_PURGE_CHUNK    200 /* sessions per transaction: the writer never stalls long */

/* Run a chunked DELETE (?1 = before, ?2 = chunk) until it deletes less than a chunk, a
 * transaction per chunk so that commits queued meanwhile wait at most one chunk. The rows
 * deleted, or -1 on failure. */
static long store_purge_chunks(struct store *st, enum store_stmt which, int64_t before)
{
    sqlite3_stmt *s = st->stmt[which];
    long total = 0;
    for (;;) {
        if (store_run(st, ST_BEGIN) != 0)
            return -1;
        sqlite3_bind_int64(s, 1, before);
        sqlite3_bind_int(s, 2, STORE_PURGE_CHUNK);
        int ok = store_step(st->db, s) == 0;
        int n = ok ? sqlite3_changes(st->db) : 0;
        if (store_run(st, ok ? ST_COMMIT : ST_ROLLBACK) != 0 || !ok)
            return -1;
        total += n;
        if (n < STORE_PURGE_CHUNK)
            return total;
    }
}

/* Delete sessions idle past the retention period (their turns go by cascade) and webhook
 * deliveries finished (delivered or failed) as long ago. */
static void store_purge(struct store *st)
{
    int64_t before = util_wall_ms() - st->opts.retention_ms;
    json_object_clear(st->sids); /* a purged session's id must not be reused */
    long sessions = store_purge_chunks(st, ST_PURGE, before);
    long dumps = store_purge_chunks(st, ST_PURGE_OUTBOX, before);
    if (sessions > 0 || dumps > 0)
        log_info("store: retention: deleted %ld session(s) and %ld finished webhook "
                 "deliveries older than %lld day(s)",
                 sessions > 0 ? sessions : 0, dumps > 0 ? dumps : 0,
                 (long long)(st->opts.retention_ms / 86400000LL));
}

/* On the submitter's thread (or the writer's, without a base): its callback, then the free. */
static void store_report(struct store_batch *b)
{
    if (b->cb != NULL)
        b->cb(b->arg, b->ok);
    store_batch_free(b);
}

static void store_done_trampoline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    store_report(arg);
}

/* Queue b on its base's inbox; the first completion of a list wakes the base, after the
 * inbox's lock is released (so the woken loop never waits for it). */
static void store_inbox_put(struct store_inbox *in, struct store_batch *b)
{
    static const uint64_t one = 1;
    b->next = NULL;
    pthread_mutex_lock(&in->mu);
    int was_empty = in->head == NULL;
    if (in->tail != NULL)
        in->tail->next = b;
    else
        in->head = b;
    in->tail = b;
    pthread_mutex_unlock(&in->mu);
    if (was_empty && write(in->efd, &one, sizeof(one)) != sizeof(one) && errno != EAGAIN)
        abort(); /* an eventfd write fails only when the counter is full (EAGAIN: awake anyway) */
}

/* On the base's thread: run every completion queued so far, in order. */
static void store_inbox_run(struct store_inbox *in)
{
    pthread_mutex_lock(&in->mu);
    struct store_batch *b = in->head;
    in->head = in->tail = NULL;
    pthread_mutex_unlock(&in->mu);
    while (b != NULL) {
        struct store_batch *next = b->next;
        store_report(b);
        b = next;
    }
}

static void store_inbox_cb(evutil_socket_t fd, short what, void *arg)
{
    struct store_inbox *in = arg;
    uint64_t n;
    (void)what;
    if ((!in->edge || ++in->wakes % 65536 == 0) && read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        log_warn("store: reading a completion eventfd: %s", strerror(errno));
    store_inbox_run(in);
}

/* Hand the result to the submitter's thread: through its base's inbox when attached, else
 * event_base_once (which writes the base's wake-up while holding the base's lock, so the
 * woken loop often waited for that lock); or run it here when it gave no base.
 * event_base_once fails only without memory. */
static void store_complete(struct store_batch *b)
{
    static const struct timeval now = {0, 0};
    if (b->on_writer != NULL)
        b->on_writer(b->on_writer_arg, b->ok);
    if (b->cb == NULL || b->base == NULL)
        store_report(b);
    else if (b->inbox != NULL)
        store_inbox_put(b->inbox, b);
    else if (event_base_once(b->base, -1, EV_TIMEOUT, store_done_trampoline, b, &now) != 0)
        abort();
}

static struct store_inbox *store_inbox_of(struct store *st, struct event_base *base)
{
    struct store_inbox *in;
    pthread_rwlock_rdlock(&st->inboxes_lock);
    for (in = st->inboxes; in != NULL && in->base != base; in = in->next)
        ;
    pthread_rwlock_unlock(&st->inboxes_lock);
    return in;
}

int store_attach(struct store *st, struct event_base *base)
{
    struct store_inbox *in = xcalloc(1, sizeof(*in));
    in->base = base;
    in->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    in->edge = (event_base_get_features(base) & EV_FEATURE_ET) != 0;
    short kind = (short)(EV_READ | EV_PERSIST | (in->edge ? EV_ET : 0));
    in->ev = in->efd >= 0 ? event_new(base, in->efd, kind, store_inbox_cb, in) : NULL;
    if (in->ev == NULL || event_add(in->ev, NULL) != 0) {
        if (in->ev != NULL)
            event_free(in->ev);
        if (in->efd >= 0)
            close(in->efd);
        free(in);
        return -1;
    }
    pthread_mutex_init(&in->mu, NULL);
    pthread_rwlock_wrlock(&st->inboxes_lock);
    in->next = st->inboxes;
    st->inboxes = in;
    pthread_rwlock_unlock(&st->inboxes_lock);
    return 0;
}

void store_detach(struct store *st, struct event_base *base)
{
    struct store_inbox **pp, *in = NULL;
    store_drain(st); /* no completion may still be on its way to the inbox */
    pthread_rwlock_wrlock(&st->inboxes_lock);
    for (pp = &st->inboxes; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == base) {
            in = *pp;
            *pp = in->next;
            break;
        }
    }
    pthread_rwlock_unlock(&st->inboxes_lock);
    if (in == NULL)
        return;
    store_inbox_run(in); /* anything its loop did not run (the caller drained first) */
    event_free(in->ev);
    close(in->efd);
    pthread_mutex_destroy(&in->mu);
    free(in);
}

/* After each commit on the write connection (SQLite calls it with the frames now in the WAL):
 * only noted here, for store_checkpoint. */
static int store_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    struct store *st = arg;
    (void)db;
    (void)name;
    st->wal_frames = frames;
    return SQLITE_OK;
}

/* On the writer, with everything committed so far reported (STORE_CKPT_FRAMES). PASSIVE, as
 * SQLite's own: it copies what no reader still needs and never waits; a WAL a reader holds
 * back, or a checkpoint that failed (a full disk), is tried again after the next commit. */
static void store_checkpoint(struct store *st)
{
    if (st->wal_frames < STORE_CKPT_FRAMES)
        return;
    st->wal_frames = 0;
    int rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc == SQLITE_OK) {
        atomic_fetch_add_explicit(&st->n_ckpt, 1, memory_order_relaxed);
        if (st->ckpt_failing)
            log_info("store: checkpoints work again");
        st->ckpt_failing = 0;
    } else if (rc != SQLITE_BUSY && !st->ckpt_failing) {
        log_warn("store: checkpoint: %s (the WAL grows until one succeeds)",
                 sqlite3_errmsg(st->db));
        st->ckpt_failing = 1;
    }
}

/* Run the batches of list in one transaction: 0 when it committed; -1 when a batch or the
 * commit failed and it was rolled back (the writer's session cache is then forgotten, as it
 * may name rows that are gone). */
static int store_transaction(struct store *st, struct store_batch *list)
{
    int ok = store_run(st, ST_BEGIN) == 0;
    for (struct store_batch *b = list; ok && b != NULL; b = b->next) {
        store_apply(st, b);
        ok = b->ok;
    }
    if (ok && store_run(st, ST_COMMIT) == 0) {
        atomic_fetch_add_explicit(&st->n_tx, 1, memory_order_relaxed);
        return 0;
    }
    store_run(st, ST_ROLLBACK);
    json_object_clear(st->sids);
    return -1;
}

/* After a group's transaction failed: each batch in a transaction of its own. */
static void store_one_by_one(struct store *st, struct store_batch *list)
{
    for (struct store_batch *b = list; b != NULL;) {
        struct store_batch *next = b->next;
        b->next = NULL;
        b->ok = store_transaction(st, b) == 0;
        b->next = next;
        b = next;
    }
}

/* Commit a group of batches in one transaction, then report each. When it fails, each batch
 * runs again alone: the one that failed fails alone and the others still land. */
static void store_commit_group(struct store *st, struct store_batch *list)
{
    if (store_transaction(st, list) != 0) {
        if (list->next == NULL)
            list->ok = 0; /* alone: it may have failed only at the commit */
        else
            store_one_by_one(st, list);
    }
    for (struct store_batch *b = list; b != NULL; b = b->next)
        atomic_fetch_add_explicit(b->ok ? &st->n_ok : &st->n_failed, 1, memory_order_relaxed);
    while (list != NULL) {
        struct store_batch *next = list->next;
        store_complete(list);
        list = next;
    }
    store_checkpoint(st);
}

/* Sleep until work is queued or due, a stop is asked for, or the next purge is due (st->mu
 * held on entry and on return). A post that comes after a timeout wakes the next wait at
 * once: the caller's loop checks again and sleeps again. */
static void store_wait(struct store *st)
{
    uint64_t until = 0; /* CLOCK_MONOTONIC ns; 0: no timeout */
    if (st->head != NULL) {
        until = st->due_ns;
    } else if (st->opts.retention_ms > 0) {
        int64_t ms = st->next_purge_ms - util_wall_ms();
        until = util_now_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000u;
    }
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u),
                          .tv_nsec = (long)(until % 1000000000u)};
    st->sleeping = 1;
    pthread_mutex_unlock(&st->mu);
    while ((until ? sem_clockwait(&st->wake, CLOCK_MONOTONIC, &ts) : sem_wait(&st->wake)) != 0 &&
           errno == EINTR)
        ;
    pthread_mutex_lock(&st->mu);
    st->sleeping = 0;
}

/* Under st->mu: whether the writer has work now (a stop, a queue that is due, a purge). */
static int store_writer_due(struct store *st)
{
    if (st->stopping)
        return 1;
    if (st->head != NULL)
        return st->due_ns == 0 || util_now_ns() >= st->due_ns;
    return st->opts.retention_ms > 0 && util_wall_ms() >= st->next_purge_ms;
}

/* Under st->mu, with a group queued: hold it until commit_delay_us after the first batch in
 * it that someone waits for (a reply whose response ends at the commit), when other replies
 * are on their way (store_expect) and that batch came less than commit_delay_us after the
 * awaited one before it: replies ending that close together, more will share the commit.
 * PostgreSQL's commit_delay, with commit_siblings.
 *
 * What the wait buys: a transaction costs the writer the same (its locks, its WAL writes, a
 * sleep and a wake-up, a report to each worker) however many batches it holds, and while the
 * writer sleeps here the workers submit without waking it. Who is never held: one client at
 * a time, however fast (nothing else is on its way), and slow streams (a real model's
 * replies, seconds long), which end far apart. Only awaited batches count as arrivals: a
 * request's own turns are submitted tens of microseconds before its reply when the upstream
 * is quick, and would make one client look like load. */
static void store_gather(struct store *st)
{
    uint64_t delay_ns = (uint64_t)st->opts.commit_delay_us * 1000u;
    if (delay_ns == 0 || st->stopping || st->wait_ns == 0 || st->wait_gap_ns >= delay_ns ||
        atomic_load_explicit(&st->expected, memory_order_relaxed) <= 0)
        return;
    uint64_t until = st->wait_ns + delay_ns;
    if (until <= util_now_ns())
        return;
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u),
                          .tv_nsec = (long)(until % 1000000000u)};
    atomic_fetch_add_explicit(&st->n_delayed, 1, memory_order_relaxed);
    pthread_mutex_unlock(&st->mu);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    pthread_mutex_lock(&st->mu);
}

/* Under st->mu: whether the caller must post st->wake (after unlocking). */
static int store_wake_needed(struct store *st)
{
    int sleeping = st->sleeping;
    st->sleeping = 0;
    return sleeping;
}

static void *store_writer(void *arg)
{
    struct store *st = arg;
    sigset_t all;
    /* SIGTERM and SIGINT are for the main thread's sigwait(); this thread starts before
     * server_run() blocks them, and one delivered here would end the process undrained */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    log_set_thread_name("store");
    for (;;) {
        pthread_mutex_lock(&st->mu);
        st->busy = 0;
        pthread_cond_broadcast(&st->idle_cv);
        while (!store_writer_due(st))
            store_wait(st);
        if (st->head != NULL)
            store_gather(st);
        struct store_batch *list = st->head;
        st->head = st->tail = NULL;
        st->wait_ns = 0;
        st->due_ns = 0;
        st->busy = list != NULL;
        int stop = st->stopping;
        pthread_mutex_unlock(&st->mu);
        if (list != NULL) {
            store_commit_group(st, list);
        } else if (stop) {
            return NULL;
        } else { /* a purge is due */
            store_purge(st);
            store_checkpoint(st);
            st->next_purge_ms = util_wall_ms() + STORE_PURGE_EVERY_MS;
        }
    }
}

void store_counts(struct store *st, struct store_counts *out)
{
    out->transactions = atomic_load_explicit(&st->n_tx, memory_order_relaxed);
    out->ok = atomic_load_explicit(&st->n_ok, memory_order_relaxed);
    out->failed = atomic_load_explicit(&st->n_failed, memory_order_relaxed);
    out->delayed = atomic_load_explicit(&st->n_delayed, memory_order_relaxed);
    out->checkpoints = atomic_load_explicit(&st->n_ckpt, memory_order_relaxed);
    out->expected = atomic_load_explicit(&st->expected, memory_order_relaxed);
}

void store_drain(struct store *st)
{
    pthread_mutex_lock(&st->mu);
    while (st->head != NULL || st->busy)
        pthread_cond_wait(&st->idle_cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

void store_expect(struct store *st, int delta)
{
    atomic_fetch_add_explicit(&st->expected, delta, memory_order_relaxed);
}

/* Under st->mu, b queued last: b may wait (store_batch_defer) while the writer is not due. */
static int store_defers(struct store *st, const struct store_batch *b)
{
    return b->deferred && b->cb == NULL && st->opts.commit_delay_us > 0 &&
           atomic_load_explicit(&st->expected, memory_order_relaxed) > 1;
}

void store_submit(struct store *st, struct store_batch *b, struct event_base *base,
                  store_done_cb cb, void *arg)
{
    b->base = base;
    b->cb = cb;
    b->arg = arg;
    b->inbox = base != NULL && cb != NULL ? store_inbox_of(st, base) : NULL;
    int awaited = st->opts.commit_delay_us > 0 && b->inbox != NULL;
    pthread_mutex_lock(&st->mu);
    /* read under the lock, so that arrival times follow the queue's order */
    uint64_t now = awaited ? util_now_ns() : 0;
    int first = st->head == NULL, defer = store_defers(st, b);
    if (st->tail)
        st->tail->next = b;
    else
        st->head = b;
    st->tail = b;
    if (now != 0) {
        if (st->wait_ns == 0) {
            st->wait_ns = now;
            st->wait_gap_ns = now - st->last_wait_ns;
        }
        st->last_wait_ns = now;
    }
    if (!defer)
        st->due_ns = 0;
    else if (first)
        st->due_ns = util_now_ns() + (uint64_t)st->opts.commit_delay_us * 1000u;
    st->busy = 1;
    /* a deferred batch behind others wakes nobody: the writer is due already or sleeps
     * until an earlier deadline; the first one wakes it to set its timer */
    int wake = (!defer || first) && store_wake_needed(st);
    pthread_mutex_unlock(&st->mu);
    /* after the unlock: a writer woken while the lock is still held would only go back to
     * sleep on the mutex, and its unlock would then cost a second wake-up */
    if (wake)
        sem_post(&st->wake);
}

/* ---- open, migrate, close ---- */

static int store_migrate(sqlite3 *db, char **err)
{
    sqlite3_stmt *s = NULL;
    int version = 0;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
    if (sqlite3_step(s) == SQLITE_ROW)
        version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (version > STORE_SCHEMA_VERSION) {
        *err = xasprintf("the database has schema version %d; this memproxy knows up to %d",
                         version, STORE_SCHEMA_VERSION);
        return -1;
    }
    for (int v = version; v < STORE_SCHEMA_VERSION; v++) {
        char *sql =
            xasprintf("BEGIN; %s PRAGMA user_version = %d; COMMIT;", store_migrations[v], v + 1);
        char *msg = NULL;
        int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
        free(sql);
        if (rc != SQLITE_OK) {
            *err = xasprintf("migration to schema version %d failed: %s", v + 1, msg ? msg : "?");
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    return 0;
}

/* Whether the embeddings table holds a row (unknown counts as yes). */
static int store_any_embedding(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    int any = 1;
    if (sqlite3_prepare_v2(db, "SELECT EXISTS (SELECT 1 FROM embeddings)", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        any = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return any;
}

static int store_prepare(struct store *st, char **err)
{
    for (int i = 0; i < ST__COUNT; i++) {
        if (sqlite3_prepare_v3(st->db, store_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
                               NULL) != SQLITE_OK) {
            *err = xasprintf("cannot prepare a statement: %s", sqlite3_errmsg(st->db));
            return -1;
        }
    }
    return 0;
}

/* SQLite's process-wide settings, once, before its first use. Memory statistics off: with
 * them on (the default) every allocation and free SQLite makes takes a global mutex to count
 * it, ~36 lock and unlock pairs per transaction, for figures memproxy never reads. */
static void store_sqlite_setup(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    sqlite3_initialize();
}

struct store *store_open(const char *path, const struct store_opts *opts, char **err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, store_sqlite_setup);
    struct store *st = xcalloc(1, sizeof(*st));
    st->path = xstrdup(path);
    st->opts = *opts;
    if (st->opts.touch_ms <= 0 || st->opts.touch_ms > STORE_TOUCH_MS)
        st->opts.touch_ms = STORE_TOUCH_MS;
    st->sids = json_object();
    if (sqlite3_open_v2(path, &st->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        walbuf_register() == 0 ? WALBUF_VFS : NULL) != SQLITE_OK) {
        *err = xasprintf("%s: cannot open: %s", path, sqlite3_errmsg(st->db));
        goto fail;
    }
    sqlite3_busy_timeout(st->db, (int)opts->busy_timeout_ms);
    if (store_sql_exec(st->db, store_pragmas) != 0) {
        *err = xasprintf("%s: cannot set up: %s", path, sqlite3_errmsg(st->db));
        goto fail;
    }
    if (store_migrate(st->db, err) != 0 || store_prepare(st, err) != 0)
        goto fail;
    st->embedded = store_any_embedding(st->db);
    sqlite3_wal_hook(st->db, store_wal_hook, st); /* in place of the automatic checkpoint */
    st->wr = xcalloc(1, sizeof(*st->wr));
    st->wr->db = st->db;
    if (store_reader_prepare(st->wr) != 0) {
        *err = xasprintf("cannot prepare a statement: %s", sqlite3_errmsg(st->db));
        goto fail;
    }
    pthread_mutex_init(&st->mu, NULL);
    sem_init(&st->wake, 0, 0);
    pthread_rwlock_init(&st->inboxes_lock, NULL);
    pthread_cond_init(&st->idle_cv, NULL);
    st->next_purge_ms = util_wall_ms(); /* a first purge at start */
    if (pthread_create(&st->thread, NULL, store_writer, st) != 0)
        abort();
    return st;
fail:
    store_reader_close(st->wr);
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    sqlite3_close(st->db);
    json_decref(st->sids);
    free(st->path);
    free(st);
    return NULL;
}

void store_close(struct store *st)
{
    if (st == NULL)
        return;
    pthread_mutex_lock(&st->mu);
    st->stopping = 1;
    int wake = store_wake_needed(st);
    pthread_mutex_unlock(&st->mu);
    if (wake)
        sem_post(&st->wake);
    pthread_join(st->thread, NULL);
    store_reader_close(st->wr);
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    sqlite3_close(st->db);
    pthread_mutex_destroy(&st->mu);
    sem_destroy(&st->wake);
    if (st->inboxes != NULL) /* a caller's bug; its base may be gone: leave the inbox be */
        log_error("store: closed with an event base still attached");
    pthread_rwlock_destroy(&st->inboxes_lock);
    pthread_cond_destroy(&st->idle_cv);
    json_decref(st->sids);
    free(st->path);
    free(st);
}

/* ---- readers ---- */

#define STORE_TURN_COLS                                                                            \
    "seq, turn_id, turn_idx, role, content, source, interrupted, interrupt_ms, original, "         \
    "metadata, tool_calls, tool_call_id, name, timestamp_ms, importance, model, usage, "           \
    "finish_reason, ttft_us, latency_us"

static const char *const store_rsql[RS__COUNT] = {
    [RS_TURNS] = "SELECT * FROM (SELECT " STORE_TURN_COLS " FROM messages WHERE sid = "
                 "(SELECT sid FROM sessions WHERE tenant = ?1 AND id = ?2) "
                 "AND turn_id >= ?3 ORDER BY seq DESC LIMIT ?4) ORDER BY seq",
    /* ordered by turn_id inside (and the LIMIT keeps SQLite from folding that order away):
     * so the rows are found through the index on (sid, turn_id, ...), one lookup a turn id;
     * ordered by seq, SQLite walks the whole session instead */
    [RS_TURNS_OF] = "SELECT * FROM (SELECT " STORE_TURN_COLS " FROM messages WHERE sid = "
                    "(SELECT sid FROM sessions WHERE tenant = ?1 AND id = ?2) "
                    "AND turn_id IN (SELECT value FROM json_each(?3)) "
                    "ORDER BY turn_id, seq LIMIT ?4) ORDER BY seq",
    [RS_SESSION] = "SELECT id, tenant, user_id, profile, status, system_messages, window_hash, "
                   "created_ms, updated_ms, stopped_ms, (SELECT COUNT(*) FROM messages m WHERE "
                   "m.sid = s.sid), runtime_system, labels, metadata, runtime_params "
                   "FROM sessions s WHERE tenant = ?1 AND id = ?2",
    [RS_SUMMARY] = "SELECT summary, from_ms, to_ms, updated_ms FROM user_summaries "
                   "WHERE tenant = ?1 AND user_id = ?2",
    [RS_FACTS] = "SELECT category, key, value, confidence, seen, updated_ms FROM user_facts "
                 "WHERE tenant = ?1 AND user_id = ?2 ORDER BY confidence DESC, updated_ms DESC "
                 "LIMIT ?3",
    [RS_LIST] = "SELECT id, user_id, profile, status, labels, created_ms, updated_ms, stopped_ms, "
                "sid FROM sessions WHERE tenant = ?1 AND (?2 IS NULL OR user_id = ?2) AND "
                "(?3 IS NULL OR status = ?3) AND sid < ?4 ORDER BY sid DESC LIMIT ?5",
    [RS_OUTBOX_DUE] = "SELECT id, notice_id, tenant, session_id, url, event, payload, attempts "
                      "FROM webhook_outbox WHERE status = 'pending' AND next_ms <= ?1 "
                      "ORDER BY next_ms LIMIT ?2",
    [RS_OUTBOX_NEXT] = "SELECT MIN(next_ms) FROM webhook_outbox WHERE status = 'pending'",
    [RS_DELIVERIES] = "SELECT notice_id, session_id, url, event, status, attempts, next_ms, "
                      "last_status, last_error, created_ms, updated_ms, id FROM webhook_outbox "
                      "WHERE tenant = ?1 AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR "
                      "session_id = ?3) AND (?4 IS NULL OR notice_id = ?4) AND id < ?5 "
                      "ORDER BY id DESC LIMIT ?6",
    [RS_IDLE] = "SELECT tenant, id, profile FROM sessions WHERE status = 'RUNNING' AND "
                "updated_ms < ?1 "
                "ORDER BY updated_ms LIMIT ?2",
    [RS_TO_SUMMARIZE] = "SELECT tenant, id, user_id, profile, created_ms, stopped_ms, "
                        "summary_tries FROM "
                        "sessions WHERE summarized_ms IS NULL AND status = 'STOPPED' "
                        "AND summary_next_ms <= ?1 ORDER BY stopped_ms LIMIT ?2",
    [RS_SUMMARY_NEXT] = "SELECT MIN(summary_next_ms) FROM sessions WHERE summarized_ms IS NULL "
                        "AND status = 'STOPPED'",
    [RS_RUNNING_TO_SUMMARIZE] = "SELECT tenant, id, user_id, profile, created_ms, updated_ms, "
                                "last FROM (SELECT *, (SELECT MAX(seq) FROM messages m WHERE "
                                "m.sid = s.sid) AS last FROM sessions s WHERE status = 'RUNNING' "
                                "AND user_id IS NOT NULL AND profile = ?1) "
                                "WHERE last - summarized_seq >= ?2 LIMIT ?3",
    [RS_CACHE_GET] = "SELECT content, model FROM answer_cache WHERE key = ?1 AND expires_ms > ?2",
    [RS_TO_EMBED] = "SELECT q.sid, q.seq, s.profile, m.content, q.attempts FROM embed_queue q "
                    "JOIN messages m ON m.sid = q.sid AND m.seq = q.seq "
                    "JOIN sessions s ON s.sid = q.sid WHERE q.next_ms <= ?1 "
                    "ORDER BY q.next_ms LIMIT ?2",
    [RS_EMBED_NEXT] = "SELECT MIN(next_ms) FROM embed_queue",
    [RS_SESSION_USER] = "SELECT user_id FROM sessions WHERE tenant = ?1 AND id = ?2",
/* A caller's latest turns, newest first: sessions by creation (an index walk), turns by seq. */
#define STORE_RECALL_SQL(where)                                                                    \
    "SELECT m.sid, m.seq, m.role, m.content, m.timestamp_ms, m.importance, e.vec "                 \
    "FROM sessions s JOIN messages m ON m.sid = s.sid "                                            \
    "LEFT JOIN embeddings e ON e.sid = m.sid AND e.seq = m.seq "                                   \
    "WHERE " where " AND m.role IN ('user', 'assistant') AND m.content <> '' "                     \
    "ORDER BY s.created_ms DESC, m.seq DESC LIMIT ?3"
    [RS_RECALL_USER] = STORE_RECALL_SQL("s.tenant = ?1 AND s.user_id = ?2"),
    [RS_RECALL_SESSION] = STORE_RECALL_SQL("s.tenant = ?1 AND s.id = ?2"),
    [RS_EMBEDDED_USER] = "SELECT 1 FROM sessions s JOIN embeddings e ON e.sid = s.sid "
                         "WHERE s.tenant = ?1 AND s.user_id = ?2 AND e.vec IS NOT NULL LIMIT 1",
    [RS_EMBEDDED_SESSION] = "SELECT 1 FROM sessions s JOIN embeddings e ON e.sid = s.sid "
                            "WHERE s.tenant = ?1 AND s.id = ?2 AND e.vec IS NOT NULL LIMIT 1",
};

static int store_reader_prepare(struct store_reader *r)
{
    for (int i = 0; i < RS__COUNT; i++) {
        if (sqlite3_prepare_v3(r->db, store_rsql[i], -1, SQLITE_PREPARE_PERSISTENT, &r->stmt[i],
                               NULL) != SQLITE_OK)
            return -1;
    }
    return 0;
}

struct store_reader *store_reader_open(struct store *st, char **err)
{
    struct store_reader *r = xcalloc(1, sizeof(*r));
    r->own_db = 1;
    if (sqlite3_open_v2(st->path, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        sqlite3_busy_timeout(r->db, (int)st->opts.busy_timeout_ms) != SQLITE_OK ||
        store_reader_prepare(r) != 0) {
        *err = xasprintf("%s: cannot open for reading: %s", st->path, sqlite3_errmsg(r->db));
        store_reader_close(r);
        return NULL;
    }
    return r;
}

void store_reader_close(struct store_reader *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < RS__COUNT; i++)
        sqlite3_finalize(r->stmt[i]);
    if (r->own_db)
        sqlite3_close(r->db);
    free(r);
}

/* Reset a reader's statement after use. */
static void store_rdone(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

static json_t *store_col(sqlite3_stmt *s, int i, int as_json)
{
    switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER:
        return json_integer(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT:
        return json_real(sqlite3_column_double(s, i));
    case SQLITE_TEXT: {
        const char *t = (const char *)sqlite3_column_text(s, i);
        size_t n = (size_t)sqlite3_column_bytes(s, i);
        json_t *v = as_json ? jtext_load(t, n, 0, NULL) : json_string(t);
        return v ? v : json_null();
    }
    default:
        return json_null();
    }
}

static json_t *store_turn_row(sqlite3_stmt *s)
{
    static const char *const names[] = {
        "seq",      "turn_id",       "turn_idx",    "role",
        "content",  "source",        "interrupted", "interrupt_timestamp",
        "original", "metadata",      "tool_calls",  "tool_call_id",
        "name",     "timestamp",     "importance",  "model",
        "usage",    "finish_reason", "ttft_us",     "latency_us"};
    json_t *t = json_object();
    for (int i = 0; i < (int)UTIL_ARRAY_LEN(names); i++) {
        int as_json = i == 9 || i == 10 || i == 16;
        int optional = i >= 10 && i != 13 && i != 14; /* tool and reply fields: when they apply */
        json_t *v = store_col(s, i, as_json);
        if (optional && json_is_null(v))
            continue;
        if (i == 6) { /* interrupted: stored 0/1, a boolean in JSON */
            json_t *b = json_boolean(json_integer_value(v) != 0);
            json_decref(v);
            v = b;
        }
        json_object_set_new(t, names[i], v);
    }
    return t;
}

/* The current row as an object: names[i] = column i, JSON-decoded where json_cols says
 * (a bit per column). */
static json_t *store_row(sqlite3_stmt *s, const char *const *names, int n, unsigned json_cols)
{
    json_t *row = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(row, names[i], store_col(s, i, (json_cols >> i) & 1));
    return row;
}

json_t *store_turns(struct store_reader *r, const char *tenant, const char *session_id,
                    int64_t min_turn, size_t limit)
{
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[RS_TURNS];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, session_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, min_turn);
    sqlite3_bind_int64(s, 4, limit ? (sqlite3_int64)limit : -1);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, store_turn_row(s));
    store_rdone(s);
    return out;
}

json_t *store_turns_of(struct store_reader *r, const char *tenant, const char *session_id,
                       const int64_t *turn_ids, size_t n, size_t limit)
{
    json_t *out = json_array();
    char *ids = xmalloc(n * 21 + 3), *p = ids; /* "[1,2,...]": 20 digits and a comma each */
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *p++ = ',';
        p = util_put_u64(p, (uint64_t)turn_ids[i]); /* the window's ids are >= 0 */
    }
    *p++ = ']';
    sqlite3_stmt *s = r->stmt[RS_TURNS_OF];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, session_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, ids, (int)(p - ids), SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, limit ? (sqlite3_int64)limit : -1);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, store_turn_row(s));
    store_rdone(s);
    free(ids);
    return out;
}

json_t *store_session_get(struct store_reader *r, const char *tenant, const char *session_id)
{
    static const char *const names[] = {
        "id",          "tenant",     "user_id",       "profile",    "status", "system_messages",
        "window_hash", "created_ms", "updated_ms",    "stopped_ms", "turns",  "runtime_system",
        "labels",      "metadata",   "runtime_params"};
    sqlite3_stmt *s = r->stmt[RS_SESSION];
    json_t *out = NULL;
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, session_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        out = store_row(s, names, (int)UTIL_ARRAY_LEN(names), 1u << 5 | 0xfu << 11);
    store_rdone(s);
    return out;
}

json_t *store_user_memory(struct store_reader *r, const char *tenant, const char *user_id,
                          size_t max_facts)
{
    static const char *const sum[] = {"text", "from_ms", "to_ms", "updated_ms"};
    static const char *const fact[] = {"category",   "key",  "value",
                                       "confidence", "seen", "updated_ms"};
    json_t *out = json_pack("{s:n, s:[]}", "summary", "facts");
    sqlite3_stmt *s = r->stmt[RS_SUMMARY];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        json_object_set_new(out, "summary", store_row(s, sum, 4, 0));
    store_rdone(s);
    s = r->stmt[RS_FACTS];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)max_facts);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(json_object_get(out, "facts"), store_row(s, fact, 6, 0));
    store_rdone(s);
    return out;
}

/* Rows of s as objects (the last column, the row id, is the cursor of the next page):
 * {key: [...], "next": cursor|null}. */
static json_t *store_page(sqlite3_stmt *s, const char *key, const char *const *names, int n,
                          unsigned json_cols, size_t limit)
{
    json_t *list = json_array();
    int64_t last = -1;
    while (sqlite3_step(s) == SQLITE_ROW) {
        json_array_append_new(list, store_row(s, names, n, json_cols));
        last = sqlite3_column_int64(s, n);
    }
    store_rdone(s);
    json_t *out = json_pack("{s:o, s:n}", key, list, "next");
    if (last > 0 && json_array_size(list) == limit)
        json_object_set_new(out, "next", json_integer(last));
    return out;
}

json_t *store_sessions(struct store_reader *r, const char *tenant, const char *user_id,
                       const char *status, int64_t before, size_t limit)
{
    static const char *const names[] = {"id",     "user_id",    "profile",    "status",
                                        "labels", "created_ms", "updated_ms", "stopped_ms"};
    sqlite3_stmt *s = r->stmt[RS_LIST];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, status, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, before > 0 ? before : INT64_MAX);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)limit);
    return store_page(s, "sessions", names, (int)UTIL_ARRAY_LEN(names), 1u << 4, limit);
}

json_t *store_deliveries(struct store_reader *r, const struct store_delivery_query *q)
{
    static const char *const names[] = {"id",         "session_id", "url",         "event",
                                        "status",     "attempts",   "next_try_ms", "last_status",
                                        "last_error", "created_ms", "updated_ms"};
    sqlite3_stmt *s = r->stmt[RS_DELIVERIES];
    sqlite3_bind_text(s, 1, q->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, q->status, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, q->session_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, q->notice_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, q->before > 0 ? q->before : INT64_MAX);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)q->limit);
    return store_page(s, "deliveries", names, (int)UTIL_ARRAY_LEN(names), 0, q->limit);
}

/* A queue's rows due by now_ms (?1), at most limit (?2), as objects of names. */
static json_t *store_due(struct store_reader *r, enum store_rstmt which, const char *const *names,
                         int n, int64_t now_ms, size_t limit)
{
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[which];
    sqlite3_bind_int64(s, 1, now_ms);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, store_row(s, names, n, 0));
    store_rdone(s);
    return out;
}

/* A queue's next due time (a MIN() statement), or -1 when it is empty. */
static int64_t store_next(struct store_reader *r, enum store_rstmt which)
{
    sqlite3_stmt *s = r->stmt[which];
    int64_t next = -1;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_INTEGER)
        next = sqlite3_column_int64(s, 0);
    store_rdone(s);
    return next;
}

json_t *store_outbox_due(struct store_reader *r, int64_t now_ms, size_t limit)
{
    static const char *const names[] = {"id",  "notice_id", "tenant",  "session_id",
                                        "url", "event",     "payload", "attempts"};
    return store_due(r, RS_OUTBOX_DUE, names, (int)UTIL_ARRAY_LEN(names), now_ms, limit);
}

int64_t store_outbox_next(struct store_reader *r)
{
    return store_next(r, RS_OUTBOX_NEXT);
}

json_t *store_idle_sessions(struct store_reader *r, int64_t before_ms, size_t limit)
{
    static const char *const names[] = {"tenant", "id", "profile"};
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[RS_IDLE];
    sqlite3_bind_int64(s, 1, before_ms);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, store_row(s, names, 3, 0));
    store_rdone(s);
    return out;
}

json_t *store_to_summarize(struct store_reader *r, int64_t now_ms, size_t limit)
{
    static const char *const names[] = {"tenant",     "id",         "user_id", "profile",
                                        "created_ms", "stopped_ms", "tries"};
    return store_due(r, RS_TO_SUMMARIZE, names, (int)UTIL_ARRAY_LEN(names), now_ms, limit);
}

int64_t store_summary_next(struct store_reader *r)
{
    return store_next(r, RS_SUMMARY_NEXT);
}

json_t *store_running_to_summarize(struct store_reader *r, const char *profile, long threshold,
                                   size_t limit)
{
    static const char *const names[] = {"tenant",     "id",         "user_id", "profile",
                                        "created_ms", "updated_ms", "seq"};
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[RS_RUNNING_TO_SUMMARIZE];
    sqlite3_bind_text(s, 1, profile, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, threshold);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, store_row(s, names, (int)UTIL_ARRAY_LEN(names), 0));
    store_rdone(s);
    return out;
}

json_t *store_cache_get(struct store_reader *r, const char *key, int64_t now_ms)
{
    static const char *const names[] = {"content", "model"};
    json_t *out = NULL;
    sqlite3_stmt *s = r->stmt[RS_CACHE_GET];
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_ms);
    if (sqlite3_step(s) == SQLITE_ROW)
        out = store_row(s, names, 2, 0);
    store_rdone(s);
    return out;
}

json_t *store_to_embed(struct store_reader *r, int64_t now_ms, size_t limit)
{
    static const char *const names[] = {"sid", "seq", "profile", "text", "attempts"};
    return store_due(r, RS_TO_EMBED, names, (int)UTIL_ARRAY_LEN(names), now_ms, limit);
}

int64_t store_embed_next(struct store_reader *r)
{
    return store_next(r, RS_EMBED_NEXT);
}

/* The user of a session, or NULL (new). */
static char *store_session_user(struct store_reader *r, const char *tenant, const char *id)
{
    sqlite3_stmt *s = r->stmt[RS_SESSION_USER];
    char *user = NULL;
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_TEXT)
        user = xstrdup((const char *)sqlite3_column_text(s, 0));
    store_rdone(s);
    return user;
}

/* The scope of a lookup: ?1 tenant, ?2 the user (or, without one, the session). */
static sqlite3_stmt *store_recall_scope(struct store_reader *r, enum store_rstmt by_user,
                                        const char *tenant, const char *user_id,
                                        const char *session_id, char **user)
{
    *user = user_id ? xstrdup(user_id) : store_session_user(r, tenant, session_id);
    sqlite3_stmt *s = r->stmt[*user ? by_user : by_user + 1];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, *user ? *user : session_id, -1, SQLITE_STATIC);
    return s;
}

int store_recall_embedded(struct store_reader *r, const char *tenant, const char *user_id,
                          const char *session_id)
{
    char *user;
    sqlite3_stmt *s = store_recall_scope(r, RS_EMBEDDED_USER, tenant, user_id, session_id, &user);
    int found = sqlite3_step(s) == SQLITE_ROW;
    store_rdone(s);
    free(user);
    return found;
}

void store_recall(struct store_reader *r, const char *tenant, const char *user_id,
                  const char *session_id, size_t limit, struct recall_pick *p)
{
    char *user;
    sqlite3_stmt *s = store_recall_scope(r, RS_RECALL_USER, tenant, user_id, session_id, &user);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        recall_pick_offer(p, sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1),
                          (const char *)sqlite3_column_text(s, 2),
                          (const char *)sqlite3_column_text(s, 3), sqlite3_column_int64(s, 4),
                          sqlite3_column_double(s, 5), sqlite3_column_blob(s, 6),
                          (size_t)sqlite3_column_bytes(s, 6));
    store_rdone(s);
    free(user);
}
