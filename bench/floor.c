/*
 * floor: what this machine charges for the steps memproxy's design cannot skip, measured
 * without memproxy, so its figures in bench/README.md can be read against them.
 *
 *   floor [--dir DIR] [--rounds N]
 *
 * - loopback: one request/response round trip over TCP on 127.0.0.1 between two threads
 *   (200 bytes each way, TCP_NODELAY). A proxy adds one such round trip to every request.
 * - wake: one hand-off to a sleeping thread through a mutex and a condition variable (half a
 *   ping-pong round trip) — how a worker hands a commit to the storage writer.
 * - notify: one hand-off to a thread asleep in epoll_wait through an eventfd (half a round
 *   trip) — how the writer's report reaches a worker's libevent loop.
 * - commit: BEGIN IMMEDIATE, one UPDATE of a 300-byte row, COMMIT, on a WAL database in DIR
 *   with synchronous=NORMAL and a second (reader) connection open, as memproxy's store runs.
 *
 * - syscall: one system call that does nothing (getppid), timed over 100 calls per sample:
 *   what entering and leaving the kernel costs before any work, paid by each of memproxy's
 *   system calls (not part of the floor's sum; a virtual machine can charge ten times bare
 *   metal's).
 * - group commit: the CPU time (not the wait) of committing four requests' rows (one each) in
 *   one transaction, per request: recording's share of a request's CPU under load, which the
 *   throughput floor (mpbench --commit-us) adds to the two ends' costs.
 *
 * A recorded response's end waits for wake + commit + notify (docs/design.md §3, the durability
 * promise), on top of the loopback round trip every proxied request costs: the printed
 * "floor" is that sum of medians, the least memproxy could add with recording on here.
 * Output: a Markdown table on stdout.
 */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static size_t rounds = 20000;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median and p99 of n samples (ns), divided by div (2 for half a round trip), in us. */
static void report(const char *name, uint64_t *s, size_t n, unsigned div, double *p50_out,
                   const char *what)
{
    qsort(s, n, sizeof(*s), cmp_u64);
    double p50 = (double)s[n / 2] / div / 1000.0, p99 = (double)s[n * 99 / 100] / div / 1000.0;
    printf("| %s | %.1f us | %.1f us | %s |\n", name, p50, p99, what);
    *p50_out = p50;
}

/* ---- loopback ---- */

static int loop_listen(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("listen");
    *port = ntohs(a.sin_port);
    return fd;
}

static void xfer(int fd, char *buf, size_t len, int out)
{
    size_t done = 0;
    while (done < len) {
        ssize_t k = out ? send(fd, buf + done, len - done, 0) : recv(fd, buf + done, len - done, 0);
        if (k <= 0 && !(k < 0 && errno == EINTR))
            die("loopback transfer");
        done += k > 0 ? (size_t)k : 0;
    }
}

static void *loop_echo(void *arg)
{
    int lfd = *(int *)arg, one = 1;
    int fd = accept(lfd, NULL, NULL);
    char buf[200];
    if (fd < 0)
        die("accept");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (size_t i = 0; i < rounds; i++) {
        xfer(fd, buf, sizeof(buf), 0);
        xfer(fd, buf, sizeof(buf), 1);
    }
    close(fd);
    return NULL;
}

static double floor_loopback(uint64_t *s)
{
    int port, one = 1;
    int lfd = loop_listen(&port);
    pthread_t t;
    pthread_create(&t, NULL, loop_echo, &lfd);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[200];
    memset(buf, 'x', sizeof(buf));
    for (size_t i = 0; i < rounds; i++) {
        uint64_t t0 = now_ns();
        xfer(fd, buf, sizeof(buf), 1);
        xfer(fd, buf, sizeof(buf), 0);
        s[i] = now_ns() - t0;
    }
    pthread_join(t, NULL);
    close(fd);
    close(lfd);
    double p50;
    report("loopback round trip", s, rounds, 1, &p50, "one more hop: every proxied request");
    return p50;
}

/* ---- wake (condition variable) ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_go = PTHREAD_COND_INITIALIZER, cv_back = PTHREAD_COND_INITIALIZER;
static int turn;

static void *wake_peer(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < rounds; i++) {
        pthread_mutex_lock(&mu);
        while (turn != 1)
            pthread_cond_wait(&cv_go, &mu);
        turn = 0;
        pthread_cond_signal(&cv_back);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static double floor_wake(uint64_t *s)
{
    pthread_t t;
    pthread_create(&t, NULL, wake_peer, NULL);
    for (size_t i = 0; i < rounds; i++) {
        uint64_t t0 = now_ns();
        pthread_mutex_lock(&mu);
        turn = 1;
        pthread_cond_signal(&cv_go);
        while (turn != 0)
            pthread_cond_wait(&cv_back, &mu);
        pthread_mutex_unlock(&mu);
        s[i] = now_ns() - t0;
    }
    pthread_join(t, NULL);
    double p50;
    report("thread wake-up (condition variable)", s, rounds, 2, &p50,
           "a worker hands its commit to the writer");
    return p50;
}

/* ---- notify (eventfd + epoll) ---- */

static int ev_to_peer, ev_to_main;

static void ev_wait(int fd)
{
    int ep = epoll_create1(0);
    struct epoll_event e = {.events = EPOLLIN};
    uint64_t v;
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0)
        die("epoll");
    while (epoll_wait(ep, &e, 1, -1) != 1)
        ;
    if (read(fd, &v, sizeof(v)) != sizeof(v))
        die("eventfd read");
    close(ep);
}

static void *notify_peer(void *arg)
{
    static const uint64_t one = 1;
    (void)arg;
    for (size_t i = 0; i < rounds; i++) {
        ev_wait(ev_to_peer);
        if (write(ev_to_main, &one, sizeof(one)) != sizeof(one))
            die("eventfd write");
    }
    return NULL;
}

static double floor_notify(uint64_t *s)
{
    static const uint64_t one = 1;
    pthread_t t;
    ev_to_peer = eventfd(0, 0);
    ev_to_main = eventfd(0, 0);
    pthread_create(&t, NULL, notify_peer, NULL);
    for (size_t i = 0; i < rounds; i++) {
        uint64_t t0 = now_ns();
        if (write(ev_to_peer, &one, sizeof(one)) != sizeof(one))
            die("eventfd write");
        ev_wait(ev_to_main);
        s[i] = now_ns() - t0;
    }
    pthread_join(t, NULL);
    close(ev_to_peer);
    close(ev_to_main);
    double p50;
    report("loop wake-up (eventfd + epoll)", s, rounds, 2, &p50,
           "the writer's report reaches the worker");
    return p50;
}

/* ---- system call ---- */

static void floor_syscall(uint64_t *s)
{
    for (size_t i = 0; i < rounds; i++) {
        uint64_t t0 = now_ns();
        for (int k = 0; k < 100; k++)
            syscall(SYS_getppid);
        s[i] = now_ns() - t0;
    }
    double p50;
    report("system call (getppid)", s, rounds, 100, &p50,
           "each of memproxy's system calls, before its work (not in the sum)");
}

/* ---- commit ---- */

static void sql(sqlite3 *db, const char *q)
{
    char *err = NULL;
    if (sqlite3_exec(db, q, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "floor: %s: %s\n", q, err ? err : "?");
        exit(1);
    }
}

static void step(sqlite3_stmt *s)
{
    if (sqlite3_step(s) != SQLITE_DONE) {
        fprintf(stderr, "floor: %s\n", sqlite3_errmsg(sqlite3_db_handle(s)));
        exit(1);
    }
    sqlite3_reset(s);
}

/* A WAL database as memproxy's store runs one (synchronous=NORMAL, a reader connection
 * open beside the writer), with BEGIN IMMEDIATE and COMMIT prepared. */
struct floor_db {
    char path[4096];
    sqlite3 *db, *rd;
    sqlite3_stmt *begin, *commit;
};

static void floor_db_open(struct floor_db *f, const char *dir, const char *name, const char *schema,
                          const char *read)
{
    snprintf(f->path, sizeof(f->path), "%s/floor-%s-%ld.db", dir, name, (long)getpid());
    if (sqlite3_open(f->path, &f->db) != SQLITE_OK)
        die(f->path);
    sql(f->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    sql(f->db, schema);
    if (sqlite3_open_v2(f->path, &f->rd, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        die(f->path);
    sql(f->rd, read);
    sqlite3_prepare_v2(f->db, "BEGIN IMMEDIATE", -1, &f->begin, NULL);
    sqlite3_prepare_v2(f->db, "COMMIT", -1, &f->commit, NULL);
}

/* Close both connections and remove the database and its WAL files. */
static void floor_db_close(struct floor_db *f)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    sqlite3_finalize(f->begin);
    sqlite3_finalize(f->commit);
    sqlite3_close(f->rd);
    sqlite3_close(f->db);
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        char p[4200];
        snprintf(p, sizeof(p), "%s%s", f->path, suffixes[i]);
        unlink(p);
    }
}

static double floor_commit(uint64_t *s, const char *dir)
{
    char row[301];
    struct floor_db f;
    sqlite3_stmt *u;
    floor_db_open(&f, dir, "commit",
                  "CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO t VALUES(1, '')",
                  "SELECT * FROM t");
    sqlite3_prepare_v2(f.db, "UPDATE t SET body = ?1 WHERE id = 1", -1, &u, NULL);
    memset(row, 'a', sizeof(row) - 1);
    row[sizeof(row) - 1] = '\0';
    for (size_t i = 0; i < rounds; i++) {
        row[i % (sizeof(row) - 1)] = (char)('a' + i % 26); /* a changed page every time */
        uint64_t t0 = now_ns();
        step(f.begin);
        sqlite3_bind_text(u, 1, row, -1, SQLITE_STATIC);
        step(u);
        step(f.commit);
        s[i] = now_ns() - t0;
    }
    sqlite3_finalize(u);
    floor_db_close(&f);
    double p50;
    report("SQLite WAL commit (one row)", s, rounds, 1, &p50,
           "the reply's commit the response's end waits for");
    return p50;
}

/* ---- group commit (CPU) ---- */

/* CPU time of this thread, ns. */
static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What recording costs under load, in CPU rather than in waiting: memproxy's writer commits
 * the turns of several requests in one transaction (about four at 16 connections, from its
 * memproxy_store_transactions_total; about six since its commit waits under load,
 * storage.commit_delay_us, so four makes this share an upper bound). Each round: BEGIN IMMEDIATE,
 * FLOOR_GROUP requests' one row each (a 300-byte UPDATE, as the benchmark's requests write: each is
 * a retried window whose reply replaces the previous one), COMMIT; the sample is the CPU time
 * divided by FLOOR_GROUP. */
#define FLOOR_GROUP 4

static void floor_group_commit(uint64_t *s, const char *dir)
{
    char row[301], what[160];
    struct floor_db f;
    sqlite3_stmt *u;
    floor_db_open(&f, dir, "group",
                  "CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);"
                  "INSERT INTO t VALUES (0, ''), (1, ''), (2, ''), (3, '')",
                  "SELECT * FROM t");
    sqlite3_prepare_v2(f.db, "UPDATE t SET body = ?1 WHERE id = ?2", -1, &u, NULL);
    memset(row, 'a', sizeof(row) - 1);
    row[sizeof(row) - 1] = '\0';
    uint64_t sum = 0;
    for (size_t i = 0; i < rounds; i++) {
        row[i % (sizeof(row) - 1)] = (char)('a' + i % 26);
        uint64_t t0 = cpu_ns();
        step(f.begin);
        for (int k = 0; k < FLOOR_GROUP; k++) {
            sqlite3_bind_text(u, 1, row, -1, SQLITE_STATIC);
            sqlite3_bind_int(u, 2, k);
            step(u);
        }
        step(f.commit);
        s[i] = (cpu_ns() - t0) / FLOOR_GROUP;
        sum += s[i];
    }
    sqlite3_finalize(u);
    floor_db_close(&f);
    snprintf(what, sizeof(what),
             "recording under load, %d requests' rows per transaction: mean %.1f us (the "
             "throughput floor's share, not in the sum)",
             FLOOR_GROUP, (double)sum / (double)rounds / 1000.0);
    double p50;
    report("SQLite WAL group commit, CPU per request", s, rounds, 1, &p50, what);
}

int main(int argc, char **argv)
{
    const char *dir = ".";
    static const struct option opts[] = {
        {"dir", 1, NULL, 'd'}, {"rounds", 1, NULL, 'n'}, {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'd')
            dir = optarg;
        else if (o == 'n' && atol(optarg) >= 100)
            rounds = (size_t)atol(optarg);
        else {
            fprintf(stderr, "usage: floor [--dir DIR] [--rounds N (>= 100)]\n");
            return 2;
        }
    }
    uint64_t *s = calloc(rounds, sizeof(*s));
    if (s == NULL)
        die("calloc");
    printf("| step | p50 | p99 | where memproxy pays it |\n|---|---|---|---|\n");
    double hop = floor_loopback(s);
    double wake = floor_wake(s);
    double notify = floor_notify(s);
    double commit = floor_commit(s, dir);
    printf("| **floor, recording on** | **%.1f us** | | loopback + wake-up + commit + loop "
           "wake-up (medians) |\n",
           hop + wake + commit + notify);
    floor_syscall(s);
    floor_group_commit(s, dir);
    free(s);
    return 0;
}
