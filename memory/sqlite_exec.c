#include "memory/sqlite_exec.h"

#include "base/jtext.h"
#include "base/log.h"
#include "base/util.h"
#include "memory/history.h"
#include "memory/sqlite_read.h"
#include "memory/turnrow.h"

#include <stdio.h>
#include <string.h>

/* ---- binding turns to columns ---- */

static void sqlite_exec_bind_text(sqlite3_stmt *s, int i, json_t *v)
{
    if (json_is_string(v))
        sqlite3_bind_text(s, i, json_string_value(v), (int)json_string_length(v), SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

/* JSON values (objects, arrays) are stored as their compact text. */
static void sqlite_exec_bind_json(sqlite3_stmt *s, int i, json_t *v)
{
    char *text = json_is_object(v) || json_is_array(v) ? jtext_dump(v, NULL) : NULL;
    if (text)
        sqlite3_bind_text(s, i, text, -1, free);
    else
        sqlite3_bind_null(s, i);
}

static void sqlite_exec_bind_int(sqlite3_stmt *s, int i, json_t *v)
{
    if (json_is_integer(v))
        sqlite3_bind_int64(s, i, json_integer_value(v));
    else
        sqlite3_bind_null(s, i);
}

/* turnrow's binder over a statement. */
static void sqlite_exec_b_int(void *s, int at, json_t *v)
{
    sqlite_exec_bind_int(s, at, v);
}

static void sqlite_exec_b_string(void *s, int at, json_t *v)
{
    sqlite_exec_bind_text(s, at, v);
}

static void sqlite_exec_b_json(void *s, int at, json_t *v)
{
    sqlite_exec_bind_json(s, at, v);
}

static void sqlite_exec_b_text(void *s, int at, const char *text)
{
    sqlite3_bind_text(s, at, text, -1, SQLITE_STATIC);
}

static void sqlite_exec_b_flag(void *s, int at, int on)
{
    sqlite3_bind_int(s, at, on);
}

static void sqlite_exec_b_real(void *s, int at, double d)
{
    sqlite3_bind_double(s, at, d);
}

static const struct turnrow_binder sqlite_exec_binder = {sqlite_exec_b_int,  sqlite_exec_b_string,
                                                         sqlite_exec_b_json, sqlite_exec_b_text,
                                                         sqlite_exec_b_flag, sqlite_exec_b_real};

/* Turn t's columns as ST_INSERT's ?2..?21 (its seq last); ?1, the session, is the caller's. */
static void sqlite_exec_bind_turn(sqlite3_stmt *s, json_t *t)
{
    turnrow_bind(t, &sqlite_exec_binder, s, 2, 21);
}

/* A replaced reply's own columns (ST_REPLACE's ?7..?14). */
static void sqlite_exec_bind_reply(sqlite3_stmt *s, json_t *t)
{
    sqlite_exec_bind_text(s, 7, json_object_get(t, "model"));
    sqlite_exec_bind_json(s, 8, json_object_get(t, "usage"));
    sqlite_exec_bind_text(s, 9, json_object_get(t, "finish_reason"));
    sqlite_exec_bind_int(s, 10, json_object_get(t, "ttft_us"));
    sqlite_exec_bind_int(s, 11, json_object_get(t, "latency_us"));
    sqlite_exec_bind_int(s, 12, json_object_get(t, "timestamp"));
    sqlite_exec_bind_json(s, 13, json_object_get(t, "tool_calls"));
    sqlite_exec_bind_json(s, 14, json_object_get(t, "metadata")); /* a refusal's */
}

/* ---- the writer ---- */

int sqlite_exec_step(sqlite3 *db, sqlite3_stmt *s)
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

int sqlite_exec_run(struct sqlite_db *st, enum sqlite_stmt which)
{
    return sqlite_exec_step(st->db, st->stmt[which]);
}

/* The id of a session that must exist, or -1 (the batch then fails). */
static int64_t sqlite_exec_sid_existing(struct sqlite_db *st, struct store_batch *b)
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
static int64_t sqlite_exec_sid_lookup(struct sqlite_db *st, struct store_batch *b, int64_t now)
{
    sqlite3_stmt *s = st->stmt[ST_SESSION_ENSURE];
    sqlite3_bind_text(s, 1, b->tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, b->session_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now);
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    return sqlite_exec_sid_existing(st, b);
}
/* The batch's session's key in the writer's session cache. Malloc'd. */
static char *sqlite_exec_sid_key(const struct store_batch *b)
{
    return xjoin(b->tenant, '\x1f', b->session_id);
}

static int64_t sqlite_exec_sid(struct sqlite_db *st, struct store_batch *b)
{
    int64_t now = util_wall_ms(), sid;
    if (b->existing)
        return sqlite_exec_sid_existing(st, b);
    char *key = sqlite_exec_sid_key(b);
    json_t *hit = json_object_get(st->sids, key);
    if (hit != NULL && now - json_integer_value(json_array_get(hit, 1)) < st->opts.touch_ms) {
        sid = json_integer_value(json_array_get(hit, 0));
        b->running = json_is_true(json_array_get(hit, 2));
    } else {
        sid = sqlite_exec_sid_lookup(st, b, now);
        if (json_object_size(st->sids) >= STORE_SID_CACHE)
            json_object_clear(st->sids);
        if (sid >= 0)
            json_object_set_new(st->sids, key, json_pack("[I, I, b]", (json_int_t)sid, now, 0));
    }
    free(key);
    return sid;
}

/* The batch's session is running now (it was reopened in this transaction). */
static void sqlite_exec_sid_running(struct sqlite_db *st, struct store_batch *b)
{
    char *key = sqlite_exec_sid_key(b);
    json_t *hit = json_object_get(st->sids, key);
    if (hit != NULL)
        json_array_set_new(hit, 2, json_true());
    free(key);
}

static void sqlite_exec_sid_forget(struct sqlite_db *st, struct store_batch *b)
{
    char *key = sqlite_exec_sid_key(b);
    json_object_del(st->sids, key);
    free(key);
}

/* One outbox row per hook for the session b just stopped, its payload read inside this
 * transaction (so it holds exactly what was committed with it). */
static int sqlite_exec_outbox_fill(struct sqlite_db *st, struct store_batch *b, json_t *how,
                                   int64_t now)
{
    json_t *sess = sqlite_read_session_get(&st->wr->base, b->tenant, b->session_id);
    json_t *turns = sqlite_read_turns(&st->wr->base, b->tenant, b->session_id, INT64_MIN, 0), *h;
    json_t *hooks = json_object_get(how, "hooks");
    /* a summary on its way: the dumps wait for it, at most hold_ms */
    int64_t due = now;
    if (json_is_true(json_object_get(how, "summarize")) &&
        json_is_string(json_object_get(sess, "user_id")))
        due += json_integer_value(json_object_get(how, "hold_ms"));
    sqlite3_stmt *s = st->stmt[ST_OUTBOX_ADD];
    size_t i;
    int rc = sess ? 0 : -1;
    json_array_foreach(hooks, i, h) {
        json_int_t event = json_integer_value(json_object_get(h, "event"));
        json_t *payload = history_payload(sess, turns, (int)event);
        char notice[64];
        history_notice_id(notice, sizeof(notice), event);
        sqlite3_bind_text(s, 1, notice, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(s, 2, b->tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, b->session_id, -1, SQLITE_STATIC);
        sqlite_exec_bind_text(s, 4, json_object_get(sess, "user_id"));
        sqlite_exec_bind_text(s, 5, json_object_get(h, "url"));
        sqlite3_bind_int64(s, 6, event);
        sqlite_exec_bind_json(s, 7, payload);
        sqlite3_bind_int64(s, 8, due);
        sqlite3_bind_int64(s, 9, now);
        json_decref(payload);
        if (rc != 0 || (rc = sqlite_exec_step(st->db, s)) != 0)
            break;
    }
    json_decref(sess);
    json_decref(turns);
    return rc;
}

/* Stop the session (unless it is stopped already, or had a request since how.idle_before)
 * and queue its dumps. */
static int sqlite_exec_stop(struct sqlite_db *st, struct store_batch *b, int64_t sid, json_t *how)
{
    int64_t now = util_wall_ms();
    json_t *idle = json_object_get(how, "idle_before");
    sqlite3_stmt *s = st->stmt[ST_STOP];
    sqlite3_bind_int64(s, 1, sid);
    sqlite3_bind_int64(s, 2, now);
    sqlite3_bind_int64(s, 3, json_is_integer(idle) ? json_integer_value(idle) : INT64_MAX);
    sqlite3_bind_int(s, 4, json_is_true(json_object_get(how, "summarize")));
    sqlite_exec_sid_forget(st, b); /* no longer known to be running */
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    if (sqlite3_changes(st->db) == 0 || json_array_size(json_object_get(how, "hooks")) == 0)
        return 0;
    return sqlite_exec_outbox_fill(st, b, how, now);
}

/* The REST API's changes to a session row. */
/* The client's new system messages (a window's fingerprint goes to its own table). */
static int sqlite_exec_system(struct sqlite_db *st, int64_t sid, json_t *system)
{
    sqlite3_stmt *s = st->stmt[ST_SESSION_SYSTEM];
    sqlite3_bind_int64(s, 1, sid);
    sqlite_exec_bind_json(s, 2, system);
    return sqlite_exec_step(st->db, s);
}

static int sqlite_exec_session_op(struct sqlite_db *st, int64_t sid, struct store_op *op)
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
        sqlite_exec_bind_json(s, 2, json_object_get(op->data, "system_messages"));
        sqlite3_bind_int64(s, 3, now);
        sqlite_exec_bind_json(s, 4, json_object_get(op->data, "params"));
        break;
    default: /* STORE_OP_PATCH */
        s = st->stmt[ST_PATCH];
        sqlite_exec_bind_json(s, 2, json_object_get(op->data, "labels"));
        sqlite_exec_bind_json(s, 3, json_object_get(op->data, "metadata"));
        sqlite_exec_bind_text(s, 4, json_object_get(op->data, "user_id"));
        sqlite3_bind_int64(s, 5, now);
        break;
    }
    sqlite3_bind_int64(s, 1, sid);
    return sqlite_exec_step(st->db, s);
}

/* Bind tenant and user as ?1, ?2 of s and run it. */
static int sqlite_exec_user(struct sqlite_db *st, enum sqlite_stmt which, const char *tenant,
                            const char *user)
{
    sqlite3_stmt *s = st->stmt[which];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
    return sqlite_exec_step(st->db, s);
}

/* A user's summary through which (ST_SUMMARY_SET or ST_SUMMARY_FOLD). */
static int sqlite_exec_put_summary(struct sqlite_db *st, enum sqlite_stmt which, const char *tenant,
                                   const char *user, json_t *text, json_t *from, json_t *to,
                                   int64_t now)
{
    sqlite3_stmt *s = st->stmt[which];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
    sqlite_exec_bind_text(s, 3, text);
    sqlite_exec_bind_int(s, 4, from);
    sqlite_exec_bind_int(s, 5, to);
    sqlite3_bind_int64(s, 6, now);
    return sqlite_exec_step(st->db, s);
}

/* A user's facts through which (ST_FACT_SET or ST_FACT_SEEN). */
static int sqlite_exec_put_facts(struct sqlite_db *st, enum sqlite_stmt which, const char *tenant,
                                 const char *user, json_t *facts, int64_t now)
{
    sqlite3_stmt *s = st->stmt[which];
    json_t *f;
    size_t i;
    json_array_foreach(facts, i, f) {
        sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
        sqlite_exec_bind_text(s, 3, json_object_get(f, "category"));
        sqlite_exec_bind_text(s, 4, json_object_get(f, "key"));
        sqlite_exec_bind_text(s, 5, json_object_get(f, "value"));
        sqlite3_bind_double(s, 6, json_number_value(json_object_get(f, "confidence")));
        sqlite3_bind_int64(s, 7, now);
        if (sqlite_exec_step(st->db, s) != 0)
            return -1;
    }
    return 0;
}

/* Replace what is remembered about a user with m ({summary?, facts?}; NULL: nothing). */
static int sqlite_exec_user_memory(struct sqlite_db *st, const char *tenant, const char *user,
                                   json_t *m)
{
    int64_t now = util_wall_ms();
    json_t *sum = json_object_get(m, "summary");
    if (sqlite_exec_user(st, ST_USER_SUMMARY_DEL, tenant, user) != 0 ||
        sqlite_exec_user(st, ST_USER_FACTS_DEL, tenant, user) != 0)
        return -1;
    if (json_is_object(sum) &&
        sqlite_exec_put_summary(st, ST_SUMMARY_SET, tenant, user, json_object_get(sum, "text"),
                                json_object_get(sum, "from_ms"), json_object_get(sum, "to_ms"),
                                now) != 0)
        return -1;
    return sqlite_exec_put_facts(st, ST_FACT_SET, tenant, user, json_object_get(m, "facts"), now);
}

/* Everything held about a user: sessions (turns by cascade), summary, facts, dumps. */
static int sqlite_exec_user_erase(struct sqlite_db *st, const char *tenant, const char *user)
{
    json_object_clear(st->sids); /* deleted sessions' ids must not be reused */
    return sqlite_exec_user(st, ST_USER_SESSIONS, tenant, user) ||
                   sqlite_exec_user(st, ST_USER_SUMMARY_DEL, tenant, user) ||
                   sqlite_exec_user(st, ST_USER_FACTS_DEL, tenant, user) ||
                   sqlite_exec_user(st, ST_USER_OUTBOX_DEL, tenant, user) ||
                   sqlite_exec_user(st, ST_USER_CACHE_DEL, tenant, user)
               ? -1
               : 0;
}

/* A session from an export (snapshot.h, checked): the row as it was, then its turns. Fails
 * when the tenant has a session by that id. */
static int sqlite_exec_import(struct sqlite_db *st, const char *tenant, json_t *snap)
{
    static const char *const cols[] = {"user_id",     "profile",        "status",
                                       "labels",      "metadata",       "system_messages",
                                       "window_hash", "created_ms",     "updated_ms",
                                       "stopped_ms",  "runtime_system", "runtime_params"};
    json_t *sess = json_object_get(snap, "session"), *t;
    sqlite3_stmt *s = st->stmt[ST_IMPORT];
    size_t i;
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite_exec_bind_text(s, 2, json_object_get(sess, "id"));
    for (i = 0; i < UTIL_ARRAY_LEN(cols); i++) {
        json_t *v = json_object_get(sess, cols[i]);
        if (json_is_integer(v))
            sqlite_exec_bind_int(s, (int)i + 3, v);
        else if (json_is_string(v))
            sqlite_exec_bind_text(s, (int)i + 3, v);
        else
            sqlite_exec_bind_json(s, (int)i + 3, v);
    }
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    int64_t sid = sqlite3_last_insert_rowid(st->db);
    s = st->stmt[ST_INSERT];
    json_array_foreach(json_object_get(snap, "turns"), i, t) {
        sqlite_exec_bind_turn(s, t);
        sqlite3_bind_int64(s, 1, sid);
        if (sqlite_exec_step(st->db, s) != 0)
            return -1;
    }
    return 0;
}

static int sqlite_exec_outbox(struct sqlite_db *st, const char *tenant, struct store_op *op)
{
    int64_t now = util_wall_ms();
    sqlite3_stmt *s;
    if (op->kind == STORE_OP_OUTBOX_RETRY) {
        s = st->stmt[ST_OUTBOX_RETRY];
        sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, op->id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, now);
        return sqlite_exec_step(st->db, s) != 0 || sqlite3_changes(st->db) == 0 ? -1 : 0;
    }
    s = st->stmt[ST_OUTBOX_RESULT];
    sqlite_exec_bind_int(s, 1, json_object_get(op->data, "id"));
    sqlite_exec_bind_text(s, 2, json_object_get(op->data, "status"));
    sqlite_exec_bind_int(s, 3, json_object_get(op->data, "next_ms"));
    sqlite_exec_bind_int(s, 4, json_object_get(op->data, "code"));
    sqlite_exec_bind_text(s, 5, json_object_get(op->data, "error"));
    sqlite3_bind_int64(s, 6, now);
    return sqlite_exec_step(st->db, s);
}

/* A summary pass's outcome for a stopped session (store_batch_summary()). */
static int sqlite_exec_summary(struct sqlite_db *st, const char *tenant, json_t *d)
{
    int64_t now = util_wall_ms();
    const char *sid = json_string_value(json_object_get(d, "session_id"));
    const char *user = json_string_value(json_object_get(d, "user_id"));
    json_t *mem = json_object_get(d, "memory");
    json_t *text = json_object_get(json_object_get(mem, "summary"), "text");
    sqlite3_stmt *s;
    if (json_is_string(text)) {
        if (sqlite_exec_put_summary(st, ST_SUMMARY_FOLD, tenant, user, text,
                                    json_object_get(d, "from_ms"), json_object_get(d, "to_ms"),
                                    now) != 0 ||
            sqlite_exec_put_facts(st, ST_FACT_SEEN, tenant, user, json_object_get(mem, "facts"),
                                  now) != 0)
            return -1;
        s = st->stmt[ST_FACT_DECAY];
        sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, user, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, now);
        if (sqlite_exec_step(st->db, s) != 0 ||
            sqlite_exec_user(st, ST_FACT_FORGET, tenant, user) != 0)
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
    if (seq != NULL) /* the call's own summary, kept when this pass made none */
        sqlite_exec_bind_text(s, 4, json_object_get(d, "call_summary"));
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    if (seq != NULL)
        return 0;                    /* the session goes on: no dumps wait for this one */
    s = st->stmt[ST_OUTBOX_SUMMARY]; /* the dumps waiting for it go now, with it if made */
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, sid, -1, SQLITE_STATIC);
    sqlite_exec_bind_text(s, 3, text);
    sqlite3_bind_int64(s, 4, now);
    return sqlite_exec_step(st->db, s);
}

/* An answer for the cache ({key, user_id, content, model, expires_ms}); a few expired entries
 * go with each put, so the table does not grow with dead answers. */
static int sqlite_exec_cache_put(struct sqlite_db *st, const char *tenant, json_t *d)
{
    int64_t now = util_wall_ms();
    sqlite3_stmt *s = st->stmt[ST_CACHE_PUT];
    sqlite_exec_bind_text(s, 1, json_object_get(d, "key"));
    sqlite3_bind_text(s, 2, tenant, -1, SQLITE_STATIC);
    sqlite_exec_bind_text(s, 3, json_object_get(d, "user_id"));
    sqlite_exec_bind_text(s, 4, json_object_get(d, "content"));
    sqlite_exec_bind_text(s, 5, json_object_get(d, "model"));
    sqlite3_bind_int64(s, 6, now);
    sqlite_exec_bind_int(s, 7, json_object_get(d, "expires_ms"));
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    s = st->stmt[ST_CACHE_EXPIRE];
    sqlite3_bind_int64(s, 1, now);
    return sqlite_exec_step(st->db, s);
}

/* The ops of batches that belong to no one session. */
/* Bind ?1 sid, ?2 seq of a turn's statement. */
static void sqlite_exec_bind_turn_key(sqlite3_stmt *s, int64_t sid, int64_t seq)
{
    sqlite3_bind_int64(s, 1, sid);
    sqlite3_bind_int64(s, 2, seq);
}

/* A user turn that reads exactly as the batch's known embedding's text takes that embedding
 * (1) instead of waiting in the queue; 0 when it does not apply, -1 on failure. */
static int sqlite_exec_embed_known(struct sqlite_db *st, struct store_batch *b, int64_t sid,
                                   json_t *turn)
{
    const char *role = json_string_value(json_object_get(turn, "role"));
    if (b->known_vec == NULL || role == NULL || strcmp(role, "user") != 0)
        return 0;
    sqlite3_stmt *s = st->stmt[ST_EMBED_PUT];
    st->embedded = 1;
    sqlite_exec_bind_turn_key(s, sid, json_integer_value(json_object_get(turn, "seq")));
    sqlite3_bind_text(s, 3, b->known_model, -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 4, b->known_vec, (int)b->known_len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, util_wall_ms());
    sqlite3_bind_text(s, 7, b->known_text, -1, SQLITE_STATIC);
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    return sqlite3_changes(st->db) > 0;
}

/* A turn was written: an embedding of its earlier text is stale (changed), and a batch that
 * wants embeddings queues it (ST_EMBED_QUEUE keeps to user and assistant turns with text). */
static int sqlite_exec_embed_turn(struct sqlite_db *st, struct store_batch *b, int64_t sid,
                                  json_t *turn, int changed)
{
    int64_t seq = json_integer_value(json_object_get(turn, "seq"));
    sqlite3_stmt *s = st->stmt[ST_EMBED_FORGET];
    if (changed && st->embedded) { /* else no embedding can be stale */
        sqlite_exec_bind_turn_key(s, sid, seq);
        if (sqlite_exec_step(st->db, s) != 0)
            return -1;
    }
    if (!b->embed)
        return 0;
    int known = sqlite_exec_embed_known(st, b, sid, turn);
    if (known != 0)
        return known > 0 ? 0 : -1;
    s = st->stmt[ST_EMBED_QUEUE];
    sqlite_exec_bind_turn_key(s, sid, seq);
    sqlite3_bind_int64(s, 3, util_wall_ms());
    return sqlite_exec_step(st->db, s);
}

/* An embedder's outcome for one turn: tried again later, or its embedding (or why none can
 * be made) stored and the turn taken off the queue. */
static int sqlite_exec_embedding(struct sqlite_db *st, struct store_op *op)
{
    json_t *d = op->data;
    int64_t sid = json_integer_value(json_object_get(d, "sid"));
    int64_t seq = json_integer_value(json_object_get(d, "seq"));
    json_int_t retry = json_integer_value(json_object_get(d, "retry_ms"));
    sqlite3_stmt *s = st->stmt[retry > 0 ? ST_EMBED_RETRY : ST_EMBED_PUT];
    st->embedded |= retry <= 0;
    sqlite_exec_bind_turn_key(s, sid, seq);
    if (retry > 0) {
        sqlite3_bind_int64(s, 3, retry);
        return sqlite_exec_step(st->db, s);
    }
    sqlite_exec_bind_text(s, 3, json_object_get(d, "model"));
    if (op->blob != NULL)
        sqlite3_bind_blob(s, 4, op->blob, (int)op->blob_len, SQLITE_STATIC);
    sqlite_exec_bind_text(s, 5, json_object_get(d, "error"));
    sqlite3_bind_int64(s, 6, util_wall_ms());
    sqlite_exec_bind_text(s, 7, json_object_get(d, "text"));
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    if (sqlite3_changes(st->db) == 0)
        return 0; /* changed or gone meanwhile: it stays queued (or went with its turn) */
    s = st->stmt[ST_EMBED_DONE];
    sqlite_exec_bind_turn_key(s, sid, seq);
    return sqlite_exec_step(st->db, s);
}

static int sqlite_exec_global(struct sqlite_db *st, struct store_batch *b, struct store_op *op)
{
    switch (op->kind) {
    case STORE_OP_IMPORT:
        return sqlite_exec_import(st, b->tenant, op->data);
    case STORE_OP_USER_ERASE:
        return sqlite_exec_user_erase(st, b->tenant, op->id);
    case STORE_OP_USER_MEMORY:
        return sqlite_exec_user_memory(st, b->tenant, op->id, op->data);
    case STORE_OP_SUMMARY:
        return sqlite_exec_summary(st, b->tenant, op->data);
    case STORE_OP_CACHE_PUT:
        return sqlite_exec_cache_put(st, b->tenant, op->data);
    case STORE_OP_EMBEDDING:
        return sqlite_exec_embedding(st, op);
    default:
        return sqlite_exec_outbox(st, b->tenant, op);
    }
}

/* A turn written to a stopped session (its call went on, or a reply landed after the stop)
 * makes it running again: its dump went out without that turn, and the next stop (REST, an
 * Agora notification, the idle timeout) sends a new one that holds it. Once per batch. */
static int sqlite_exec_reopen(struct sqlite_db *st, struct store_batch *b, int64_t sid)
{
    if (b->reopened || b->running)
        return 0;
    b->reopened = 1;
    sqlite3_stmt *s = st->stmt[ST_REOPEN];
    sqlite3_bind_int64(s, 1, sid);
    sqlite3_bind_int64(s, 2, util_wall_ms());
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    sqlite_exec_sid_running(st, b);
    return 0;
}

static int sqlite_exec_op(struct sqlite_db *st, struct store_batch *b, int64_t sid,
                          struct store_op *op)
{
    sqlite3_stmt *s = NULL;
    if (b->session_id == NULL)
        return sqlite_exec_global(st, b, op);
    switch (op->kind) {
    case STORE_OP_SESSION:
        s = st->stmt[ST_SESSION_SET];
        sqlite3_bind_text(s, 2, op->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, op->profile, -1, SQLITE_STATIC);
        break;
    case STORE_OP_WINDOW:
        if (op->data != NULL && sqlite_exec_system(st, sid, op->data) != 0)
            return -1;
        s = st->stmt[ST_SESSION_WINDOW];
        sqlite3_bind_int64(s, 2, (sqlite3_int64)op->hash);
        break;
    case STORE_OP_WINDOW_TURNS:
        s = st->stmt[ST_WINDOW_TURNS];
        sqlite3_bind_int64(s, 2, (sqlite3_int64)op->hash);
        break;
    case STORE_OP_INSERT:
        s = st->stmt[ST_INSERT];
        sqlite_exec_bind_turn(s, op->data);
        break;
    case STORE_OP_STOP:
        return sqlite_exec_stop(st, b, sid, op->data);
    case STORE_OP_DELETE:
    case STORE_OP_RUNTIME:
    case STORE_OP_PATCH:
        return sqlite_exec_session_op(st, sid, op);
    case STORE_OP_UPDATE:
    case STORE_OP_REPLACE:
        s = st->stmt[op->kind == STORE_OP_UPDATE ? ST_UPDATE : ST_REPLACE];
        sqlite_exec_bind_int(s, 2, json_object_get(op->data, "seq"));
        sqlite_exec_bind_text(s, 3, json_object_get(op->data, "content"));
        sqlite_exec_bind_text(s, 4, json_object_get(op->data, "original"));
        sqlite3_bind_int(s, 5, json_is_true(json_object_get(op->data, "interrupted")));
        sqlite_exec_bind_int(s, 6, json_object_get(op->data, "interrupt_timestamp"));
        if (op->kind == STORE_OP_REPLACE)
            sqlite_exec_bind_reply(s, op->data);
        break;
    default: /* a global op in a session's batch: a caller's mistake */
        log_error("store: an operation of no session was queued with session '%s'", b->session_id);
        return -1;
    }
    sqlite3_bind_int64(s, 1, sid);
    if (sqlite_exec_step(st->db, s) != 0)
        return -1;
    if (op->kind != STORE_OP_INSERT && op->kind != STORE_OP_UPDATE && op->kind != STORE_OP_REPLACE)
        return 0;
    int written = sqlite3_changes(st->db) > 0; /* an insert repeated is skipped */
    if (!written)
        return 0;
    if (sqlite_exec_reopen(st, b, sid) != 0)
        return -1;
    return sqlite_exec_embed_turn(st, b, sid, op->data, op->kind != STORE_OP_INSERT);
}

/* One batch inside the group's transaction. No savepoint around it: a batch that fails
 * makes the whole transaction roll back (the store then runs each batch alone). A savepoint
 * per batch cost two more statements and, in SQLite, a copy of every page the batch touches
 * into the statement journal, on every batch, for a failure that is rare. */
void sqlite_exec_apply(struct sqlite_db *st, struct store_batch *b)
{
    b->reopened = b->running = 0; /* a batch run again starts afresh */
    int64_t sid = b->session_id ? sqlite_exec_sid(st, b) : 0;
    b->ok = sid >= 0;
    for (size_t i = 0; b->ok && i < b->n; i++)
        b->ok = sqlite_exec_op(st, b, sid, &b->ops[i]) == 0;
}
