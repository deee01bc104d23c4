#include "memory/pgsql_read.h"

#include "base/util.h"
#include "memory/recall.h"
#include "memory/turnrow.h"

#include <stdlib.h>
#include <string.h>

struct pgsql_reader {
    struct store_reader base; /* first: the store hands readers around as this */
    const struct pgsql_db *st;
    struct pgsql_conn *c;
    int own;
};

struct pgsql_reader *pgsql_read_open(const struct pgsql_db *st, int own, char **err)
{
    struct pgsql_reader *r = xcalloc(1, sizeof(*r));
    r->st = st;
    r->own = own;
    (void)err; /* an own connection is made by the first read (pgsql_conn_lazy) */
    r->c = own ? pgsql_conn_lazy(st->url, st->statement_timeout_ms) : st->c;
    pgsql_conn_set_prepare(r->c, st->prepare);
    return r;
}

void pgsql_read_close(struct pgsql_reader *r)
{
    if (r == NULL)
        return;
    if (r->own)
        pgsql_conn_close(r->c);
    free(r);
}

struct store_reader *pgsql_read_base(struct pgsql_reader *r)
{
    return &r->base;
}

/* Run a read; the result, or NULL with the reader marked failed. Clears p. */
static PGresult *pgsql_read_exec(struct store_reader *base, enum pgsql_stmt which,
                                 struct pgsql_params *p)
{
    struct pgsql_reader *r = (struct pgsql_reader *)base;
    PGresult *res = pgsql_exec_stmt(r->c, which, p);
    base->failed |= res == NULL; /* sticky until store_reader_clear() */
    return res;
}

static void pgsql_read_pair(struct pgsql_params *p, const char *tenant, const char *id)
{
    pgsql_params_init(p);
    pgsql_param_text(p, 1, tenant);
    pgsql_param_text(p, 2, id);
}

/* A row of a result, for turnrow.h's column getter. */
struct pgsql_read_at {
    PGresult *res;
    int row;
};

static json_t *pgsql_read_turn_col(void *arg, int i, int as_json)
{
    struct pgsql_read_at *at = arg;
    return pgsql_value(at->res, at->row, i, as_json);
}

static json_t *pgsql_read_turn_row(PGresult *res, int row)
{
    struct pgsql_read_at at = {res, row};
    return turnrow_json(pgsql_read_turn_col, &at);
}

json_t *pgsql_read_turns_of_result(const PGresult *res)
{
    json_t *out = json_array();
    for (int i = 0; res && i < PQntuples(res); i++)
        json_array_append_new(out, pgsql_read_turn_row((PGresult *)res, i));
    return out;
}

static json_t *pgsql_read_turn_rows(PGresult *res)
{
    json_t *out = pgsql_read_turns_of_result(res);
    PQclear(res);
    return out;
}

/* Row row as an object: names[i] = column i, JSON-decoded where json_cols says (a bit per
 * column). */
static json_t *pgsql_read_row(PGresult *res, int row, const char *const *names, int n,
                              unsigned json_cols)
{
    json_t *o = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(o, names[i], pgsql_value(res, row, i, (json_cols >> i) & 1));
    return o;
}

/* Every row of res as objects (res is cleared). */
static json_t *pgsql_read_rows(PGresult *res, const char *const *names, int n, unsigned json_cols)
{
    json_t *out = json_array();
    for (int i = 0; res && i < PQntuples(res); i++)
        json_array_append_new(out, pgsql_read_row(res, i, names, n, json_cols));
    PQclear(res);
    return out;
}

static void pgsql_read_limit(struct pgsql_params *p, int i, size_t limit)
{
    if (limit > 0)
        pgsql_param_int(p, i, (int64_t)limit);
    else
        pgsql_param_text(p, i, NULL); /* LIMIT NULL: all */
}

json_t *pgsql_read_turns(struct store_reader *base, const char *tenant, const char *session_id,
                         int64_t min_turn, size_t limit)
{
    struct pgsql_params p;
    pgsql_read_pair(&p, tenant, session_id);
    pgsql_param_int(&p, 3, min_turn);
    pgsql_read_limit(&p, 4, limit);
    return pgsql_read_turn_rows(pgsql_read_exec(base, PG_R_TURNS, &p));
}

json_t *pgsql_read_turns_of(struct store_reader *base, const char *tenant, const char *session_id,
                            const int64_t *turn_ids, size_t n, size_t limit)
{
    char *ids = xmalloc(n * 21 + 3), *q = ids; /* "{1,2,...}": 20 digits and a comma each */
    *q++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            *q++ = ',';
        q = util_put_u64(q, (uint64_t)turn_ids[i]); /* the window's ids are >= 0 */
    }
    *q++ = '}';
    *q = '\0';
    struct pgsql_params p;
    pgsql_read_pair(&p, tenant, session_id);
    pgsql_param_text(&p, 3, ids);
    pgsql_read_limit(&p, 4, limit);
    json_t *out = pgsql_read_turn_rows(pgsql_read_exec(base, PG_R_TURNS_OF, &p));
    free(ids);
    return out;
}

json_t *pgsql_read_session_of_result(const PGresult *res)
{
    static const char *const names[] = {"id",           "tenant",      "user_id",
                                        "profile",      "status",      "system_messages",
                                        "window_hash",  "created_ms",  "updated_ms",
                                        "stopped_ms",   "turns",       "runtime_system",
                                        "labels",       "metadata",    "runtime_params",
                                        "call_summary", "through_seq", "window_turns"};
    if (res == NULL || PQntuples(res) != 1)
        return NULL;
    json_t *out =
        pgsql_read_row((PGresult *)res, 0, names, (int)UTIL_ARRAY_LEN(names), 1u << 5 | 0xfu << 11);
    json_t *text = json_object_get(out, "call_summary"); /* {text, through_seq} or null */
    json_object_set_new(out, "call_summary",
                        json_is_string(text) ? json_pack("{s:O, s:O}", "text", text, "through_seq",
                                                         json_object_get(out, "through_seq"))
                                             : json_null());
    json_object_del(out, "through_seq");
    return out;
}

json_t *pgsql_read_session_get(struct store_reader *base, const char *tenant,
                               const char *session_id)
{
    struct pgsql_params p;
    pgsql_read_pair(&p, tenant, session_id);
    PGresult *res = pgsql_read_exec(base, PG_R_SESSION, &p);
    json_t *out = pgsql_read_session_of_result(res);
    PQclear(res);
    return out;
}

json_t *pgsql_read_memory_of_results(const PGresult *summary, const PGresult *facts)
{
    static const char *const sum[] = {"text", "from_ms", "to_ms", "updated_ms"};
    static const char *const fact[] = {"category",   "key",  "value",
                                       "confidence", "seen", "updated_ms"};
    json_t *out = json_pack("{s:n, s:[]}", "summary", "facts");
    if (summary && PQntuples(summary) == 1)
        json_object_set_new(out, "summary", pgsql_read_row((PGresult *)summary, 0, sum, 4, 0));
    for (int i = 0; facts && i < PQntuples(facts); i++)
        json_array_append_new(json_object_get(out, "facts"),
                              pgsql_read_row((PGresult *)facts, i, fact, 6, 0));
    return out;
}

json_t *pgsql_read_user_memory(struct store_reader *base, const char *tenant, const char *user_id,
                               size_t max_facts)
{
    struct pgsql_params p;
    pgsql_read_pair(&p, tenant, user_id);
    PGresult *summary = pgsql_read_exec(base, PG_R_SUMMARY, &p);
    pgsql_read_pair(&p, tenant, user_id);
    pgsql_param_int(&p, 3, (int64_t)max_facts);
    PGresult *facts = pgsql_read_exec(base, PG_R_FACTS, &p);
    json_t *out = pgsql_read_memory_of_results(summary, facts);
    PQclear(summary);
    PQclear(facts);
    return out;
}

/* A page of rows (the last column, the row id, is the next page's cursor):
 * {key: [...], "next": cursor|null}. */
static json_t *pgsql_read_page(PGresult *res, const char *key, const char *const *names, int n,
                               unsigned json_cols, size_t limit)
{
    int rows = res ? PQntuples(res) : 0;
    int64_t last = rows > 0 ? pgsql_int(res, rows - 1, n) : -1;
    json_t *list = pgsql_read_rows(res, names, n, json_cols);
    json_t *out = json_pack("{s:o, s:n}", key, list, "next");
    if (last > 0 && json_array_size(list) == limit)
        json_object_set_new(out, "next", json_integer(last));
    return out;
}

json_t *pgsql_read_sessions(struct store_reader *base, const char *tenant, const char *user_id,
                            const char *status, int64_t before, size_t limit)
{
    static const char *const names[] = {"id",     "user_id",    "profile",    "status",
                                        "labels", "created_ms", "updated_ms", "stopped_ms"};
    struct pgsql_params p;
    pgsql_read_pair(&p, tenant, user_id);
    pgsql_param_text(&p, 3, status);
    pgsql_param_int(&p, 4, before > 0 ? before : INT64_MAX);
    pgsql_param_int(&p, 5, (int64_t)limit);
    return pgsql_read_page(pgsql_read_exec(base, PG_R_LIST, &p), "sessions", names,
                           (int)UTIL_ARRAY_LEN(names), 1u << 4, limit);
}

json_t *pgsql_read_deliveries(struct store_reader *base, const struct store_delivery_query *q)
{
    static const char *const names[] = {"id",         "session_id", "url",         "event",
                                        "status",     "attempts",   "next_try_ms", "last_status",
                                        "last_error", "created_ms", "updated_ms"};
    struct pgsql_params p;
    pgsql_read_pair(&p, q->tenant, q->status);
    pgsql_param_text(&p, 3, q->session_id);
    pgsql_param_text(&p, 4, q->notice_id);
    pgsql_param_int(&p, 5, q->before > 0 ? q->before : INT64_MAX);
    pgsql_param_int(&p, 6, (int64_t)q->limit);
    return pgsql_read_page(pgsql_read_exec(base, PG_R_DELIVERIES, &p), "deliveries", names,
                           (int)UTIL_ARRAY_LEN(names), 0, q->limit);
}

/* A queue's rows due by now_ms ($1), at most limit ($2), as objects of names. */
static json_t *pgsql_read_due(struct store_reader *base, enum pgsql_stmt which,
                              const char *const *names, int n, int64_t now_ms, size_t limit)
{
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, now_ms);
    pgsql_param_int(&p, 2, (int64_t)limit);
    return pgsql_read_rows(pgsql_read_exec(base, which, &p), names, n, 0);
}

/* Take a queue's items due by now_ms, at most limit, for this replica's lease. */
static json_t *pgsql_read_claim(struct store_reader *base, enum pgsql_stmt which,
                                const char *const *names, int n, int64_t now_ms, size_t limit)
{
    const struct pgsql_db *st = ((struct pgsql_reader *)base)->st;
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, now_ms);
    pgsql_param_int(&p, 2, (int64_t)limit);
    pgsql_param_int(&p, 3, st->lease_ms);
    pgsql_param_text(&p, 4, st->owner);
    return pgsql_read_rows(pgsql_read_exec(base, which, &p), names, n, 0);
}

/* A queue's next due time (a MIN() statement), or -1 when it is empty. */
static int64_t pgsql_read_next(struct store_reader *base, enum pgsql_stmt which)
{
    PGresult *res = pgsql_read_exec(base, which, NULL);
    int64_t next =
        res && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) ? pgsql_int(res, 0, 0) : -1;
    PQclear(res);
    return next;
}

json_t *pgsql_read_outbox_due(struct store_reader *base, int64_t now_ms, size_t limit)
{
    static const char *const names[] = {"id",  "notice_id", "tenant",  "session_id",
                                        "url", "event",     "payload", "attempts"};
    return pgsql_read_claim(base, PG_R_OUTBOX_DUE, names, (int)UTIL_ARRAY_LEN(names), now_ms,
                            limit);
}

int64_t pgsql_read_outbox_next(struct store_reader *base)
{
    return pgsql_read_next(base, PG_R_OUTBOX_NEXT);
}

json_t *pgsql_read_idle_sessions(struct store_reader *base, int64_t before_ms, size_t limit)
{
    static const char *const names[] = {"tenant", "id", "profile"};
    return pgsql_read_due(base, PG_R_IDLE, names, 3, before_ms, limit);
}

json_t *pgsql_read_to_summarize(struct store_reader *base, int64_t now_ms, size_t limit)
{
    static const char *const names[] = {"tenant",     "id",         "user_id", "profile",
                                        "created_ms", "stopped_ms", "tries"};
    return pgsql_read_claim(base, PG_R_TO_SUMMARIZE, names, (int)UTIL_ARRAY_LEN(names), now_ms,
                            limit);
}

int64_t pgsql_read_summary_next(struct store_reader *base)
{
    return pgsql_read_next(base, PG_R_SUMMARY_NEXT);
}

json_t *pgsql_read_running_to_summarize(struct store_reader *base, const char *profile,
                                        long threshold, size_t limit)
{
    static const char *const names[] = {"tenant",  "id",         "user_id",
                                        "profile", "created_ms", "updated_ms",
                                        "seq",     "after_seq",  "call_summary"};
    const struct pgsql_db *st = ((struct pgsql_reader *)base)->st;
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_text(&p, 1, profile);
    pgsql_param_int(&p, 2, threshold);
    pgsql_param_int(&p, 3, (int64_t)limit);
    pgsql_param_int(&p, 4, util_wall_ms()); /* taken for the lease, as the queues are */
    pgsql_param_int(&p, 5, st->lease_ms);
    pgsql_param_text(&p, 6, st->owner);
    return pgsql_read_rows(pgsql_read_exec(base, PG_R_RUNNING_TO_SUMMARIZE, &p), names,
                           (int)UTIL_ARRAY_LEN(names), 0);
}

json_t *pgsql_read_cache_get(struct store_reader *base, const char *key, int64_t now_ms)
{
    static const char *const names[] = {"content", "model"};
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_text(&p, 1, key);
    pgsql_param_int(&p, 2, now_ms);
    PGresult *res = pgsql_read_exec(base, PG_R_CACHE_GET, &p);
    json_t *out = res && PQntuples(res) == 1 ? pgsql_read_row(res, 0, names, 2, 0) : NULL;
    PQclear(res);
    return out;
}

json_t *pgsql_read_to_embed(struct store_reader *base, int64_t now_ms, size_t limit)
{
    static const char *const names[] = {"sid", "seq", "profile", "text", "attempts"};
    return pgsql_read_claim(base, PG_R_TO_EMBED, names, (int)UTIL_ARRAY_LEN(names), now_ms, limit);
}

int64_t pgsql_read_embed_next(struct store_reader *base)
{
    return pgsql_read_next(base, PG_R_EMBED_NEXT);
}

int64_t pgsql_read_version(struct store_reader *base, const char *tenant, const char *session_id)
{
    struct pgsql_params p;
    pgsql_read_pair(&p, tenant, session_id);
    PGresult *res = pgsql_read_exec(base, PG_R_VERSION, &p);
    int64_t v = !res ? -1 : PQntuples(res) == 1 ? pgsql_int(res, 0, 0) : 0;
    PQclear(res);
    return v;
}

/* The scope of a lookup: $1 tenant, $2 the user (or, without one, the session); the
 * statement to run (by_user or its session twin). *user is the caller's to free. */
static enum pgsql_stmt pgsql_read_scope(struct store_reader *base, enum pgsql_stmt by_user,
                                        const char *tenant, const char *user_id,
                                        const char *session_id, struct pgsql_params *p, char **user)
{
    *user = user_id ? xstrdup(user_id) : NULL;
    if (*user == NULL) {
        pgsql_read_pair(p, tenant, session_id);
        PGresult *res = pgsql_read_exec(base, PG_R_SESSION_USER, p);
        if (res && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
            *user = xstrdup(PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    pgsql_read_pair(p, tenant, *user ? *user : session_id);
    return *user ? by_user : by_user + 1;
}

int pgsql_read_recall_embedded(struct store_reader *base, const char *tenant, const char *user_id,
                               const char *session_id)
{
    struct pgsql_params p;
    char *user;
    enum pgsql_stmt which =
        pgsql_read_scope(base, PG_R_EMBEDDED_USER, tenant, user_id, session_id, &p, &user);
    PGresult *res = pgsql_read_exec(base, which, &p);
    int found = res && PQntuples(res) > 0;
    PQclear(res);
    free(user);
    return found;
}

void pgsql_read_recall(struct store_reader *base, const char *tenant, const char *user_id,
                       const char *session_id, size_t limit, struct recall_pick *pick)
{
    struct pgsql_params p;
    char *user;
    enum pgsql_stmt which =
        pgsql_read_scope(base, PG_R_RECALL_USER, tenant, user_id, session_id, &p, &user);
    pgsql_param_int(&p, 3, (int64_t)limit);
    PGresult *res = pgsql_read_exec(base, which, &p);
    for (int i = 0; res && i < PQntuples(res); i++) {
        size_t vlen = 0;
        unsigned char *vec = NULL;
        if (!PQgetisnull(res, i, 6))
            vec = PQunescapeBytea((const unsigned char *)PQgetvalue(res, i, 6), &vlen);
        recall_pick_offer(pick, pgsql_int(res, i, 0), pgsql_int(res, i, 1), PQgetvalue(res, i, 2),
                          PQgetvalue(res, i, 3), pgsql_int(res, i, 4),
                          strtod(PQgetvalue(res, i, 5), NULL), vec, vlen);
        PQfreemem(vec);
    }
    PQclear(res);
    free(user);
}
