/*
 * pgfloor: what a PostgreSQL server charges memproxy for the steps recording cannot skip on
 * it, measured on their own with libpq (as bench/floor does for SQLite):
 *
 *   round trip     SELECT 1: the network and the server's parse, nothing written
 *   commit         one INSERT, autocommit: a round trip whose COMMIT waits for the WAL's sync
 *                  (synchronous_commit on): the least a durable turn costs
 *   pipelined txn  BEGIN, two INSERTs and COMMIT sent at once in pipeline mode: one round
 *                  trip and one sync, what a group of batches could cost
 *   stepwise txn   the same four statements one round trip each
 *   a call's rows  BEGIN, the session's row counted up, its window's hash, a question and its
 *                  reply (one INSERT of two rows as wide as memproxy's, with its two unique
 *                  indexes), COMMIT, pipelined: what storing one exchange of a call costs in
 *                  the fewest statements, in tables shaped like memproxy's (docs/deploy.md)
 *   the same, prepared
 *                  the exchange with statements the connection prepared once and one INSERT
 *                  a turn, as memproxy's writer prepares its own (storage.prepared_statements)
 *
 *   pgfloor URL [--rounds N] [--gap-us US]
 *
 * With --gap-us each step comes US microseconds after the one before, as a call's turns do
 * (seconds apart): the server's processes are then woken from sleep for each, which a VM can
 * charge hundreds of microseconds (what memproxy_commit_wait_seconds shows in a call).
 *
 * Output: a Markdown table of medians and p99 (microseconds) on stdout.
 */
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "pgfloor: %s: %s", sql, PQerrorMessage(pg));
        exit(1);
    }
    PQclear(r);
}

static void insert(PGconn *pg, int i)
{
    char n[16];
    snprintf(n, sizeof(n), "%d", i);
    const char *v[] = {n, "a turn of a call, as long as a short sentence is"};
    PGresult *r = PQexecParams(pg, "INSERT INTO pgfloor(id, body) VALUES ($1, $2)", 2, NULL, v,
                               NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "pgfloor: insert: %s", PQerrorMessage(pg));
        exit(1);
    }
    PQclear(r);
}

/* Wait for a pipeline's answers up to its sync. */
static void drain(PGconn *pg)
{
    for (;;) {
        PGresult *r = PQgetResult(pg);
        if (r == NULL)
            continue; /* the end of one statement's results */
        ExecStatusType st = PQresultStatus(r);
        PQclear(r);
        if (st == PGRES_PIPELINE_SYNC)
            return;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            fprintf(stderr, "pgfloor: pipeline: %s", PQerrorMessage(pg));
            exit(1);
        }
    }
}

/* One pipelined transaction: BEGIN, two INSERTs, COMMIT, a sync; wait for all answers. */
static void pipelined(PGconn *pg, int i)
{
    char a[16], b[16];
    snprintf(a, sizeof(a), "%d", 2 * i);
    snprintf(b, sizeof(b), "%d", 2 * i + 1);
    const char *va[] = {a, "a turn of a call, as long as a short sentence is"};
    const char *vb[] = {b, "its reply, a little longer than the question was"};
    const char *sql = "INSERT INTO pgfloor(id, body) VALUES ($1, $2)";
    PQsendQueryParams(pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    PQsendQueryParams(pg, sql, 2, NULL, va, NULL, NULL, 0);
    PQsendQueryParams(pg, sql, 2, NULL, vb, NULL, NULL, 0);
    PQsendQueryParams(pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    PQpipelineSync(pg);
    drain(pg);
}

static const char *const call_schema[] = {
    "DROP TABLE IF EXISTS pgfloor_messages, pgfloor_windows, pgfloor_sessions",
    "CREATE TABLE pgfloor_sessions (sid bigint PRIMARY KEY, tenant text NOT NULL, id text NOT "
    "NULL, user_id text, status text NOT NULL DEFAULT 'RUNNING', created_ms bigint NOT NULL, "
    "updated_ms bigint NOT NULL, version bigint NOT NULL DEFAULT 1, UNIQUE (tenant, id))",
    "CREATE INDEX ON pgfloor_sessions (updated_ms)",
    "CREATE INDEX ON pgfloor_sessions (tenant, user_id, created_ms)",
    "CREATE TABLE pgfloor_windows (sid bigint PRIMARY KEY, hash bigint NOT NULL)",
    ("CREATE TABLE pgfloor_messages (sid bigint NOT NULL, seq bigint NOT NULL, turn_id bigint "
     "NOT NULL, turn_idx bigint NOT NULL, role text NOT NULL, content text NOT NULL, source text, "
     "interrupted smallint NOT NULL DEFAULT 0, interrupt_ms bigint, original text, metadata text "
     "NOT NULL DEFAULT '{}', tool_calls text, tool_call_id text, name text, timestamp_ms bigint "
     "NOT NULL, importance double precision NOT NULL, model text, usage text, finish_reason "
     "text, ttft_us bigint, latency_us bigint, PRIMARY KEY (sid, seq), UNIQUE (sid, turn_id, "
     "role, turn_idx))"),
    ("INSERT INTO pgfloor_sessions (sid, tenant, id, created_ms, updated_ms) VALUES (1, 'a', "
     "'call', 0, 0)"),
};

/* Exchange i's numbers as text: its question's and reply's seq, its turn id, a window hash. */
struct call_nums {
    char q[16], a[16], t[16], h[24];
};

static void call_nums_of(struct call_nums *n, int i)
{
    snprintf(n->q, sizeof(n->q), "%d", 2 * i);
    snprintf(n->a, sizeof(n->a), "%d", 2 * i + 1);
    snprintf(n->t, sizeof(n->t), "%d", i);
    snprintf(n->h, sizeof(n->h), "%d", i * 7919);
}

/* One exchange of a call stored in the fewest statements, pipelined. */
static void call_rows(PGconn *pg, int i)
{
    struct call_nums n;
    call_nums_of(&n, i);
    const char *q = n.q, *a = n.a, *t = n.t, *h = n.h;
    const char *key[] = {"a", "call"};
    const char *win[] = {h};
    const char *rows[] = {q,
                          t,
                          "a turn of a call, as long as a short sentence is",
                          a,
                          "its reply, a little longer than the question was, in a sentence",
                          "{\"prompt_tokens\": 120, \"completion_tokens\": 14}"};
    PQsendQueryParams(pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    PQsendQueryParams(pg,
                      "UPDATE pgfloor_sessions SET version = version + 1 WHERE tenant = $1 "
                      "AND id = $2 RETURNING sid, status, version",
                      2, NULL, key, NULL, NULL, 0);
    PQsendQueryParams(pg,
                      "INSERT INTO pgfloor_windows VALUES (1, $1) ON CONFLICT (sid) DO "
                      "UPDATE SET hash = excluded.hash",
                      1, NULL, win, NULL, NULL, 0);
    PQsendQueryParams(
        pg,
        "INSERT INTO pgfloor_messages (sid, seq, turn_id, turn_idx, role, content, source, "
        "metadata, timestamp_ms, importance, model, usage, finish_reason, ttft_us, latency_us) "
        "VALUES (1, $1, $2, 0, 'user', $3, 'asr', '{}', 1763800140000, 0.5, NULL, NULL, NULL, "
        "NULL, NULL), (1, $4, $2, 0, 'assistant', $5, 'llm', '{}', 1763800140000, 0.5, "
        "'gpt-4o-mini', $6, 'stop', 212000, 480000)",
        6, NULL, rows, NULL, NULL, 0);
    PQsendQueryParams(pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    PQpipelineSync(pg);
    drain(pg);
}

/* The same exchange with statements the connection prepared once and one INSERT a turn, as
 * memproxy's writer prepares its own by default (storage.prepared_statements; its statements
 * do more: the session row's upsert, a stopped session reopened by an INSERT). */
static const char *const call_prepared[][2] = {
    {"floor_version", "UPDATE pgfloor_sessions SET version = version + 1 WHERE tenant = $1 AND "
                      "id = $2 RETURNING sid, status, version"},
    {"floor_window", "INSERT INTO pgfloor_windows VALUES (1, $1) ON CONFLICT (sid) DO UPDATE "
                     "SET hash = excluded.hash"},
    {"floor_turn", "INSERT INTO pgfloor_messages (sid, seq, turn_id, turn_idx, role, content, "
                   "source, metadata, timestamp_ms, importance, model, usage, finish_reason, "
                   "ttft_us, latency_us) VALUES (1, $1, $2, 0, $3, $4, $5, '{}', 1763800140000, "
                   "0.5, $6, $7, $8, $9, $10)"},
};

static void call_prepare(PGconn *pg)
{
    for (size_t j = 0; j < sizeof(call_prepared) / sizeof(*call_prepared); j++) {
        PGresult *r = PQprepare(pg, call_prepared[j][0], call_prepared[j][1], 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            fprintf(stderr, "pgfloor: prepare: %s", PQerrorMessage(pg));
            exit(1);
        }
        PQclear(r);
    }
}

static void call_rows_prepared(PGconn *pg, int i)
{
    struct call_nums n;
    call_nums_of(&n, i);
    const char *q = n.q, *a = n.a, *t = n.t, *h = n.h;
    const char *key[] = {"a", "call"};
    const char *win[] = {h};
    const char *question[] = {
        q,    t,    "user", "a turn of a call, as long as a short sentence is", "asr", NULL, NULL,
        NULL, NULL, NULL};
    const char *reply[] = {a,
                           t,
                           "assistant",
                           "its reply, a little longer than the question was, in a sentence",
                           "llm",
                           "gpt-4o-mini",
                           "{\"prompt_tokens\": 120, \"completion_tokens\": 14}",
                           "stop",
                           "212000",
                           "480000"};
    PQsendQueryParams(pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    PQsendQueryPrepared(pg, "floor_version", 2, key, NULL, NULL, 0);
    PQsendQueryPrepared(pg, "floor_window", 1, win, NULL, NULL, 0);
    PQsendQueryPrepared(pg, "floor_turn", 10, question, NULL, NULL, 0);
    PQsendQueryPrepared(pg, "floor_turn", 10, reply, NULL, NULL, 0);
    PQsendQueryParams(pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    PQpipelineSync(pg);
    drain(pg);
}

enum kind { K_TRIP, K_COMMIT, K_PIPELINED, K_STEPWISE, K_CALL, K_CALL_PREPARED, K__COUNT };

static void once(PGconn *pg, enum kind k, int i)
{
    switch (k) {
    case K_TRIP:
        run(pg, "SELECT 1");
        break;
    case K_COMMIT:
        insert(pg, i);
        break;
    case K_PIPELINED:
        pipelined(pg, i);
        break;
    case K_CALL:
        call_rows(pg, i);
        break;
    case K_CALL_PREPARED:
        call_rows_prepared(pg, i);
        break;
    case K_STEPWISE:
    case K__COUNT:
        run(pg, "BEGIN");
        insert(pg, 2 * i);
        insert(pg, 2 * i + 1);
        run(pg, "COMMIT");
    }
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    int rounds = 2000, gap_us = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--gap-us") == 0 && i + 1 < argc)
            gap_us = atoi(argv[++i]);
        else
            url = argv[i];
    }
    if (url == NULL || rounds < 10) {
        fprintf(stderr, "usage: pgfloor URL [--rounds N] [--gap-us US]\n");
        return 2;
    }
    PGconn *pg = PQconnectdb(url);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "pgfloor: %s", PQerrorMessage(pg));
        return 1;
    }
    static const char *const names[] = {
        "round trip (SELECT 1)",
        "commit (one INSERT, autocommit)",
        "transaction pipelined (BEGIN, 2 INSERTs, COMMIT)",
        "transaction stepwise (the same, 4 round trips)",
        "a call's rows pipelined (session row, window, question "
        "and reply)",
        "the same, prepared once as memproxy does (storage.prepared_"
        "statements), one INSERT a turn"};
    uint64_t *s = malloc((size_t)rounds * sizeof(*s));
    PGresult *v = PQexec(pg, "SHOW synchronous_commit");
    printf("| PostgreSQL (%s, synchronous_commit %s%s) | p50 (us) | p99 (us) |\n|---|---|---|\n",
           PQparameterStatus(pg, "server_version"), PQgetvalue(v, 0, 0),
           gap_us > 0 ? ", steps apart" : "");
    PQclear(v);
    for (int k = 0; k < K__COUNT; k++) {
        run(pg, "DROP TABLE IF EXISTS pgfloor");
        run(pg, "CREATE TABLE pgfloor (id bigint PRIMARY KEY, body text NOT NULL)");
        int call = k == K_CALL || k == K_CALL_PREPARED;
        for (size_t j = 0; call && j < sizeof(call_schema) / sizeof(*call_schema); j++)
            run(pg, call_schema[j]);
        if (k == K_CALL_PREPARED)
            call_prepare(pg);
        if (k == K_PIPELINED || call)
            PQenterPipelineMode(pg);
        for (int i = 0; i < rounds; i++) {
            struct timespec gap = {.tv_sec = gap_us / 1000000, .tv_nsec = gap_us % 1000000 * 1000L};
            if (gap_us > 0)
                nanosleep(&gap, NULL);
            uint64_t t0 = now_ns();
            once(pg, (enum kind)k, i);
            s[i] = now_ns() - t0;
        }
        if (k == K_PIPELINED || call)
            PQexitPipelineMode(pg);
        qsort(s, (size_t)rounds, sizeof(*s), cmp_u64);
        printf("| %s | %.1f | %.1f |\n", names[k], s[rounds / 2] / 1e3,
               s[(size_t)rounds * 99 / 100] / 1e3);
    }
    run(pg, "DROP TABLE IF EXISTS pgfloor");
    run(pg, call_schema[0]);
    free(s);
    PQfinish(pg);
    return 0;
}
