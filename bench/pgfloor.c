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
 *
 *   pgfloor URL [--rounds N]
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
    for (;;) {
        PGresult *r = PQgetResult(pg);
        if (r == NULL)
            continue; /* the end of one statement's results */
        ExecStatusType st = PQresultStatus(r);
        PQclear(r);
        if (st == PGRES_PIPELINE_SYNC)
            return;
        if (st != PGRES_COMMAND_OK) {
            fprintf(stderr, "pgfloor: pipeline: %s", PQerrorMessage(pg));
            exit(1);
        }
    }
}

enum kind { K_TRIP, K_COMMIT, K_PIPELINED, K_STEPWISE, K__COUNT };

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
    default:
        run(pg, "BEGIN");
        insert(pg, 2 * i);
        insert(pg, 2 * i + 1);
        run(pg, "COMMIT");
    }
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    int rounds = 2000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else
            url = argv[i];
    }
    if (url == NULL || rounds < 10) {
        fprintf(stderr, "usage: pgfloor URL [--rounds N]\n");
        return 2;
    }
    PGconn *pg = PQconnectdb(url);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "pgfloor: %s", PQerrorMessage(pg));
        return 1;
    }
    static const char *const names[] = {"round trip (SELECT 1)", "commit (one INSERT, autocommit)",
                                        "transaction pipelined (BEGIN, 2 INSERTs, COMMIT)",
                                        "transaction stepwise (the same, 4 round trips)"};
    uint64_t *s = malloc((size_t)rounds * sizeof(*s));
    PGresult *v = PQexec(pg, "SHOW synchronous_commit");
    printf("| PostgreSQL (%s, synchronous_commit %s) | p50 (us) | p99 (us) |\n|---|---|---|\n",
           PQparameterStatus(pg, "server_version"), PQgetvalue(v, 0, 0));
    PQclear(v);
    for (int k = 0; k < K__COUNT; k++) {
        run(pg, "DROP TABLE IF EXISTS pgfloor");
        run(pg, "CREATE TABLE pgfloor (id bigint PRIMARY KEY, body text NOT NULL)");
        if (k == K_PIPELINED)
            PQenterPipelineMode(pg);
        for (int i = 0; i < rounds; i++) {
            uint64_t t0 = now_ns();
            once(pg, (enum kind)k, i);
            s[i] = now_ns() - t0;
        }
        if (k == K_PIPELINED)
            PQexitPipelineMode(pg);
        qsort(s, (size_t)rounds, sizeof(*s), cmp_u64);
        printf("| %s | %.1f | %.1f |\n", names[k], s[rounds / 2] / 1e3,
               s[(size_t)rounds * 99 / 100] / 1e3);
    }
    run(pg, "DROP TABLE IF EXISTS pgfloor");
    free(s);
    PQfinish(pg);
    return 0;
}
