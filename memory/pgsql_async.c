#include "memory/pgsql_async.h"
#include "memory/pgsql_resolve.h"

#include "base/log.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PGSQL_ASYNC_RETRY_MS 1000 /* a connection that failed is tried again this often */

enum pgsql_async_state { PGA_DOWN, PGA_CONNECTING, PGA_READY };

/* A job: sent (results arriving) or, while connecting, waiting with copies of its params. */
struct pgsql_job {
    int n, got;
    int prepare; /* PQsendPrepare its statements (named "a<id>") instead of running them */
    int current; /* a result of statement got has arrived: the NULL after it ends it */
    int copied;  /* params below are copies to send once connected */
    PGresult *res[PGSQL_ASYNC_MAX_QUERIES];
    enum pgsql_stmt which[PGSQL_ASYNC_MAX_QUERIES];
    struct pgsql_params params[PGSQL_ASYNC_MAX_QUERIES];
    pgsql_async_cb cb;
    void *arg;
    struct pgsql_job *next;
};

struct pgsql_async {
    const struct pgsql_db *st;
    struct event_base *base;
    PGconn *pg;
    enum pgsql_async_state state;
    struct event *ev_read, *ev_write, *ev_connect, *ev_retry;
    struct pgsql_resolve *resolve;           /* the server's name being looked up (connecting) */
    struct pgsql_job *head, *tail;           /* sent, oldest first */
    struct pgsql_job *wait_head, *wait_tail; /* waiting for the connection */
    int logged_down;
    unsigned char named[PG__COUNT]; /* prepared on this connection (st->prepare) */
};

static void pgsql_async_push(struct pgsql_job **head, struct pgsql_job **tail, struct pgsql_job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static void pgsql_async_finish(struct pgsql_job *j)
{
    j->cb(j->arg, j->res, j->n);
    for (int i = 0; i < j->n; i++) {
        PQclear(j->res[i]);
        if (j->copied)
            pgsql_params_clear(&j->params[i]);
    }
    free(j);
}

/* Every job of a list fails (its results that came stay NULL where none did). */
static void pgsql_async_fail_all(struct pgsql_job **head, struct pgsql_job **tail)
{
    struct pgsql_job *j = *head;
    *head = *tail = NULL;
    while (j != NULL) {
        struct pgsql_job *next = j->next;
        for (int i = 0; i < j->n; i++) { /* a job is all or nothing */
            PQclear(j->res[i]);
            j->res[i] = NULL;
        }
        pgsql_async_finish(j);
        j = next;
    }
}

static void pgsql_async_free_events(struct pgsql_async *a)
{
    if (a->ev_read)
        event_free(a->ev_read);
    if (a->ev_write)
        event_free(a->ev_write);
    if (a->ev_connect)
        event_free(a->ev_connect);
    a->ev_read = a->ev_write = a->ev_connect = NULL;
}

/* The connection broke: what was on its way fails, a new one is tried after a pause. */
static void pgsql_async_down(struct pgsql_async *a, const char *why)
{
    if (!a->logged_down)
        log_warn("postgresql: a worker's read connection: %s", why);
    a->logged_down = 1;
    pgsql_resolve_cancel(a->resolve);
    a->resolve = NULL;
    pgsql_async_free_events(a);
    PQfinish(a->pg);
    a->pg = NULL;
    a->state = PGA_DOWN;
    pgsql_async_fail_all(&a->head, &a->tail);
    pgsql_async_fail_all(&a->wait_head, &a->wait_tail);
    struct timeval tv = {PGSQL_ASYNC_RETRY_MS / 1000, (PGSQL_ASYNC_RETRY_MS % 1000) * 1000};
    evtimer_add(a->ev_retry, &tv);
}

/* Write what libpq holds; watch for writability while it holds more. */
static void pgsql_async_flush(struct pgsql_async *a)
{
    int rc = PQflush(a->pg);
    if (rc < 0)
        pgsql_async_down(a, PQerrorMessage(a->pg));
    else if (rc > 0)
        event_add(a->ev_write, NULL);
}

/* Hand j's statements and a sync point to libpq (by name once prepared). -1 when the
 * connection failed. */
static int pgsql_async_send(struct pgsql_async *a, struct pgsql_job *j, struct pgsql_params *params)
{
    for (int i = 0; i < j->n; i++) {
        struct pgsql_params *p = &params[i];
        const char *sql = pgsql_schema_sql(j->which[i]);
        char name[16];
        snprintf(name, sizeof(name), "a%d", (int)j->which[i]);
        int ok = j->prepare ? PQsendPrepare(a->pg, name, sql, 0, NULL)
                 : a->named[j->which[i]]
                     ? PQsendQueryPrepared(a->pg, name, p->n, p->v, p->len, p->fmt, 0)
                     : PQsendQueryParams(a->pg, sql, p->n, NULL, p->v, p->len, p->fmt, 0);
        if (!ok)
            return -1;
    }
    return PQpipelineSync(a->pg) ? 0 : -1;
}

/* A statement that could not be prepared runs by its text from then on. */
static void pgsql_async_prepared(void *arg, PGresult *const *res, int n)
{
    struct pgsql_async *a = arg;
    for (int i = 0; i < n; i++)
        if (res[i] == NULL)
            memset(a->named, 0, sizeof(a->named));
}

/* Right after connecting (named statements on): the statements the channel runs are prepared
 * by the first job, ahead of every other on the connection, so those can use the names. */
static void pgsql_async_prepare(struct pgsql_async *a)
{
    static const enum pgsql_stmt used[] = {PG_R_VERSION, PG_R_SESSION, PG_R_TURNS, PG_R_SUMMARY_OF,
                                           PG_R_FACTS_OF};
    struct pgsql_job *j = xcalloc(1, sizeof(*j));
    j->n = (int)UTIL_ARRAY_LEN(used);
    j->prepare = 1;
    j->cb = pgsql_async_prepared;
    j->arg = a;
    memcpy(j->which, used, sizeof(used));
    struct pgsql_params none[UTIL_ARRAY_LEN(used)];
    memset(none, 0, sizeof(none));
    if (pgsql_async_send(a, j, none) != 0) {
        free(j);
        return;
    }
    pgsql_async_push(&a->head, &a->tail, j);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(used); i++)
        a->named[used[i]] = 1;
}

/* One result arrived for the oldest job (NULL: the end of one statement's results). */
static void pgsql_async_result(struct pgsql_async *a, PGresult *r)
{
    struct pgsql_job *j = a->head;
    if (r == NULL) {
        if (j->current) {
            j->current = 0;
            j->got++;
        }
        return;
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) { /* the job is complete */
        PQclear(r);
        a->head = j->next;
        if (a->head == NULL)
            a->tail = NULL;
        pgsql_async_finish(j);
        return;
    }
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        if (st != PGRES_PIPELINE_ABORTED)
            log_error("postgresql: %s", PQresultErrorMessage(r));
        PQclear(r);
        r = NULL;
    }
    if (j->got < j->n && j->res[j->got] == NULL)
        j->res[j->got] = r;
    else
        PQclear(r);
    j->current = 1;
}

static void pgsql_async_on_read(evutil_socket_t fd, short what, void *arg)
{
    struct pgsql_async *a = arg;
    (void)fd;
    (void)what;
    if (!PQconsumeInput(a->pg)) {
        pgsql_async_down(a, PQerrorMessage(a->pg));
        return;
    }
    while (a->head != NULL && !PQisBusy(a->pg)) {
        PGresult *r = PQgetResult(a->pg);
        if (r == NULL && !a->head->current)
            break; /* nothing more yet */
        pgsql_async_result(a, r);
    }
    if (PQstatus(a->pg) == CONNECTION_BAD)
        pgsql_async_down(a, PQerrorMessage(a->pg));
}

static void pgsql_async_on_write(evutil_socket_t fd, short what, void *arg)
{
    struct pgsql_async *a = arg;
    (void)fd;
    (void)what;
    pgsql_async_flush(a);
}

/* Connected: pipeline mode, the events, and the jobs that waited go out. */
static void pgsql_async_ready(struct pgsql_async *a)
{
    pgsql_async_free_events(a);
    if (!PQenterPipelineMode(a->pg)) {
        pgsql_async_down(a, "cannot enter pipeline mode");
        return;
    }
    evutil_socket_t fd = PQsocket(a->pg);
    a->ev_read = event_new(a->base, fd, EV_READ | EV_PERSIST, pgsql_async_on_read, a);
    a->ev_write = event_new(a->base, fd, EV_WRITE, pgsql_async_on_write, a);
    event_add(a->ev_read, NULL);
    a->state = PGA_READY;
    memset(a->named, 0, sizeof(a->named));
    if (a->st->prepare)
        pgsql_async_prepare(a);
    if (a->logged_down)
        log_info("postgresql: a worker's read connection is back");
    a->logged_down = 0;
    struct pgsql_job *j = a->wait_head;
    a->wait_head = a->wait_tail = NULL;
    while (j != NULL) {
        struct pgsql_job *next = j->next;
        int rc = pgsql_async_send(a, j, j->params);
        pgsql_async_push(&a->head, &a->tail, j);
        if (rc != 0) {
            a->wait_head = next; /* failed with the others below */
            pgsql_async_down(a, PQerrorMessage(a->pg));
            return;
        }
        j = next;
    }
    pgsql_async_flush(a);
}

static void pgsql_async_on_connect(evutil_socket_t fd, short what, void *arg);

/* Wait for the socket as PQconnectPoll asked (reading or writing), 5 s at most (the
 * connect_timeout of the blocking connections: a server that never answers). */
static void pgsql_async_connect_wait(struct pgsql_async *a, PostgresPollingStatusType ps)
{
    if (a->ev_connect)
        event_free(a->ev_connect);
    a->ev_connect =
        event_new(a->base, PQsocket(a->pg), ps == PGRES_POLLING_READING ? EV_READ : EV_WRITE,
                  pgsql_async_on_connect, a);
    struct timeval tv = {5, 0};
    event_add(a->ev_connect, &tv);
}

/* Drive PQconnectPoll from the loop until the connection is made or failed. */
static void pgsql_async_on_connect(evutil_socket_t fd, short what, void *arg)
{
    struct pgsql_async *a = arg;
    (void)fd;
    if (what & EV_TIMEOUT) {
        pgsql_async_down(a, "the server did not answer within 5 s");
        return;
    }
    PostgresPollingStatusType ps = PQconnectPoll(a->pg);
    if (ps == PGRES_POLLING_OK)
        pgsql_async_ready(a);
    else if (ps == PGRES_POLLING_FAILED)
        pgsql_async_down(a, PQerrorMessage(a->pg));
    else
        pgsql_async_connect_wait(a, ps);
}

/* Start connecting, to t's addresses when the server's names were looked up (else NULL). */
static void pgsql_async_connect_to(struct pgsql_async *a, const struct pgsql_target *t)
{
    struct pgsql_conn_params cp;
    pgsql_conn_params(&cp, a->st->url, a->st->statement_timeout_ms);
    if (t != NULL)
        pgsql_conn_params_to(&cp, t);
    a->pg = PQconnectStartParams(cp.keys, cp.vals, 1);
    if (a->pg == NULL || PQstatus(a->pg) == CONNECTION_BAD || PQsetnonblocking(a->pg, 1) != 0) {
        pgsql_async_down(a, a->pg ? PQerrorMessage(a->pg) : "out of memory");
        return;
    }
    a->state = PGA_CONNECTING;
    pgsql_async_connect_wait(a, PGRES_POLLING_WRITING); /* as PQconnectStart leaves it */
}

static void pgsql_async_resolved(void *arg, struct pgsql_target *t, const char *err)
{
    struct pgsql_async *a = arg;
    a->resolve = NULL;
    pgsql_async_free_events(a); /* the lookup's timer */
    if (t != NULL) {
        pgsql_async_connect_to(a, t);
        return;
    }
    char why[512];
    snprintf(why, sizeof(why), "cannot look its server up: %s", err);
    pgsql_async_down(a, why);
}

static void pgsql_async_lookup_late(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pgsql_async_down(arg, "its server's name was not looked up within 5 s");
}

/* Connect; first, off the loop, look the server's names up (pgsql_resolve.h says why), for
 * at most 5 s as a connection is waited for (jobs wait meanwhile). */
static void pgsql_async_connect(struct pgsql_async *a)
{
    char *hosts, *ports;
    if (!pgsql_resolve_needed(a->st->url, &hosts, &ports)) {
        pgsql_async_connect_to(a, NULL);
        return;
    }
    struct timeval tv = {5, 0};
    a->state = PGA_CONNECTING;
    a->ev_connect = evtimer_new(a->base, pgsql_async_lookup_late, a);
    if (a->ev_connect == NULL || evtimer_add(a->ev_connect, &tv) != 0)
        log_fatal("postgresql: out of memory (evtimer_new)");
    a->resolve = pgsql_resolve_start(hosts, ports, a->base, pgsql_async_resolved, a);
}

static void pgsql_async_on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pgsql_async_connect(arg);
}

struct pgsql_async *pgsql_async_open(const struct pgsql_db *st, struct event_base *base)
{
    struct pgsql_async *a = xcalloc(1, sizeof(*a));
    a->st = st;
    a->base = base;
    a->ev_retry = evtimer_new(base, pgsql_async_on_retry, a);
    pgsql_async_connect(a);
    return a;
}

void pgsql_async_close(struct pgsql_async *a)
{
    if (a == NULL)
        return;
    pgsql_async_fail_all(&a->head, &a->tail);
    pgsql_async_fail_all(&a->wait_head, &a->wait_tail);
    pgsql_resolve_cancel(a->resolve);
    pgsql_async_free_events(a);
    event_free(a->ev_retry);
    PQfinish(a->pg);
    free(a);
}

void pgsql_async_run(struct pgsql_async *a, const enum pgsql_stmt *which,
                     struct pgsql_params *params, int n, pgsql_async_cb cb, void *arg)
{
    struct pgsql_job *j = xcalloc(1, sizeof(*j));
    j->n = n < PGSQL_ASYNC_MAX_QUERIES ? n : PGSQL_ASYNC_MAX_QUERIES;
    j->cb = cb;
    j->arg = arg;
    memcpy(j->which, which, (size_t)j->n * sizeof(*which));
    if (a->state == PGA_READY) {
        int rc = pgsql_async_send(a, j, params);
        for (int i = 0; i < n; i++)
            pgsql_params_clear(&params[i]);
        pgsql_async_push(&a->head, &a->tail, j);
        if (rc != 0)
            pgsql_async_down(a, PQerrorMessage(a->pg));
        else
            pgsql_async_flush(a);
        return;
    }
    if (a->state == PGA_DOWN) { /* fails now: the caller goes by what it has */
        for (int i = 0; i < n; i++)
            pgsql_params_clear(&params[i]);
        pgsql_async_finish(j);
        return;
    }
    j->copied = 1; /* connecting: sent once connected */
    for (int i = 0; i < j->n; i++)
        pgsql_params_copy(&j->params[i], &params[i]);
    pgsql_async_push(&a->wait_head, &a->wait_tail, j);
}
