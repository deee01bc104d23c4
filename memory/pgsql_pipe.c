#include "memory/pgsql_pipe.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/pgsql_exec.h"

#include <stdio.h>
#include <string.h>

int pgsql_pipe_fits(const struct store_batch *list)
{
    for (const struct store_batch *b = list; b != NULL; b = b->next) {
        if (b->session_id == NULL || b->existing || b->embed)
            return 0;
        for (size_t i = 0; i < b->n; i++) {
            switch (b->ops[i].kind) {
            case STORE_OP_SESSION:
            case STORE_OP_WINDOW:
            case STORE_OP_WINDOW_TURNS:
            case STORE_OP_INSERT:
            case STORE_OP_UPDATE:
            case STORE_OP_REPLACE:
                break;
            default:
                return 0;
            }
        }
    }
    return 1;
}

/* The statements a pipelined group uses, prepared before the pipeline (where PQprepare
 * cannot run) when named statements are on. */
static const enum pgsql_stmt pgsql_pipe_stmts[] = {
    PG_SESSION_ENSURE, PG_P_SESSION_SET, PG_P_SYSTEM, PG_P_WINDOW,
    PG_P_WINDOW_TURNS, PG_P_INSERT,      PG_P_UPDATE, PG_P_REPLACE};

static void pgsql_pipe_prepare(struct pgsql_conn *c)
{
    char name[16];
    for (size_t i = 0; i < UTIL_ARRAY_LEN(pgsql_pipe_stmts); i++)
        pgsql_conn_prepare(c, (int)pgsql_pipe_stmts[i], pgsql_schema_sql(pgsql_pipe_stmts[i]),
                           name);
}

/* Queue one statement (p NULL: none; cleared here); which -1: sql is a literal one. */
static int pgsql_pipe_send(struct pgsql_conn *c, int which, const char *sql, struct pgsql_params *p)
{
    static const char *const none[1] = {NULL};
    static const int zero[1] = {0};
    PGconn *pg = pgsql_conn_pg(c);
    int n = p ? p->n : 0;
    const char *const *v = p ? p->v : none;
    const int *len = p ? p->len : zero, *fmt = p ? p->fmt : zero;
    char name[16];
    int ok = which >= 0 && pgsql_conn_prepare(c, which, sql, name)
                 ? PQsendQueryPrepared(pg, name, n, v, len, fmt, 0)
                 : PQsendQueryParams(pg, sql, n, NULL, v, len, fmt, 0);
    if (p != NULL)
        pgsql_params_clear(p);
    return ok ? 0 : -1;
}

static int pgsql_pipe_stmt(struct pgsql_conn *c, enum pgsql_stmt which, struct pgsql_params *p)
{
    return pgsql_pipe_send(c, (int)which, pgsql_schema_sql(which), p);
}

/* $1 tenant, $2 session, $3 now: how every statement of a batch finds its session. */
static void pgsql_pipe_key(struct pgsql_params *p, const struct store_batch *b, int64_t now)
{
    pgsql_params_init(p);
    pgsql_param_text(p, 1, b->tenant);
    pgsql_param_text(p, 2, b->session_id);
    pgsql_param_int(p, 3, now);
}

/* One op's statements (a window with new system messages is two). */
static int pgsql_pipe_op(struct pgsql_conn *c, const struct store_batch *b,
                         const struct store_op *op, int64_t now, int *sent)
{
    struct pgsql_params p;
    enum pgsql_stmt which;
    pgsql_pipe_key(&p, b, now);
    switch (op->kind) {
    case STORE_OP_SESSION:
        pgsql_param_text(&p, 3, op->id);
        pgsql_param_text(&p, 4, op->profile);
        which = PG_P_SESSION_SET;
        break;
    case STORE_OP_WINDOW:
        if (op->data != NULL) {
            struct pgsql_params q;
            pgsql_pipe_key(&q, b, now);
            pgsql_param_json(&q, 3, op->data);
            if (pgsql_pipe_stmt(c, PG_P_SYSTEM, &q) != 0)
                return -1;
            (*sent)++;
        }
        pgsql_param_int(&p, 3, (int64_t)op->hash);
        which = PG_P_WINDOW;
        break;
    case STORE_OP_WINDOW_TURNS:
        pgsql_param_int(&p, 3, (int64_t)op->hash);
        which = PG_P_WINDOW_TURNS;
        break;
    case STORE_OP_INSERT:
        pgsql_exec_bind_turn(&p, op->data, 4);
        which = PG_P_INSERT;
        break;
    default: /* STORE_OP_UPDATE, STORE_OP_REPLACE */
        pgsql_exec_bind_change(&p, op->data, op->kind == STORE_OP_REPLACE, 4);
        which = op->kind == STORE_OP_UPDATE ? PG_P_UPDATE : PG_P_REPLACE;
        break;
    }
    (*sent)++;
    return pgsql_pipe_stmt(c, which, &p);
}

/* Whether b is of the same session as the batch before it (a request's turns and its
 * reply's, in one group): its session row was found, locked and counted up just before, so
 * b needs no statement of its own for it and takes that version (the working set then sees
 * it unchanged: workset_settled). */
static int pgsql_pipe_follows(const struct store_batch *prev, const struct store_batch *b)
{
    return prev != NULL && strcmp(prev->tenant, b->tenant) == 0 &&
           strcmp(prev->session_id, b->session_id) == 0;
}

/* BEGIN (with the statement timeout), each batch's session row, its ops, COMMIT, a sync.
 * *sent counts the statements queued. */
static int pgsql_pipe_queue(struct pgsql_db *st, struct store_batch *list, int *sent)
{
    int64_t now = util_wall_ms();
    char timeout[64];
    snprintf(timeout, sizeof(timeout), "SET LOCAL statement_timeout = %ld",
             st->statement_timeout_ms);
    struct pgsql_conn *c = st->c;
    if (pgsql_pipe_send(c, -1, "BEGIN", NULL) != 0 ||
        (st->statement_timeout_ms > 0 && pgsql_pipe_send(c, -1, timeout, NULL) != 0))
        return -1;
    *sent = st->statement_timeout_ms > 0 ? 2 : 1;
    for (struct store_batch *b = list, *prev = NULL; b != NULL; prev = b, b = b->next) {
        if (!pgsql_pipe_follows(prev, b)) {
            struct pgsql_params p;
            pgsql_pipe_key(&p, b, now);
            pgsql_param_int(&p, 4, st->opts.touch_ms);
            if (pgsql_pipe_stmt(c, PG_SESSION_ENSURE, &p) != 0)
                return -1;
            (*sent)++;
        }
        for (size_t i = 0; i < b->n; i++)
            if (pgsql_pipe_op(c, b, &b->ops[i], now, sent) != 0)
                return -1;
    }
    (*sent)++;
    return pgsql_pipe_send(c, -1, "COMMIT", NULL) == 0 && PQpipelineSync(pgsql_conn_pg(c)) ? 0 : -1;
}

/* The next statement's result, skipping the NULL that ends each one's; NULL when the
 * connection has nothing more to give. */
static PGresult *pgsql_pipe_next(PGconn *pg)
{
    for (int nulls = 0; nulls < 2; nulls++) {
        PGresult *r = PQgetResult(pg);
        if (r != NULL)
            return r;
        if (PQstatus(pg) != CONNECTION_OK)
            return NULL;
    }
    return NULL;
}

/* The answers, in the order sent: every statement's, then the sync. Only the session rows
 * (PG_SESSION_ENSURE, one per batch but those that follow their session's, in order) return
 * rows: they give the batches' versions.
 * 0 when all succeeded. */
static int pgsql_pipe_collect(PGconn *pg, struct store_batch *list, int sent)
{
    int ok = 1;
    struct store_batch *b = list;
    for (int i = 0; i < sent; i++) {
        PGresult *r = pgsql_pipe_next(pg);
        if (r == NULL)
            return -1;
        ExecStatusType rs = PQresultStatus(r);
        if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
            if (ok && rs != PGRES_PIPELINE_ABORTED)
                log_error("postgresql: %s", PQresultErrorMessage(r));
            ok = 0;
        } else if (rs == PGRES_TUPLES_OK && b != NULL) { /* the next session row */
            int64_t v = PQntuples(r) == 1 ? pgsql_int(r, 0, 2) : 0;
            struct store_batch *prev;
            do {
                b->version = v;
                prev = b;
                b = b->next;
            } while (b != NULL && pgsql_pipe_follows(prev, b));
        }
        PQclear(r);
    }
    PGresult *sync = pgsql_pipe_next(pg);
    int synced = sync != NULL && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    return ok && synced ? 0 : -1;
}

int pgsql_pipe_transaction(struct pgsql_db *st, struct store_batch *list)
{
    PGconn *pg = pgsql_conn_pg(st->c);
    int sent = 0, rc = -1;
    for (struct store_batch *b = list; b != NULL; b = b->next)
        b->version = 0;
    if (PQstatus(pg) != CONNECTION_OK)
        return -1;
    pgsql_pipe_prepare(st->c);
    if (!PQenterPipelineMode(pg))
        return -1;
    if (pgsql_pipe_queue(st, list, &sent) == 0)
        rc = pgsql_pipe_collect(pg, list, sent);
    else
        log_error("postgresql: %s", PQerrorMessage(pg));
    if (!PQexitPipelineMode(pg)) /* answers left over: the connection is not to be trusted */
        pgsql_conn_reset(st->c);
    for (struct store_batch *b = list; b != NULL; b = b->next)
        b->ok = rc == 0;
    if (rc != 0 && PQstatus(pg) == CONNECTION_OK)
        pgsql_conn_run(st->c, "ROLLBACK", NULL); /* an error left the transaction open */
    return rc;
}
