#include "memory/pgsql_conn.h"
#include "memory/pgsql_resolve.h"

#include "base/jtext.h"
#include "base/log.h"
#include "base/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PostgreSQL's type oids (pg_type.h, stable across versions) */
#define PGSQL_BOOLOID    16
#define PGSQL_INT8OID    20
#define PGSQL_INT2OID    21
#define PGSQL_INT4OID    23
#define PGSQL_FLOAT4OID  700
#define PGSQL_FLOAT8OID  701
#define PGSQL_NUMERICOID 1700

struct pgsql_conn {
    PGconn *pg; /* NULL: not connected yet (pgsql_conn_lazy) */
    char *url;  /* pgsql_conn_lazy's, for the first statement's connect */
    long statement_timeout_ms;
    int prepare;                               /* named statements (pgsql_conn_set_prepare) */
    unsigned char ready[PGSQL_MAX_STATEMENTS]; /* which are prepared on this connection */
    int broken; /* statements that failed on a connection that went away */
    char *last_error;
};

static void pgsql_conn_set_error(struct pgsql_conn *c, const char *msg)
{
    free(c->last_error);
    c->last_error = xstrdup(msg ? msg : "?");
    size_t n = strlen(c->last_error); /* libpq ends its messages with a newline */
    while (n > 0 && (c->last_error[n - 1] == '\n' || c->last_error[n - 1] == ' '))
        c->last_error[--n] = '\0';
}

void pgsql_conn_params(struct pgsql_conn_params *cp, const char *url, long statement_timeout_ms)
{
    snprintf(cp->options, sizeof(cp->options), "-c statement_timeout=%ld", statement_timeout_ms);
    /* before dbname: what url says itself wins over these; after it, client_encoding:
     * jansson's strings are UTF-8, whatever url says */
    static const char *const keys[] = {"connect_timeout", "application_name", "options",
                                       "dbname",          "client_encoding",  NULL};
    memcpy(cp->keys, keys, sizeof(keys));
    cp->vals[0] = "5";
    cp->vals[1] = "memproxy";
    cp->vals[2] = statement_timeout_ms > 0 ? cp->options : "";
    cp->vals[3] = url;
    cp->vals[4] = "UTF8";
    cp->vals[5] = NULL;
}

void pgsql_conn_params_to(struct pgsql_conn_params *cp, const struct pgsql_target *t)
{
    int n = 0;
    while (cp->keys[n] != NULL) /* after them all, so after dbname: these win over url's */
        n++;
    cp->keys[n] = "host";
    cp->vals[n++] = t->host;
    cp->keys[n] = "hostaddr";
    cp->vals[n++] = t->hostaddr;
    if (t->port != NULL) {
        cp->keys[n] = "port";
        cp->vals[n++] = t->port;
    }
    cp->keys[n] = NULL;
    cp->vals[n] = NULL;
}

struct pgsql_conn *pgsql_conn_open(const char *url, long statement_timeout_ms, char **err)
{
    struct pgsql_conn_params cp;
    pgsql_conn_params(&cp, url, statement_timeout_ms);
    struct pgsql_conn *c = xcalloc(1, sizeof(*c));
    c->pg = PQconnectdbParams(cp.keys, cp.vals, 1);
    if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK) {
        pgsql_conn_set_error(c, c->pg ? PQerrorMessage(c->pg) : "out of memory");
        *err = xasprintf("postgresql: cannot connect: %s", c->last_error);
        pgsql_conn_close(c);
        return NULL;
    }
    return c;
}

struct pgsql_conn *pgsql_conn_lazy(const char *url, long statement_timeout_ms)
{
    struct pgsql_conn *c = xcalloc(1, sizeof(*c));
    c->url = xstrdup(url);
    c->statement_timeout_ms = statement_timeout_ms;
    return c;
}

void pgsql_conn_close(struct pgsql_conn *c)
{
    if (c == NULL)
        return;
    PQfinish(c->pg);
    free(c->url);
    free(c->last_error);
    free(c);
}

PGconn *pgsql_conn_pg(struct pgsql_conn *c)
{
    return c->pg;
}

const char *pgsql_conn_error(struct pgsql_conn *c)
{
    return c->last_error ? c->last_error : "";
}

int pgsql_conn_broken(struct pgsql_conn *c)
{
    return c->broken;
}

/* A connection the server closed (a restart, a failover, an idle timeout in between) is
 * connected again here, before a statement, never in the middle of a transaction. */
static int pgsql_conn_ensure(struct pgsql_conn *c)
{
    if (c->pg == NULL && c->url != NULL) { /* a lazy connection's first statement */
        struct pgsql_conn_params cp;
        pgsql_conn_params(&cp, c->url, c->statement_timeout_ms);
        c->pg = PQconnectdbParams(cp.keys, cp.vals, 1);
        if (c->pg == NULL)
            log_fatal("postgresql: out of memory");
        if (PQstatus(c->pg) == CONNECTION_OK)
            return 0;
        pgsql_conn_set_error(c, PQerrorMessage(c->pg));
        return -1;
    }
    if (PQstatus(c->pg) == CONNECTION_OK)
        return 0;
    PQreset(c->pg);
    memset(c->ready, 0, sizeof(c->ready)); /* a new server session has none */
    if (PQstatus(c->pg) == CONNECTION_OK) {
        log_info("postgresql: connected again");
        return 0;
    }
    pgsql_conn_set_error(c, PQerrorMessage(c->pg));
    return -1;
}

void pgsql_conn_reset(struct pgsql_conn *c)
{
    if (c->pg != NULL)
        PQreset(c->pg);
    memset(c->ready, 0, sizeof(c->ready));
}

void pgsql_conn_set_prepare(struct pgsql_conn *c, int on)
{
    c->prepare = on;
}

int pgsql_conn_prepare(struct pgsql_conn *c, int id, const char *sql, char name[16])
{
    if (!c->prepare || id < 0 || id >= PGSQL_MAX_STATEMENTS)
        return 0;
    snprintf(name, 16, "mp%d", id);
    if (c->ready[id])
        return 1;
    PGresult *r = PQprepare(c->pg, name, sql, 0, NULL);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        log_error("postgresql: cannot prepare a statement: %s", PQresultErrorMessage(r));
    PQclear(r);
    c->ready[id] = (unsigned char)ok;
    return ok;
}

static PGresult *pgsql_conn_send(struct pgsql_conn *c, int id, const char *sql,
                                 struct pgsql_params *p)
{
    static const char *const none[1] = {NULL};
    static const int zero[1] = {0};
    char name[16];
    int n = p ? p->n : 0;
    const char *const *v = p ? p->v : none;
    const int *len = p ? p->len : zero, *fmt = p ? p->fmt : zero;
    if (pgsql_conn_prepare(c, id, sql, name))
        return PQexecPrepared(c->pg, name, n, v, len, fmt, 0);
    return PQexecParams(c->pg, sql, n, NULL, v, len, fmt, 0);
}

PGresult *pgsql_conn_exec(struct pgsql_conn *c, const char *sql, struct pgsql_params *p)
{
    return pgsql_conn_exec_id(c, -1, sql, p);
}

PGresult *pgsql_conn_exec_id(struct pgsql_conn *c, int id, const char *sql, struct pgsql_params *p)
{
    if (pgsql_conn_ensure(c) != 0) {
        c->broken++;
        return NULL;
    }
    int alone = PQtransactionStatus(c->pg) == PQTRANS_IDLE;
    PGresult *r = pgsql_conn_send(c, id, sql, p);
    /* A connection the server dropped (a restart) shows only when a statement fails on it:
     * a statement of its own (no transaction open) is sent once more on a new one. */
    if (alone && PQstatus(c->pg) == CONNECTION_BAD) {
        PQclear(r);
        r = pgsql_conn_ensure(c) == 0 ? pgsql_conn_send(c, id, sql, p) : NULL;
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return r;
    pgsql_conn_set_error(c, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    if (PQstatus(c->pg) != CONNECTION_OK)
        c->broken++;
    /* a unique violation is an answer some callers expect (an import's taken id) */
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (state == NULL || strcmp(state, "23505") != 0)
        log_error("postgresql: %s", c->last_error);
    PQclear(r);
    return NULL;
}

int pgsql_conn_run(struct pgsql_conn *c, const char *sql, struct pgsql_params *p)
{
    PGresult *r = pgsql_conn_exec(c, sql, p);
    PQclear(r);
    return r ? 0 : -1;
}

int64_t pgsql_changes(PGresult *r)
{
    const char *n = PQcmdTuples(r);
    return n && *n ? strtoll(n, NULL, 10) : 0;
}

/* ---- parameters ---- */

void pgsql_params_init(struct pgsql_params *p)
{
    memset(p, 0, sizeof(*p));
}

void pgsql_params_clear(struct pgsql_params *p)
{
    for (int i = 0; i < PGSQL_MAX_PARAMS; i++)
        free(p->owned[i]);
    pgsql_params_init(p);
}

/* Slot i (1-based) with v as text (NULL: SQL NULL). */
static void pgsql_param_set(struct pgsql_params *p, int i, const char *v)
{
    if (i < 1 || i > PGSQL_MAX_PARAMS)
        log_fatal("postgresql: parameter $%d out of range", i);
    free(p->owned[i - 1]);
    p->owned[i - 1] = NULL;
    p->v[i - 1] = v;
    p->len[i - 1] = 0;
    p->fmt[i - 1] = 0;
    if (i > p->n)
        p->n = i;
}

void pgsql_params_copy(struct pgsql_params *dst, const struct pgsql_params *src)
{
    pgsql_params_init(dst);
    dst->n = src->n;
    for (int i = 0; i < src->n; i++) {
        dst->len[i] = src->len[i];
        dst->fmt[i] = src->fmt[i];
        if (src->v[i] == NULL)
            continue;
        size_t n = src->fmt[i] ? (size_t)src->len[i] : strlen(src->v[i]) + 1;
        dst->owned[i] = xmalloc(n ? n : 1);
        memcpy(dst->owned[i], src->v[i], n);
        dst->v[i] = dst->owned[i];
    }
}

void pgsql_param_text(struct pgsql_params *p, int i, const char *s)
{
    pgsql_param_set(p, i, s);
}

void pgsql_param_int(struct pgsql_params *p, int i, int64_t v)
{
    pgsql_param_set(p, i, NULL);
    snprintf(p->num[i - 1], sizeof(p->num[0]), "%" PRId64, v);
    p->v[i - 1] = p->num[i - 1];
}

void pgsql_param_double(struct pgsql_params *p, int i, double v)
{
    pgsql_param_set(p, i, NULL);
    snprintf(p->num[i - 1], sizeof(p->num[0]), "%.17g", v);
    p->v[i - 1] = p->num[i - 1];
}

void pgsql_param_bool(struct pgsql_params *p, int i, int v)
{
    pgsql_param_set(p, i, v ? "true" : "false");
}

void pgsql_param_blob(struct pgsql_params *p, int i, const void *data, size_t len)
{
    pgsql_param_set(p, i, data);
    p->len[i - 1] = (int)len;
    p->fmt[i - 1] = 1;
}

void pgsql_param_jtext(struct pgsql_params *p, int i, json_t *v)
{
    pgsql_param_set(p, i, json_is_string(v) ? json_string_value(v) : NULL);
}

void pgsql_param_jint(struct pgsql_params *p, int i, json_t *v)
{
    if (json_is_integer(v))
        pgsql_param_int(p, i, json_integer_value(v));
    else
        pgsql_param_set(p, i, NULL);
}

void pgsql_param_json(struct pgsql_params *p, int i, json_t *v)
{
    char *text = json_is_object(v) || json_is_array(v) ? jtext_dump(v, NULL) : NULL;
    pgsql_param_set(p, i, text);
    p->owned[i - 1] = text;
}

/* ---- results ---- */

json_t *pgsql_value(PGresult *r, int row, int col, int as_json)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    const char *v = PQgetvalue(r, row, col);
    switch (PQftype(r, col)) {
    case PGSQL_INT8OID:
    case PGSQL_INT4OID:
    case PGSQL_INT2OID:
        return json_integer(strtoll(v, NULL, 10));
    case PGSQL_FLOAT4OID:
    case PGSQL_FLOAT8OID:
    case PGSQL_NUMERICOID:
        return json_real(strtod(v, NULL));
    case PGSQL_BOOLOID:
        return json_boolean(v[0] == 't');
    default:
        break;
    }
    if (!as_json)
        return json_string(v);
    json_t *j = jtext_load(v, (size_t)PQgetlength(r, row, col), 0, NULL);
    return j ? j : json_null();
}

int64_t pgsql_int(PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}
