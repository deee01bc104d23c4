#include "memory/sqlite_read.h"

#include "base/jtext.h"
#include "base/util.h"
#include "memory/recall.h"
#include "memory/turnrow.h"

#include <string.h>

struct sqlite_reader *sqlite_read_open(struct sqlite_db *st, char **err)
{
    struct sqlite_reader *r = xcalloc(1, sizeof(*r));
    r->own_db = 1;
    if (sqlite3_open_v2(st->path, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        sqlite3_busy_timeout(r->db, (int)st->opts.busy_timeout_ms) != SQLITE_OK ||
        sqlite_schema_prepare_reader(r) != 0) {
        *err = xasprintf("%s: cannot open for reading: %s", st->path, sqlite3_errmsg(r->db));
        sqlite_read_close(r);
        return NULL;
    }
    return r;
}

void sqlite_read_close(struct sqlite_reader *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < RS__COUNT; i++)
        sqlite3_finalize(r->stmt[i]);
    if (r->own_db)
        sqlite3_close(r->db);
    free(r);
}

static void sqlite_read_rdone(sqlite3_stmt *s)
{
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
}

static json_t *sqlite_read_col(sqlite3_stmt *s, int i, int as_json)
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

static json_t *sqlite_read_turn_col(void *row, int i, int as_json)
{
    return sqlite_read_col(row, i, as_json);
}

static json_t *sqlite_read_turn_row(sqlite3_stmt *s)
{
    return turnrow_json(sqlite_read_turn_col, s);
}

/* The current row as an object: names[i] = column i, JSON-decoded where json_cols says
 * (a bit per column). */
static json_t *sqlite_read_row(sqlite3_stmt *s, const char *const *names, int n, unsigned json_cols)
{
    json_t *row = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(row, names[i], sqlite_read_col(s, i, (json_cols >> i) & 1));
    return row;
}

json_t *sqlite_read_turns(struct store_reader *base, const char *tenant, const char *session_id,
                          int64_t min_turn, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[RS_TURNS];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, session_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, min_turn);
    sqlite3_bind_int64(s, 4, limit ? (sqlite3_int64)limit : -1);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, sqlite_read_turn_row(s));
    sqlite_read_rdone(s);
    return out;
}

json_t *sqlite_read_turns_of(struct store_reader *base, const char *tenant, const char *session_id,
                             const int64_t *turn_ids, size_t n, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
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
        json_array_append_new(out, sqlite_read_turn_row(s));
    sqlite_read_rdone(s);
    free(ids);
    return out;
}

/* The row's call_summary text and through_seq as one field: {text, through_seq} or null. */
static void sqlite_read_call_summary(json_t *row)
{
    json_t *text = json_object_get(row, "call_summary");
    json_t *seq = json_object_get(row, "through_seq");
    json_object_set_new(row, "call_summary",
                        json_is_string(text)
                            ? json_pack("{s:O, s:O}", "text", text, "through_seq", seq)
                            : json_null());
    json_object_del(row, "through_seq");
}

json_t *sqlite_read_session_get(struct store_reader *base, const char *tenant,
                                const char *session_id)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"id",           "tenant",      "user_id",
                                        "profile",      "status",      "system_messages",
                                        "window_hash",  "created_ms",  "updated_ms",
                                        "stopped_ms",   "turns",       "runtime_system",
                                        "labels",       "metadata",    "runtime_params",
                                        "call_summary", "through_seq", "window_turns"};
    sqlite3_stmt *s = r->stmt[RS_SESSION];
    json_t *out = NULL;
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, session_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        out = sqlite_read_row(s, names, (int)UTIL_ARRAY_LEN(names), 1u << 5 | 0xfu << 11);
    sqlite_read_rdone(s);
    if (out != NULL) /* {text, through_seq} or null */
        sqlite_read_call_summary(out);
    return out;
}

json_t *sqlite_read_user_memory(struct store_reader *base, const char *tenant, const char *user_id,
                                size_t max_facts)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const sum[] = {"text", "from_ms", "to_ms", "updated_ms"};
    static const char *const fact[] = {"category",   "key",  "value",
                                       "confidence", "seen", "updated_ms"};
    json_t *out = json_pack("{s:n, s:[]}", "summary", "facts");
    sqlite3_stmt *s = r->stmt[RS_SUMMARY];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW)
        json_object_set_new(out, "summary", sqlite_read_row(s, sum, 4, 0));
    sqlite_read_rdone(s);
    s = r->stmt[RS_FACTS];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)max_facts);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(json_object_get(out, "facts"), sqlite_read_row(s, fact, 6, 0));
    sqlite_read_rdone(s);
    return out;
}

/* Rows of s as objects (the last column, the row id, is the cursor of the next page):
 * {key: [...], "next": cursor|null}. */
static json_t *sqlite_read_page(sqlite3_stmt *s, const char *key, const char *const *names, int n,
                                unsigned json_cols, size_t limit)
{
    json_t *list = json_array();
    int64_t last = -1;
    while (sqlite3_step(s) == SQLITE_ROW) {
        json_array_append_new(list, sqlite_read_row(s, names, n, json_cols));
        last = sqlite3_column_int64(s, n);
    }
    sqlite_read_rdone(s);
    json_t *out = json_pack("{s:o, s:n}", key, list, "next");
    if (last > 0 && json_array_size(list) == limit)
        json_object_set_new(out, "next", json_integer(last));
    return out;
}

json_t *sqlite_read_sessions(struct store_reader *base, const char *tenant, const char *user_id,
                             const char *status, int64_t before, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"id",     "user_id",    "profile",    "status",
                                        "labels", "created_ms", "updated_ms", "stopped_ms"};
    sqlite3_stmt *s = r->stmt[RS_LIST];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, user_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, status, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, before > 0 ? before : INT64_MAX);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)limit);
    return sqlite_read_page(s, "sessions", names, (int)UTIL_ARRAY_LEN(names), 1u << 4, limit);
}

json_t *sqlite_read_deliveries(struct store_reader *base, const struct store_delivery_query *q)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
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
    return sqlite_read_page(s, "deliveries", names, (int)UTIL_ARRAY_LEN(names), 0, q->limit);
}

/* A queue's rows due by now_ms (?1), at most limit (?2), as objects of names. */
static json_t *sqlite_read_due(struct sqlite_reader *r, enum sqlite_rstmt which,
                               const char *const *names, int n, int64_t now_ms, size_t limit)
{
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[which];
    sqlite3_bind_int64(s, 1, now_ms);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, sqlite_read_row(s, names, n, 0));
    sqlite_read_rdone(s);
    return out;
}

/* A queue's next due time (a MIN() statement), or -1 when it is empty. */
static int64_t sqlite_read_next(struct sqlite_reader *r, enum sqlite_rstmt which)
{
    sqlite3_stmt *s = r->stmt[which];
    int64_t next = -1;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_INTEGER)
        next = sqlite3_column_int64(s, 0);
    sqlite_read_rdone(s);
    return next;
}

json_t *sqlite_read_outbox_due(struct store_reader *base, int64_t now_ms, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"id",  "notice_id", "tenant",  "session_id",
                                        "url", "event",     "payload", "attempts"};
    return sqlite_read_due(r, RS_OUTBOX_DUE, names, (int)UTIL_ARRAY_LEN(names), now_ms, limit);
}

int64_t sqlite_read_outbox_next(struct store_reader *base)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    return sqlite_read_next(r, RS_OUTBOX_NEXT);
}

json_t *sqlite_read_idle_sessions(struct store_reader *base, int64_t before_ms, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"tenant", "id", "profile"};
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[RS_IDLE];
    sqlite3_bind_int64(s, 1, before_ms);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, sqlite_read_row(s, names, 3, 0));
    sqlite_read_rdone(s);
    return out;
}

json_t *sqlite_read_to_summarize(struct store_reader *base, int64_t now_ms, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"tenant",     "id",         "user_id", "profile",
                                        "created_ms", "stopped_ms", "tries"};
    return sqlite_read_due(r, RS_TO_SUMMARIZE, names, (int)UTIL_ARRAY_LEN(names), now_ms, limit);
}

int64_t sqlite_read_summary_next(struct store_reader *base)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    return sqlite_read_next(r, RS_SUMMARY_NEXT);
}

json_t *sqlite_read_running_to_summarize(struct store_reader *base, const char *profile,
                                         long threshold, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"tenant",  "id",         "user_id",
                                        "profile", "created_ms", "updated_ms",
                                        "seq",     "after_seq",  "call_summary"};
    json_t *out = json_array();
    sqlite3_stmt *s = r->stmt[RS_RUNNING_TO_SUMMARIZE];
    sqlite3_bind_text(s, 1, profile, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, threshold);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, sqlite_read_row(s, names, (int)UTIL_ARRAY_LEN(names), 0));
    sqlite_read_rdone(s);
    return out;
}

json_t *sqlite_read_cache_get(struct store_reader *base, const char *key, int64_t now_ms)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"content", "model"};
    json_t *out = NULL;
    sqlite3_stmt *s = r->stmt[RS_CACHE_GET];
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_ms);
    if (sqlite3_step(s) == SQLITE_ROW)
        out = sqlite_read_row(s, names, 2, 0);
    sqlite_read_rdone(s);
    return out;
}

json_t *sqlite_read_to_embed(struct store_reader *base, int64_t now_ms, size_t limit)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    static const char *const names[] = {"sid", "seq", "profile", "text", "attempts"};
    return sqlite_read_due(r, RS_TO_EMBED, names, (int)UTIL_ARRAY_LEN(names), now_ms, limit);
}

int64_t sqlite_read_embed_next(struct store_reader *base)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    return sqlite_read_next(r, RS_EMBED_NEXT);
}

/* The user of a session, or NULL (new). */
static char *sqlite_read_session_user(struct sqlite_reader *r, const char *tenant, const char *id)
{
    sqlite3_stmt *s = r->stmt[RS_SESSION_USER];
    char *user = NULL;
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_TEXT)
        user = xstrdup((const char *)sqlite3_column_text(s, 0));
    sqlite_read_rdone(s);
    return user;
}

/* The scope of a lookup: ?1 tenant, ?2 the user (or, without one, the session). */
static sqlite3_stmt *sqlite_read_recall_scope(struct sqlite_reader *r, enum sqlite_rstmt by_user,
                                              const char *tenant, const char *user_id,
                                              const char *session_id, char **user)
{
    *user = user_id ? xstrdup(user_id) : sqlite_read_session_user(r, tenant, session_id);
    sqlite3_stmt *s = r->stmt[*user ? by_user : by_user + 1];
    sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, *user ? *user : session_id, -1, SQLITE_STATIC);
    return s;
}

int sqlite_read_recall_embedded(struct store_reader *base, const char *tenant, const char *user_id,
                                const char *session_id)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    char *user;
    sqlite3_stmt *s =
        sqlite_read_recall_scope(r, RS_EMBEDDED_USER, tenant, user_id, session_id, &user);
    int found = sqlite3_step(s) == SQLITE_ROW;
    sqlite_read_rdone(s);
    free(user);
    return found;
}

void sqlite_read_recall(struct store_reader *base, const char *tenant, const char *user_id,
                        const char *session_id, size_t limit, struct recall_pick *p)
{
    struct sqlite_reader *r = (struct sqlite_reader *)base;
    char *user;
    sqlite3_stmt *s =
        sqlite_read_recall_scope(r, RS_RECALL_USER, tenant, user_id, session_id, &user);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)limit);
    while (sqlite3_step(s) == SQLITE_ROW)
        recall_pick_offer(p, sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1),
                          (const char *)sqlite3_column_text(s, 2),
                          (const char *)sqlite3_column_text(s, 3), sqlite3_column_int64(s, 4),
                          sqlite3_column_double(s, 5), sqlite3_column_blob(s, 6),
                          (size_t)sqlite3_column_bytes(s, 6));
    sqlite_read_rdone(s);
    free(user);
}
