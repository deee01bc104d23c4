#include "memory/pgsql_exec.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/history.h"
#include "memory/pgsql_read.h"
#include "memory/turnrow.h"

#include <stdio.h>
#include <string.h>

static int pgsql_exec_run(struct pgsql_conn *c, enum pgsql_stmt which, struct pgsql_params *p)
{
    return pgsql_exec_changes(c, which, p) < 0 ? -1 : 0;
}

/* ---- binding turns to columns ---- */

/* turnrow's binder over a parameter list. */
static void pgsql_exec_b_int(void *p, int at, json_t *v)
{
    pgsql_param_jint(p, at, v);
}

static void pgsql_exec_b_string(void *p, int at, json_t *v)
{
    pgsql_param_jtext(p, at, v);
}

static void pgsql_exec_b_json(void *p, int at, json_t *v)
{
    pgsql_param_json(p, at, v);
}

static void pgsql_exec_b_text(void *p, int at, const char *text)
{
    pgsql_param_text(p, at, text);
}

static void pgsql_exec_b_flag(void *p, int at, int on)
{
    pgsql_param_int(p, at, on);
}

static void pgsql_exec_b_real(void *p, int at, double d)
{
    pgsql_param_double(p, at, d);
}

static const struct turnrow_binder pgsql_exec_binder = {pgsql_exec_b_int,  pgsql_exec_b_string,
                                                        pgsql_exec_b_json, pgsql_exec_b_text,
                                                        pgsql_exec_b_flag, pgsql_exec_b_real};

void pgsql_exec_bind_turn(struct pgsql_params *p, json_t *t, int first)
{
    turnrow_bind(t, &pgsql_exec_binder, p, first, first + TURNROW_COLUMNS - 1);
}

void pgsql_exec_bind_change(struct pgsql_params *p, json_t *d, int reply, int first)
{
    int f = first; /* the key (turn_id, role, turn_idx), then the columns from content on */
    pgsql_param_jint(p, f, json_object_get(d, "turn_id"));
    pgsql_param_jtext(p, f + 1, json_object_get(d, "role"));
    pgsql_param_jint(p, f + 2, json_object_get(d, "turn_idx"));
    pgsql_param_jtext(p, f + 3, json_object_get(d, "content"));
    pgsql_param_jtext(p, f + 4, json_object_get(d, "original"));
    pgsql_param_int(p, f + 5, json_is_true(json_object_get(d, "interrupted")));
    pgsql_param_jint(p, f + 6, json_object_get(d, "interrupt_timestamp"));
    if (!reply)
        return;
    pgsql_param_jtext(p, f + 7, json_object_get(d, "model"));
    pgsql_param_json(p, f + 8, json_object_get(d, "usage"));
    pgsql_param_jtext(p, f + 9, json_object_get(d, "finish_reason"));
    pgsql_param_jint(p, f + 10, json_object_get(d, "ttft_us"));
    pgsql_param_jint(p, f + 11, json_object_get(d, "latency_us"));
    pgsql_param_jint(p, f + 12, json_object_get(d, "timestamp"));
    pgsql_param_json(p, f + 13, json_object_get(d, "tool_calls"));
    pgsql_param_json(p, f + 14, json_object_get(d, "metadata")); /* a refusal's */
}

/* $1 tenant, $2 a second text (a session or user id). */
static void pgsql_exec_bind_pair(struct pgsql_params *p, const char *tenant, const char *id)
{
    pgsql_params_init(p);
    pgsql_param_text(p, 1, tenant);
    pgsql_param_text(p, 2, id);
}

/* ---- the session's row ---- */

/* The session's row id (creating it unless the batch says it must exist, touching
 * updated_ms and counting its version up), or -1; b->running says whether it is running,
 * b->version what the version is now. The row stays locked until the COMMIT: batches of one
 * session from several replicas are applied one after the other. */
static int64_t pgsql_exec_sid(struct pgsql_db *st, struct store_batch *b)
{
    struct pgsql_params p;
    pgsql_exec_bind_pair(&p, b->tenant, b->session_id);
    if (!b->existing) {
        pgsql_param_int(&p, 3, util_wall_ms());
        pgsql_param_int(&p, 4, st->opts.touch_ms);
    }
    PGresult *r = pgsql_exec_stmt(st->c, b->existing ? PG_SESSION_SID : PG_SESSION_ENSURE, &p);
    int64_t sid = -1;
    if (r != NULL && PQntuples(r) == 1) {
        sid = pgsql_int(r, 0, 0);
        b->running = strcmp(PQgetvalue(r, 0, 1), "RUNNING") == 0;
        b->version = pgsql_int(r, 0, 2);
    }
    PQclear(r);
    return sid;
}

/* One outbox row per hook for the session b just stopped, its payload read inside this
 * transaction (so it holds exactly what was committed with it). */
static int pgsql_exec_outbox_fill(struct pgsql_db *st, struct store_batch *b, json_t *how,
                                  int64_t now)
{
    struct store_reader *wr = pgsql_read_base(st->wr);
    json_t *sess = pgsql_read_session_get(wr, b->tenant, b->session_id);
    json_t *turns = pgsql_read_turns(wr, b->tenant, b->session_id, INT64_MIN, 0), *h;
    int64_t due = now; /* a summary on its way: the dumps wait for it, at most hold_ms */
    if (json_is_true(json_object_get(how, "summarize")) &&
        json_is_string(json_object_get(sess, "user_id")))
        due += json_integer_value(json_object_get(how, "hold_ms"));
    size_t i;
    int rc = sess ? 0 : -1;
    json_array_foreach(json_object_get(how, "hooks"), i, h) {
        if (rc != 0)
            break;
        json_int_t event = json_integer_value(json_object_get(h, "event"));
        char notice[64];
        struct pgsql_params p;
        history_notice_id(notice, sizeof(notice), event);
        pgsql_params_init(&p);
        pgsql_param_text(&p, 1, notice);
        pgsql_param_text(&p, 2, b->tenant);
        pgsql_param_text(&p, 3, b->session_id);
        pgsql_param_jtext(&p, 4, json_object_get(sess, "user_id"));
        pgsql_param_jtext(&p, 5, json_object_get(h, "url"));
        pgsql_param_int(&p, 6, event);
        json_t *payload = history_payload(sess, turns, (int)event);
        pgsql_param_json(&p, 7, payload);
        json_decref(payload);
        pgsql_param_int(&p, 8, due);
        pgsql_param_int(&p, 9, now);
        rc = pgsql_exec_run(st->c, PG_OUTBOX_ADD, &p);
    }
    json_decref(sess);
    json_decref(turns);
    return rc;
}

/* Stop the session (unless it is stopped already, or had a request since how.idle_before)
 * and queue its dumps. The UPDATE's condition makes a stop happen once: when two replicas
 * stop one session, the second changes no row and queues nothing. */
static int pgsql_exec_stop(struct pgsql_db *st, struct store_batch *b, int64_t sid, json_t *how)
{
    int64_t now = util_wall_ms();
    json_t *idle = json_object_get(how, "idle_before");
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, sid);
    pgsql_param_int(&p, 2, now);
    pgsql_param_int(&p, 3, json_is_integer(idle) ? json_integer_value(idle) : INT64_MAX);
    pgsql_param_bool(&p, 4, json_is_true(json_object_get(how, "summarize")));
    int64_t n = pgsql_exec_changes(st->c, PG_STOP, &p);
    if (n <= 0 || json_array_size(json_object_get(how, "hooks")) == 0)
        return n < 0 ? -1 : 0;
    return pgsql_exec_outbox_fill(st, b, how, now);
}

/* The REST API's changes to a session row. */
static int pgsql_exec_session_op(struct pgsql_db *st, int64_t sid, struct store_op *op)
{
    int64_t now = util_wall_ms();
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, sid);
    switch (op->kind) {
    case STORE_OP_DELETE:
        return pgsql_exec_run(st->c, PG_DELETE, &p);
    case STORE_OP_RUNTIME:
        pgsql_param_json(&p, 2, json_object_get(op->data, "system_messages"));
        pgsql_param_int(&p, 3, now);
        pgsql_param_json(&p, 4, json_object_get(op->data, "params"));
        return pgsql_exec_run(st->c, PG_RUNTIME, &p);
    default: /* STORE_OP_PATCH */
        pgsql_param_json(&p, 2, json_object_get(op->data, "labels"));
        pgsql_param_json(&p, 3, json_object_get(op->data, "metadata"));
        pgsql_param_jtext(&p, 4, json_object_get(op->data, "user_id"));
        pgsql_param_int(&p, 5, now);
        return pgsql_exec_run(st->c, PG_PATCH, &p);
    }
}

/* ---- ops of no one session ---- */

static int pgsql_exec_user(struct pgsql_db *st, enum pgsql_stmt which, const char *tenant,
                           const char *user)
{
    struct pgsql_params p;
    pgsql_exec_bind_pair(&p, tenant, user);
    return pgsql_exec_run(st->c, which, &p);
}

/* A user's summary through which (PG_SUMMARY_SET or PG_SUMMARY_FOLD). */
static int pgsql_exec_put_summary(struct pgsql_db *st, enum pgsql_stmt which, const char *tenant,
                                  const char *user, json_t *text, json_t *from, json_t *to,
                                  int64_t now)
{
    struct pgsql_params p;
    pgsql_exec_bind_pair(&p, tenant, user);
    pgsql_param_jtext(&p, 3, text);
    pgsql_param_jint(&p, 4, from);
    pgsql_param_jint(&p, 5, to);
    pgsql_param_int(&p, 6, now);
    return pgsql_exec_run(st->c, which, &p);
}

/* A user's facts through which (PG_FACT_SET or PG_FACT_SEEN). */
static int pgsql_exec_put_facts(struct pgsql_db *st, enum pgsql_stmt which, const char *tenant,
                                const char *user, json_t *facts, int64_t now)
{
    json_t *f;
    size_t i;
    json_array_foreach(facts, i, f) {
        struct pgsql_params p;
        pgsql_exec_bind_pair(&p, tenant, user);
        pgsql_param_jtext(&p, 3, json_object_get(f, "category"));
        pgsql_param_jtext(&p, 4, json_object_get(f, "key"));
        pgsql_param_jtext(&p, 5, json_object_get(f, "value"));
        pgsql_param_double(&p, 6, json_number_value(json_object_get(f, "confidence")));
        pgsql_param_int(&p, 7, now);
        if (pgsql_exec_run(st->c, which, &p) != 0)
            return -1;
    }
    return 0;
}

static int pgsql_exec_user_memory(struct pgsql_db *st, const char *tenant, const char *user,
                                  json_t *m)
{
    int64_t now = util_wall_ms();
    json_t *sum = json_object_get(m, "summary");
    if (pgsql_exec_user(st, PG_USER_SUMMARY_DEL, tenant, user) != 0 ||
        pgsql_exec_user(st, PG_USER_FACTS_DEL, tenant, user) != 0 ||
        pgsql_exec_user(st, PG_USER_BUMP, tenant, user) != 0) /* what they inject changed */
        return -1;
    if (json_is_object(sum) &&
        pgsql_exec_put_summary(st, PG_SUMMARY_SET, tenant, user, json_object_get(sum, "text"),
                               json_object_get(sum, "from_ms"), json_object_get(sum, "to_ms"),
                               now) != 0)
        return -1;
    return pgsql_exec_put_facts(st, PG_FACT_SET, tenant, user, json_object_get(m, "facts"), now);
}

static int pgsql_exec_user_erase(struct pgsql_db *st, const char *tenant, const char *user)
{
    st->erased = 1; /* their sessions are deleted after the commit (pgsql_settle) */
    static const enum pgsql_stmt steps[] = {PG_USER_EMBED_DEL,   PG_USER_SESSIONS,
                                            PG_USER_SUMMARY_DEL, PG_USER_FACTS_DEL,
                                            PG_USER_OUTBOX_DEL,  PG_USER_CACHE_DEL};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(steps); i++)
        if (pgsql_exec_user(st, steps[i], tenant, user) != 0)
            return -1;
    return 0;
}

/* A session from an export: the row as it was, then its turns; fails when the id is taken. */
static int pgsql_exec_import(struct pgsql_db *st, const char *tenant, json_t *snap)
{
    static const char *const cols[] = {"user_id",     "profile",        "status",
                                       "labels",      "metadata",       "system_messages",
                                       "window_hash", "created_ms",     "updated_ms",
                                       "stopped_ms",  "runtime_system", "runtime_params"};
    json_t *sess = json_object_get(snap, "session"), *t;
    struct pgsql_params p;
    size_t i;
    pgsql_params_init(&p);
    pgsql_param_text(&p, 1, tenant);
    pgsql_param_jtext(&p, 2, json_object_get(sess, "id"));
    for (i = 0; i < UTIL_ARRAY_LEN(cols); i++) {
        json_t *v = json_object_get(sess, cols[i]);
        if (json_is_integer(v))
            pgsql_param_jint(&p, (int)i + 3, v);
        else if (json_is_string(v))
            pgsql_param_jtext(&p, (int)i + 3, v);
        else
            pgsql_param_json(&p, (int)i + 3, v);
    }
    PGresult *r = pgsql_exec_stmt(st->c, PG_IMPORT, &p);
    int64_t sid = r && PQntuples(r) == 1 ? pgsql_int(r, 0, 0) : -1;
    PQclear(r);
    if (sid < 0)
        return -1;
    json_array_foreach(json_object_get(snap, "turns"), i, t) {
        pgsql_params_init(&p);
        pgsql_exec_bind_turn(&p, t, 2);
        pgsql_param_int(&p, 1, sid);
        if (pgsql_exec_run(st->c, PG_INSERT, &p) != 0)
            return -1;
    }
    return 0;
}

static int pgsql_exec_outbox(struct pgsql_db *st, const char *tenant, struct store_op *op)
{
    int64_t now = util_wall_ms();
    struct pgsql_params p;
    pgsql_params_init(&p);
    if (op->kind == STORE_OP_OUTBOX_RETRY) {
        pgsql_exec_bind_pair(&p, tenant, op->id);
        pgsql_param_int(&p, 3, now);
        return pgsql_exec_changes(st->c, PG_OUTBOX_RETRY, &p) > 0 ? 0 : -1;
    }
    pgsql_param_jint(&p, 1, json_object_get(op->data, "id"));
    pgsql_param_jtext(&p, 2, json_object_get(op->data, "status"));
    pgsql_param_jint(&p, 3, json_object_get(op->data, "next_ms"));
    pgsql_param_jint(&p, 4, json_object_get(op->data, "code"));
    pgsql_param_jtext(&p, 5, json_object_get(op->data, "error"));
    pgsql_param_int(&p, 6, now);
    return pgsql_exec_run(st->c, PG_OUTBOX_RESULT, &p);
}

/* The user's memory after a summary pass made one: folded in, facts reinforced or decayed. */
static int pgsql_exec_fold(struct pgsql_db *st, const char *tenant, const char *user, json_t *d,
                           json_t *mem, int64_t now)
{
    json_t *text = json_object_get(json_object_get(mem, "summary"), "text");
    if (pgsql_exec_put_summary(st, PG_SUMMARY_FOLD, tenant, user, text,
                               json_object_get(d, "from_ms"), json_object_get(d, "to_ms"),
                               now) != 0 ||
        pgsql_exec_put_facts(st, PG_FACT_SEEN, tenant, user, json_object_get(mem, "facts"), now) !=
            0)
        return -1;
    struct pgsql_params p;
    pgsql_exec_bind_pair(&p, tenant, user);
    pgsql_param_int(&p, 3, now);
    if (pgsql_exec_run(st->c, PG_FACT_DECAY, &p) != 0 ||
        pgsql_exec_user(st, PG_USER_BUMP, tenant, user) != 0) /* what they inject changed */
        return -1;
    return pgsql_exec_user(st, PG_FACT_FORGET, tenant, user);
}

/* A summary pass's outcome (store_batch_summary()). */
static int pgsql_exec_summary(struct pgsql_db *st, const char *tenant, json_t *d)
{
    int64_t now = util_wall_ms();
    const char *sid = json_string_value(json_object_get(d, "session_id"));
    const char *user = json_string_value(json_object_get(d, "user_id"));
    json_t *mem = json_object_get(d, "memory");
    json_t *text = json_object_get(json_object_get(mem, "summary"), "text");
    if (json_is_string(text) && pgsql_exec_fold(st, tenant, user, d, mem, now) != 0)
        return -1;
    json_t *seq = json_object_get(d, "seq");        /* a running session's pass: how far */
    json_t *retry = json_object_get(d, "retry_ms"); /* failed upstream: it waits again */
    struct pgsql_params p;
    pgsql_exec_bind_pair(&p, tenant, sid);
    pgsql_param_int(&p, 3, retry ? json_integer_value(retry) : seq ? json_integer_value(seq) : now);
    if (seq != NULL)
        pgsql_param_jtext(&p, 4, json_object_get(d, "call_summary"));
    if (pgsql_exec_run(st->c,
                       retry ? PG_SUMMARY_RETRY
                       : seq ? PG_SUMMARIZED_SEQ
                             : PG_SUMMARIZED,
                       &p) != 0)
        return -1;
    if (seq != NULL)
        return 0; /* the session goes on: no dumps wait for this one */
    pgsql_exec_bind_pair(&p, tenant, sid);
    pgsql_param_jtext(&p, 3, text);
    pgsql_param_int(&p, 4, now);
    return pgsql_exec_run(st->c, PG_OUTBOX_SUMMARY, &p);
}

static int pgsql_exec_cache_put(struct pgsql_db *st, const char *tenant, json_t *d)
{
    int64_t now = util_wall_ms();
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_jtext(&p, 1, json_object_get(d, "key"));
    pgsql_param_text(&p, 2, tenant);
    pgsql_param_jtext(&p, 3, json_object_get(d, "user_id"));
    pgsql_param_jtext(&p, 4, json_object_get(d, "content"));
    pgsql_param_jtext(&p, 5, json_object_get(d, "model"));
    pgsql_param_int(&p, 6, now);
    pgsql_param_jint(&p, 7, json_object_get(d, "expires_ms"));
    if (pgsql_exec_run(st->c, PG_CACHE_PUT, &p) != 0)
        return -1;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, now);
    return pgsql_exec_run(st->c, PG_CACHE_EXPIRE, &p);
}

/* ---- embeddings ---- */

static void pgsql_exec_bind_key(struct pgsql_params *p, int64_t sid, int64_t seq)
{
    pgsql_params_init(p);
    pgsql_param_int(p, 1, sid);
    pgsql_param_int(p, 2, seq);
}

/* A user turn that reads exactly as the batch's known embedding's text takes it (1); 0 when
 * that does not apply, -1 on failure. */
static int pgsql_exec_embed_known(struct pgsql_db *st, struct store_batch *b, int64_t sid,
                                  json_t *turn, int64_t seq)
{
    const char *role = json_string_value(json_object_get(turn, "role"));
    if (b->known_vec == NULL || role == NULL || strcmp(role, "user") != 0)
        return 0;
    struct pgsql_params p;
    pgsql_exec_bind_key(&p, sid, seq);
    pgsql_param_text(&p, 3, b->known_model);
    pgsql_param_blob(&p, 4, b->known_vec, b->known_len);
    pgsql_param_int(&p, 6, util_wall_ms());
    pgsql_param_text(&p, 7, b->known_text);
    int64_t n = pgsql_exec_changes(st->c, PG_EMBED_PUT, &p);
    return n < 0 ? -1 : n > 0;
}

/* A turn was written: an embedding of its earlier text is stale, and a batch that wants
 * embeddings queues it. */
static int pgsql_exec_embed_turn(struct pgsql_db *st, struct store_batch *b, int64_t sid,
                                 json_t *turn, int64_t seq, int changed)
{
    struct pgsql_params p;
    if (changed) {
        pgsql_exec_bind_key(&p, sid, seq);
        if (pgsql_exec_run(st->c, PG_EMBED_FORGET, &p) != 0)
            return -1;
    }
    if (!b->embed)
        return 0;
    int known = pgsql_exec_embed_known(st, b, sid, turn, seq);
    if (known != 0)
        return known > 0 ? 0 : -1;
    pgsql_exec_bind_key(&p, sid, seq);
    pgsql_param_int(&p, 3, util_wall_ms());
    return pgsql_exec_run(st->c, PG_EMBED_QUEUE, &p);
}

static int pgsql_exec_embedding(struct pgsql_db *st, struct store_op *op)
{
    json_t *d = op->data;
    int64_t sid = json_integer_value(json_object_get(d, "sid"));
    int64_t seq = json_integer_value(json_object_get(d, "seq"));
    json_int_t retry = json_integer_value(json_object_get(d, "retry_ms"));
    struct pgsql_params p;
    pgsql_exec_bind_key(&p, sid, seq);
    if (retry > 0) {
        pgsql_param_int(&p, 3, retry);
        return pgsql_exec_run(st->c, PG_EMBED_RETRY, &p);
    }
    pgsql_param_jtext(&p, 3, json_object_get(d, "model"));
    if (op->blob != NULL)
        pgsql_param_blob(&p, 4, op->blob, op->blob_len);
    else
        pgsql_param_text(&p, 4, NULL);
    pgsql_param_jtext(&p, 5, json_object_get(d, "error"));
    pgsql_param_int(&p, 6, util_wall_ms());
    pgsql_param_jtext(&p, 7, json_object_get(d, "text"));
    int64_t n = pgsql_exec_changes(st->c, PG_EMBED_PUT, &p);
    if (n <= 0)
        return n < 0 ? -1 : 0; /* changed or gone meanwhile: it stays queued */
    pgsql_exec_bind_key(&p, sid, seq);
    return pgsql_exec_run(st->c, PG_EMBED_DONE, &p);
}

static int pgsql_exec_global(struct pgsql_db *st, struct store_batch *b, struct store_op *op)
{
    switch (op->kind) {
    case STORE_OP_IMPORT:
        return pgsql_exec_import(st, b->tenant, op->data);
    case STORE_OP_USER_ERASE:
        return pgsql_exec_user_erase(st, b->tenant, op->id);
    case STORE_OP_USER_MEMORY:
        return pgsql_exec_user_memory(st, b->tenant, op->id, op->data);
    case STORE_OP_SUMMARY:
        return pgsql_exec_summary(st, b->tenant, op->data);
    case STORE_OP_CACHE_PUT:
        return pgsql_exec_cache_put(st, b->tenant, op->data);
    case STORE_OP_EMBEDDING:
        return pgsql_exec_embedding(st, op);
    default:
        return pgsql_exec_outbox(st, b->tenant, op);
    }
}

/* ---- a session's batch ---- */

/* A turn written to a stopped session makes it running again (sqlite_exec.c says why). */
static int pgsql_exec_reopen(struct pgsql_db *st, struct store_batch *b, int64_t sid)
{
    if (b->reopened || b->running)
        return 0;
    b->reopened = 1;
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, sid);
    pgsql_param_int(&p, 2, util_wall_ms());
    return pgsql_exec_run(st->c, PG_REOPEN, &p);
}

/* A turn's statement (insert, update, replace): the rows it wrote, or -1; *seq the turn's, as
 * the database numbered it. An insert takes the seq its replica numbered it with, or, when
 * another replica's turn holds that number already (both numbered from what they had read),
 * the next free one: the session's row lock (pgsql_exec_sid) makes that safe, and the version
 * the batch reports makes the replica read the session again before it numbers another. */
static int64_t pgsql_exec_turn(struct pgsql_db *st, int64_t sid, struct store_op *op, int64_t *seq)
{
    struct pgsql_params p;
    pgsql_params_init(&p);
    *seq = json_integer_value(json_object_get(op->data, "seq"));
    enum pgsql_stmt which = op->kind == STORE_OP_INSERT   ? PG_INSERT
                            : op->kind == STORE_OP_UPDATE ? PG_UPDATE
                                                          : PG_REPLACE;
    if (op->kind == STORE_OP_INSERT)
        pgsql_exec_bind_turn(&p, op->data, 2);
    else
        pgsql_exec_bind_change(&p, op->data, op->kind == STORE_OP_REPLACE, 2);
    pgsql_param_int(&p, 1, sid);
    PGresult *r = pgsql_exec_stmt(st->c, which, &p);
    int64_t n = r ? PQntuples(r) : -1;
    if (n > 0)
        *seq = pgsql_int(r, 0, 0);
    PQclear(r);
    return n;
}

/* The session row's own fields: user and profile, the window, how far it spans. */
static int pgsql_exec_session_fields(struct pgsql_db *st, int64_t sid, struct store_op *op)
{
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, sid);
    switch (op->kind) {
    case STORE_OP_SESSION:
        pgsql_param_text(&p, 2, op->id);
        pgsql_param_text(&p, 3, op->profile);
        return pgsql_exec_run(st->c, PG_SESSION_SET, &p);
    case STORE_OP_WINDOW:
        if (op->data != NULL) {
            pgsql_param_json(&p, 2, op->data);
            if (pgsql_exec_run(st->c, PG_SESSION_SYSTEM, &p) != 0)
                return -1;
            pgsql_params_init(&p);
            pgsql_param_int(&p, 1, sid);
        }
        pgsql_param_int(&p, 2, (int64_t)op->hash);
        return pgsql_exec_run(st->c, PG_SESSION_WINDOW, &p);
    default: /* STORE_OP_WINDOW_TURNS */
        pgsql_param_int(&p, 2, (int64_t)op->hash);
        return pgsql_exec_run(st->c, PG_WINDOW_TURNS, &p);
    }
}

static int pgsql_exec_op(struct pgsql_db *st, struct store_batch *b, int64_t sid,
                         struct store_op *op)
{
    if (b->session_id == NULL)
        return pgsql_exec_global(st, b, op);
    switch (op->kind) {
    case STORE_OP_SESSION:
    case STORE_OP_WINDOW:
    case STORE_OP_WINDOW_TURNS:
        return pgsql_exec_session_fields(st, sid, op);
    case STORE_OP_STOP:
        return pgsql_exec_stop(st, b, sid, op->data);
    case STORE_OP_DELETE:
    case STORE_OP_RUNTIME:
    case STORE_OP_PATCH:
        return pgsql_exec_session_op(st, sid, op);
    case STORE_OP_INSERT:
    case STORE_OP_UPDATE:
    case STORE_OP_REPLACE:
        break;
    default:
        log_error("store: an operation of no session was queued with session '%s'", b->session_id);
        return -1;
    }
    int64_t seq, written = pgsql_exec_turn(st, sid, op, &seq);
    if (written <= 0) /* an insert repeated is skipped */
        return written < 0 ? -1 : 0;
    if (pgsql_exec_reopen(st, b, sid) != 0)
        return -1;
    return pgsql_exec_embed_turn(st, b, sid, op->data, seq, op->kind != STORE_OP_INSERT);
}

void pgsql_exec_apply(struct pgsql_db *st, struct store_batch *b)
{
    b->reopened = b->running = 0; /* a batch run again starts afresh */
    b->version = 0;
    int64_t sid = b->session_id ? pgsql_exec_sid(st, b) : 0;
    b->ok = sid >= 0;
    for (size_t i = 0; b->ok && i < b->n; i++)
        b->ok = pgsql_exec_op(st, b, sid, &b->ops[i]) == 0;
}
