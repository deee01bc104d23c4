#include "memory/pgsql.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/pgsql_async.h"
#include "memory/pgsql_exec.h"
#include "memory/pgsql_pipe.h"
#include "memory/pgsql_read.h"

#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PGSQL_RETRY_MAX_MS 5000
#define PGSQL_LEASE_MS     120000 /* storage.lease's default */

/* A name for this process's claims: random, so that no two replicas (or two lives of one)
 * share it. */
static void pgsql_owner(char *out, size_t len)
{
    unsigned char raw[8];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        log_fatal("store: the random generator failed (RAND_bytes)");
    snprintf(out, len, "%02x%02x%02x%02x%02x%02x%02x%02x-%ld", raw[0], raw[1], raw[2], raw[3],
             raw[4], raw[5], raw[6], raw[7], (long)getpid());
}

int pgsql_is_url(const char *where)
{
    return where != NULL && (strncmp(where, "postgresql://", 13) == 0 ||
                             strncmp(where, "postgres://", 11) == 0 || strchr(where, '=') != NULL);
}

/* One chunk of retention's pass (purge.h): an autocommitted DELETE whose rows are taken with
 * SKIP LOCKED, so replicas purging together split the work. */
static int pgsql_purge(void *arg)
{
    struct pgsql_db *st = arg;
    struct purge_pass *pp = &st->purge;
    enum pgsql_stmt which = purge_next(pp, st->opts.retention_ms) == 1 ? PG_PURGE : PG_PURGE_OUTBOX;
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, pp->before_ms);
    pgsql_param_int(&p, 2, pp->chunk);
    uint64_t t0 = util_now_us();
    int64_t n = pgsql_exec_changes(st->c, which, &p);
    if (purge_done(pp, (long)n, util_now_us() - t0))
        return 1;
    atomic_fetch_add_explicit(&st->n_upkeep, 1, memory_order_relaxed);
    purge_log(pp, st->opts.retention_ms);
    return 0;
}

/* Erased users' sessions (PG_USER_SESSIONS moved them out of sight) are deleted with their
 * turns here, a chunk a call, sized as retention's are (purge.h): the erasure's own
 * transaction stays short whatever the user held. Autovacuum is the server's. */
static int pgsql_settle(void *arg)
{
    struct pgsql_db *st = arg;
    if (!st->erased)
        return 0;
    if (st->erase_chunk <= 0)
        st->erase_chunk = 10;
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_int(&p, 1, st->erase_chunk);
    uint64_t t0 = util_now_us();
    int64_t n = pgsql_exec_changes(st->c, PG_PURGE_ERASED, &p);
    uint64_t took = util_now_us() - t0;
    if (n >= 0 && took > PURGE_SLOW_US && st->erase_chunk > 1)
        st->erase_chunk /= 2;
    else if (n == st->erase_chunk && took < PURGE_SLOW_US / 4)
        st->erase_chunk =
            st->erase_chunk * 2 < PURGE_MAX_CHUNK ? st->erase_chunk * 2 : PURGE_MAX_CHUNK;
    st->erased = n != 0; /* a failure is tried again after the next group */
    return n > 0;
}

/* BEGIN with the statement timeout scoped to the transaction (SET LOCAL: nothing outlives
 * it, as PgBouncer's transaction pooling needs). */
static int pgsql_begin(struct pgsql_db *st)
{
    char sql[96];
    if (st->statement_timeout_ms <= 0)
        return pgsql_conn_run(st->c, "BEGIN", NULL);
    snprintf(sql, sizeof(sql), "BEGIN; SET LOCAL statement_timeout = %ld",
             st->statement_timeout_ms);
    PGresult *r = PQexec(pgsql_conn_pg(st->c), sql); /* two statements: the simple protocol */
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok ? 0 : pgsql_conn_run(st->c, "BEGIN", NULL); /* a broken link is connected again */
}

/* A connection the server closed since the last transaction (a restart, a failover,
 * pg_terminate_backend) shows only when it is read: its goodbye is read now (libpq's socket
 * never blocks), so that the transaction goes out on a new connection (pgsql_begin connects
 * again) instead of failing on the old one, and a turn is not lost to it. */
static void pgsql_notice_hangup(PGconn *pg)
{
    /* idle, the server speaks only to say goodbye (a FATAL error, then the end of the
     * stream: read in turn) or to report a setting; a few reads tell which */
    for (int i = 0; i < 4 && pg != NULL && PQstatus(pg) == CONNECTION_OK &&
                    PQtransactionStatus(pg) == PQTRANS_IDLE;
         i++) {
        struct pollfd p = {.fd = PQsocket(pg), .events = POLLIN};
        if (poll(&p, 1, 0) != 1 || !PQconsumeInput(pg))
            break;
    }
}

static int pgsql_transaction(void *arg, struct store_batch *list)
{
    struct pgsql_db *st = arg;
    pgsql_notice_hangup(pgsql_conn_pg(st->c));
    if (pgsql_pipe_fits(list) && PQstatus(pgsql_conn_pg(st->c)) == CONNECTION_OK)
        return pgsql_pipe_transaction(st, list); /* one round trip (pgsql_pipe.h) */
    int ok = pgsql_begin(st) == 0;
    for (struct store_batch *b = list; ok && b != NULL; b = b->next) {
        pgsql_exec_apply(st, b);
        ok = b->ok;
    }
    if (ok && pgsql_conn_run(st->c, "COMMIT", NULL) == 0)
        return 0;
    if (PQstatus(pgsql_conn_pg(st->c)) == CONNECTION_OK)
        pgsql_conn_run(st->c, "ROLLBACK", NULL);
    return -1;
}

static void pgsql_db_free(struct pgsql_db *st)
{
    pgsql_read_close(st->wr);
    pgsql_conn_close(st->c);
    free(st->url);
    free(st);
}

/* Connect, trying again while the server cannot be reached (see pgsql.h). */
static struct pgsql_conn *pgsql_connect(const char *url, long timeout_ms)
{
    long wait_ms = 250;
    for (;;) {
        char *err = NULL;
        struct pgsql_conn *c = pgsql_conn_open(url, timeout_ms, &err);
        if (c != NULL)
            return c;
        log_warn("%s; trying again in %ld ms", err, wait_ms);
        free(err);
        usleep((useconds_t)wait_ms * 1000);
        wait_ms = wait_ms * 2 > PGSQL_RETRY_MAX_MS ? PGSQL_RETRY_MAX_MS : wait_ms * 2;
    }
}

static void *pgsql_open(const char *url, const struct store_opts *opts, char **err)
{
    struct pgsql_db *st = xcalloc(1, sizeof(*st));
    st->url = xstrdup(url);
    st->opts = *opts;
    if (st->opts.touch_ms <= 0 || st->opts.touch_ms > STORE_TOUCH_MS)
        st->opts.touch_ms = STORE_TOUCH_MS;
    st->statement_timeout_ms = opts->statement_timeout_ms;
    st->lease_ms = opts->lease_ms > 0 ? opts->lease_ms : PGSQL_LEASE_MS;
    pgsql_owner(st->owner, sizeof(st->owner));
    st->c = pgsql_connect(url, st->statement_timeout_ms);
    st->prepare = opts->prepared_statements;
    pgsql_conn_set_prepare(st->c, st->prepare);
    if (pgsql_schema_migrate(st->c, err) != 0)
        goto fail;
    st->erased = 1; /* what an erasure left when the last process stopped */
    st->wr = pgsql_read_open(st, 0, err);
    pgsql_read_base(st->wr)->be = &pgsql_backend;
    return st;
fail:
    pgsql_db_free(st);
    return NULL;
}

/* What this replica took from the queues and did not finish is due again at once: a
 * restart, or another replica, takes it up without waiting for the lease. */
static void pgsql_release(struct pgsql_db *st)
{
    static const enum pgsql_stmt steps[] = {PG_RELEASE_OUTBOX, PG_RELEASE_SUMMARIES,
                                            PG_RELEASE_CALLSUMS, PG_RELEASE_EMBEDS};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(steps); i++) {
        struct pgsql_params p;
        pgsql_params_init(&p);
        pgsql_param_text(&p, 1, st->owner);
        pgsql_param_int(&p, 2, util_wall_ms());
        pgsql_exec_changes(st->c, steps[i], &p);
    }
}

static void pgsql_close(void *arg)
{
    if (arg == NULL)
        return;
    pgsql_release(arg);
    pgsql_db_free(arg);
}

static void pgsql_upkeep(void *arg, uint64_t *aside, uint64_t *held)
{
    struct pgsql_db *st = arg;
    *aside = 0;
    *held = atomic_load_explicit(&st->n_upkeep, memory_order_relaxed);
}

static struct store_reader *pgsql_reader_open(void *arg, char **err)
{
    struct pgsql_db *st = arg;
    struct pgsql_reader *r = pgsql_read_open(st, 1, err);
    if (r == NULL)
        return NULL;
    pgsql_read_base(r)->be = &pgsql_backend;
    return pgsql_read_base(r);
}

static void pgsql_reader_close(struct store_reader *r)
{
    pgsql_read_close((struct pgsql_reader *)r);
}

/* ---- reads on a worker's loop (pgsql_async.h) ---- */

/* Who waits for an async read. */
struct pgsql_waiter {
    store_version_cb version_cb;
    store_loaded_cb loaded_cb;
    void *arg;
};

static struct pgsql_waiter *pgsql_waiter(store_version_cb v, store_loaded_cb l, void *arg)
{
    struct pgsql_waiter *w = xmalloc(sizeof(*w));
    *w = (struct pgsql_waiter){.version_cb = v, .loaded_cb = l, .arg = arg};
    return w;
}

/* A PG_R_VERSION result: the version, 0 without a row, -1 when it failed. */
static int64_t pgsql_version_of(const PGresult *r)
{
    return r == NULL ? -1 : PQntuples(r) == 1 ? pgsql_int((PGresult *)r, 0, 0) : 0;
}

static void *pgsql_async_open_cb(void *arg, struct event_base *base)
{
    return pgsql_async_open(arg, base);
}

static void pgsql_async_close_cb(void *a)
{
    pgsql_async_close(a);
}

static void pgsql_versioned(void *arg, PGresult *const *res, int n)
{
    struct pgsql_waiter *w = arg;
    (void)n;
    w->version_cb(w->arg, pgsql_version_of(res[0]));
    free(w);
}

static void pgsql_async_version_cb(void *a, const char *tenant, const char *session_id,
                                   store_version_cb cb, void *arg)
{
    enum pgsql_stmt which = PG_R_VERSION;
    struct pgsql_params p;
    pgsql_params_init(&p);
    pgsql_param_text(&p, 1, tenant);
    pgsql_param_text(&p, 2, session_id);
    pgsql_async_run(a, &which, &p, 1, pgsql_versioned, pgsql_waiter(cb, NULL, arg));
}

static void pgsql_loaded(void *arg, PGresult *const *res, int n)
{
    struct pgsql_waiter *w = arg;
    int ok = n == 5;
    for (int i = 0; ok && i < n; i++)
        ok = res[i] != NULL;
    if (!ok) {
        w->loaded_cb(w->arg, NULL);
        free(w);
        return;
    }
    struct store_loaded l = {.version = pgsql_version_of(res[0]),
                             .session = pgsql_read_session_of_result(res[1]),
                             .turns = pgsql_read_turns_of_result(res[2]),
                             .memory = pgsql_read_memory_of_results(res[3], res[4])};
    w->loaded_cb(w->arg, &l);
    json_decref(l.session);
    json_decref(l.turns);
    json_decref(l.memory);
    free(w);
}

/* The version first: a write after it shows as a newer version (memory.c). One job: the five
 * statements go out together and their answers come back in one round trip. */
static void pgsql_async_load_cb(void *a, const char *tenant, const char *session_id,
                                const char *user_id, size_t turns, size_t max_facts,
                                store_loaded_cb cb, void *arg)
{
    enum pgsql_stmt which[] = {PG_R_VERSION, PG_R_SESSION, PG_R_TURNS, PG_R_SUMMARY_OF,
                               PG_R_FACTS_OF};
    struct pgsql_params p[5];
    for (int i = 0; i < 5; i++) {
        pgsql_params_init(&p[i]);
        pgsql_param_text(&p[i], 1, tenant);
        pgsql_param_text(&p[i], 2, session_id);
    }
    pgsql_param_int(&p[2], 3, INT64_MIN);
    pgsql_param_int(&p[2], 4, (int64_t)turns);
    pgsql_param_text(&p[3], 3, user_id);
    pgsql_param_text(&p[4], 3, user_id);
    pgsql_param_int(&p[4], 4, (int64_t)max_facts);
    pgsql_async_run(a, which, p, 5, pgsql_loaded, pgsql_waiter(NULL, cb, arg));
}

const struct store_backend pgsql_backend = {
    .name = "postgresql",
    .shared = 1,
    .open = pgsql_open,
    .close = pgsql_close,
    .transaction = pgsql_transaction,
    .settle = pgsql_settle,
    .purge = pgsql_purge,
    .checkpoints = pgsql_upkeep,
    .reader_open = pgsql_reader_open,
    .reader_close = pgsql_reader_close,
    .session_version = pgsql_read_version,
    .session_get = pgsql_read_session_get,
    .turns = pgsql_read_turns,
    .turns_of = pgsql_read_turns_of,
    .sessions = pgsql_read_sessions,
    .user_memory = pgsql_read_user_memory,
    .deliveries = pgsql_read_deliveries,
    .outbox_due = pgsql_read_outbox_due,
    .outbox_next = pgsql_read_outbox_next,
    .to_summarize = pgsql_read_to_summarize,
    .summary_next = pgsql_read_summary_next,
    .running_to_summarize = pgsql_read_running_to_summarize,
    .cache_get = pgsql_read_cache_get,
    .to_embed = pgsql_read_to_embed,
    .embed_next = pgsql_read_embed_next,
    .recall_embedded = pgsql_read_recall_embedded,
    .recall = pgsql_read_recall,
    .idle_sessions = pgsql_read_idle_sessions,
    .async_open = pgsql_async_open_cb,
    .async_close = pgsql_async_close_cb,
    .async_version = pgsql_async_version_cb,
    .async_load = pgsql_async_load_cb,
};
