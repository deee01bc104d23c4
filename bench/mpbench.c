/*
 * mpbench: measures what memproxy adds, against the same mock upstream, in the same run.
 *
 *   mpbench --direct PORT --proxy PORT [--pid PID] [--requests N] [--seconds S] [--body FILE]
 *           [--session ID] [--slide | --call] [--upstream-pid PID [--commit-us US]]
 *           [--only latency|throughput|ttft] [--gap-us US] [--total N]
 *
 * With --session every request carries X-Session-Id: ID, so memproxy records it (the mock
 * ignores the header). The window never changes, so after the first request each one is a
 * retry to memproxy: its messages reconciled (nothing new to insert) and its reply stored
 * over the previous one — one row and one commit per request (several requests share a
 * transaction under load), awaited before the response ends.
 *
 * With --slide (and --session) the body is a voice platform's window as it comes in a call
 * instead: Agora's custom-mode shape (turn ids, timestamps, metadata), the system message and
 * the last 31 items, one turn further on every request, each connection on a session of its
 * own (ID-lat for the latency pairs, ID-C-I for throughput connection I of C) — so memproxy
 * reconciles a new window every time, as in a call, where the fixed body is a replay. A
 * direct/proxied pair sends the same window.
 *
 * With --call the body is what a call-shaped client sends instead: the system message and
 * only its newest user message, a new one every request (each connection on a session of its
 * own as with --slide when --session is given; without it nothing is recorded) — so a
 * recording proxy stores a new turn and reply every time, and its window matches nothing
 * stored.
 *
 * 1. Added latency: one keep-alive connection to each; requests alternate direct / proxied,
 *    and each pair's difference is one sample (so drift in the machine cancels out). With
 *    --gap-us the pairs are US microseconds apart, as a voice agent's turns are (seconds):
 *    what memproxy does between requests (the writer's WAL checkpoint) then does not land
 *    on the next one, as it does back to back.
 * 2. Added time to first token on streams, the same way: send -> first content event; and
 *    what memproxy added to the stream's end (a recorded reply's end waits for its commit).
 * 3. Throughput: closed loop, C connections (16 and 64) for S seconds on one epoll thread,
 *    direct and proxied; with --pid also memproxy's CPU seconds, giving requests per
 *    CPU-second ("per core").
 * 4. With --pid: memproxy's RSS before and after, and its peak.
 * 5. With --upstream-pid (the mock's): what the two ends cost in the direct runs, in CPU per
 *    request — the mock upstream (a bare evhttp server that parses the JSON body and answers
 *    JSON) and this client — next to memproxy's. A proxy is at least both: a server to its
 *    client and a client to its upstream. With --commit-us (bench/floor's group commit, CPU
 *    per request) that sum plus the commit is printed as the throughput floor with recording
 *    on, in requests per CPU-second.
 *
 * --total N replaces every part with one run of 16 connections through memproxy that ends
 * after N requests (bench/soak: memory over a long recorded run).
 *
 * --only runs one part: the added latency (1.), the added time to first token (2.; the
 * voice pattern of bench/reference, where the mock paces its tokens) or the throughput runs
 * (3.), for a tool that watches memproxy during one kind of load (bench/syscalls).
 *
 * Output: a Markdown table on stdout.
 */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUF_MAX (1 << 20)

static int bench_connect(int port, int nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (nonblock)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static char *bench_request(const char *body, const char *session, size_t *len)
{
    char *req = NULL;
    int n = asprintf(&req,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\n%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     session ? "X-Session-Id: " : "", session ? session : "", session ? "\r\n" : "",
                     strlen(body), body);
    if (n < 0)
        die("asprintf");
    *len = (size_t)n;
    return req;
}

/* ---- response framing: is buf[0..len) one whole HTTP response? ---- */

/* Returns the response length when complete, 0 when more is needed. */
static size_t resp_complete(const char *buf, size_t len)
{
    const char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (end == NULL)
        return 0;
    size_t head = (size_t)(end - buf) + 4;
    const char *cl = memmem(buf, head, "Content-Length: ", 16);
    if (cl != NULL) {
        size_t body = strtoul(cl + 16, NULL, 10);
        return len >= head + body ? head + body : 0;
    }
    size_t off = head; /* chunked */
    for (;;) {
        const char *crlf = memmem(buf + off, len - off, "\r\n", 2);
        if (crlf == NULL)
            return 0;
        size_t n = strtoul(buf + off, NULL, 16);
        size_t next = (size_t)(crlf - buf) + 2 + n + 2;
        if (next > len)
            return 0;
        if (n == 0)
            return next;
        off = next;
    }
}

struct conn {
    int fd;
    char *buf;
    size_t len;
    int turn;      /* --slide: the window's newest turn */
    char *session; /* --slide: this connection's session */
    char *req;     /* --slide: the request being sent */
};

/* ---- what a request sends: one fixed text, or a window one turn further each time ---- */

struct source {
    const char *req; /* the fixed request (slide 0) */
    size_t len;
    int slide;  /* 1: a sliding window (--slide); 2: a call-shaped request (--call) */
    int stream; /* slide: "stream": true */
};

#define SLIDE_ITEMS 31 /* Agora's max_history default is 32: the system message and 31 */

/* The window at turn k: Agora's custom mode (turn ids, timestamps, metadata), compact. */
static char *slide_body(int k, int stream)
{
    size_t cap = 16384, len = 0;
    char *b = malloc(cap);
    int first = 2 * k - 1 > SLIDE_ITEMS ? 2 * k - 1 - SLIDE_ITEMS : 0; /* item 2t-2: user t */
    len += (size_t)snprintf(b + len, cap - len,
                            "{\"model\":\"gpt-4o-mini\",\"turn_id\":%d,%s\"messages\":["
                            "{\"role\":\"system\",\"content\":\"You are a friendly voice "
                            "assistant for Example Inc. Keep answers short and speak "
                            "naturally.\"}",
                            k, stream ? "\"stream\":true," : "");
    for (int item = first; item < 2 * k - 1; item++) {
        int t = item / 2 + 1;
        long long ts = 1763800100000LL + 5000LL * t + (item % 2) * 1000;
        if (item % 2 == 0)
            len += (size_t)snprintf(b + len, cap - len,
                                    ",{\"role\":\"user\",\"content\":\"This is question number "
                                    "%d about my order and its delivery date.\",\"turn_id\":%d,"
                                    "\"timestamp\":%lld,\"metadata\":{\"source\":\"asr\"}}",
                                    t, t, ts);
        else
            len += (size_t)snprintf(b + len, cap - len,
                                    ",{\"role\":\"assistant\",\"content\":\"Here is answer "
                                    "number %d: your order ships tomorrow and arrives in two "
                                    "days.\",\"turn_id\":%d,\"timestamp\":%lld,"
                                    "\"metadata\":{\"source\":\"llm\"}}",
                                    t, t, ts);
    }
    snprintf(b + len, cap - len, "]}");
    return b;
}

/* A call-shaped request at turn k: the system message and the newest user message only. */
static char *call_body(int k, int stream)
{
    char *b = NULL;
    if (asprintf(&b,
                 "{\"model\":\"gpt-4o-mini\",%s\"messages\":[{\"role\":\"system\",\"content\":"
                 "\"You are a friendly voice assistant for Example Inc. Keep answers short and "
                 "speak naturally.\"},{\"role\":\"user\",\"content\":\"This is question number "
                 "%d about my order and its delivery date.\"}]}",
                 stream ? "\"stream\":true," : "", k) < 0)
        die("asprintf");
    return b;
}

/* The next request c sends from src, and its length. */
static const char *source_next(const struct source *src, struct conn *c, size_t *len)
{
    if (!src->slide) {
        *len = src->len;
        return src->req;
    }
    free(c->req);
    char *body =
        src->slide == 2 ? call_body(++c->turn, src->stream) : slide_body(++c->turn, src->stream);
    c->req = bench_request(body, c->session, len);
    free(body);
    return c->req;
}

static void conn_close(struct conn *c)
{
    close(c->fd);
    free(c->buf);
    free(c->session);
    free(c->req);
}

/* Blocking: send one request, read until the response is complete. Optionally stamps the
 * first time a content event is seen. Returns the latency in ns. */
static uint64_t one_request(struct conn *c, const struct source *src, uint64_t *ttft)
{
    size_t reqlen;
    const char *req = source_next(src, c, &reqlen);
    uint64_t t0 = now_ns();
    if (write(c->fd, req, reqlen) != (ssize_t)reqlen)
        die("write");
    c->len = 0;
    if (ttft)
        *ttft = 0;
    for (;;) {
        ssize_t n = read(c->fd, c->buf + c->len, BUF_MAX - c->len);
        if (n <= 0)
            die("read");
        c->len += (size_t)n;
        if (ttft && *ttft == 0 && memmem(c->buf, c->len, "\"content\":\"", 11) &&
            memmem(c->buf, c->len, "data: ", 6))
            *ttft = now_ns() - t0;
        size_t done = resp_complete(c->buf, c->len);
        if (done) {
            if (memcmp(c->buf, "HTTP/1.1 200", 12) != 0) {
                fprintf(stderr, "unexpected response: %.200s\n", c->buf);
                exit(1);
            }
            return now_ns() - t0;
        }
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(int64_t *v, size_t n, double p)
{
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0; /* us */
}

struct pair_result {
    double direct_p50, direct_p99, proxy_p50, proxy_p99, added_p50, added_p90, added_p99;
    double proxy_p999, proxy_max; /* the tail a stall (a checkpoint, a wake-up) shows in */
    double end_p50, end_p99;      /* streams: added to the stream's end (its reply's commit) */
};

/* Alternate direct and proxied requests; stream = measure TTFT instead of full latency. */
static struct pair_result pairwise(int dport, int pport, const struct source *src,
                                   const char *session, int n, int stream, int gap_us)
{
    const struct timespec gap = {.tv_sec = gap_us / 1000000, .tv_nsec = gap_us % 1000000 * 1000L};
    struct conn d = {.fd = bench_connect(dport, 0), .buf = malloc(BUF_MAX)};
    struct conn p = {.fd = bench_connect(pport, 0), .buf = malloc(BUF_MAX)};
    if (src->slide && session) { /* a session of its own; the mock ignores the direct side's */
        if (asprintf(&p.session, "%s-lat%s", session, stream ? "-stream" : "") < 0)
            die("asprintf");
        d.session = strdup(p.session);
    }
    int64_t *dv = calloc((size_t)n, 8), *pv = calloc((size_t)n, 8), *av = calloc((size_t)n, 8);
    int64_t *ev = calloc((size_t)n, 8);
    for (int i = 0; i < n / 10; i++) { /* warm up: connections, caches, curl's pool */
        one_request(&d, src, NULL);
        one_request(&p, src, NULL);
    }
    for (int i = 0; i < n; i++) {
        uint64_t td, tp, fd_, fp;
        if (gap_us > 0)
            nanosleep(&gap, NULL);
        if (i % 2 == 0) {
            td = one_request(&d, src, stream ? &fd_ : NULL);
            tp = one_request(&p, src, stream ? &fp : NULL);
        } else {
            tp = one_request(&p, src, stream ? &fp : NULL);
            td = one_request(&d, src, stream ? &fd_ : NULL);
        }
        dv[i] = (int64_t)(stream ? fd_ : td);
        pv[i] = (int64_t)(stream ? fp : tp);
        av[i] = pv[i] - dv[i];
        ev[i] = (int64_t)tp - (int64_t)td;
    }
    qsort(dv, (size_t)n, 8, cmp_i64);
    qsort(pv, (size_t)n, 8, cmp_i64);
    qsort(av, (size_t)n, 8, cmp_i64);
    qsort(ev, (size_t)n, 8, cmp_i64);
    struct pair_result r = {
        pct(dv, (size_t)n, 50), pct(dv, (size_t)n, 99),   pct(pv, (size_t)n, 50),
        pct(pv, (size_t)n, 99), pct(av, (size_t)n, 50),   pct(av, (size_t)n, 90),
        pct(av, (size_t)n, 99), pct(pv, (size_t)n, 99.9), pct(pv, (size_t)n, 100),
        pct(ev, (size_t)n, 50), pct(ev, (size_t)n, 99)};
    conn_close(&d);
    conn_close(&p);
    free(dv);
    free(pv);
    free(av);
    free(ev);
    return r;
}

/* ---- throughput: C connections, closed loop, one epoll thread ---- */

static double cpu_seconds(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* fields after ')': state(3) ... utime(14) stime(15) */
    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long rss_kb(int pid, const char *field)
{
    char path[64], line[256];
    long v = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, strlen(field)) == 0)
            v = strtol(line + strlen(field), NULL, 10);
    fclose(f);
    return v;
}

/* This process's CPU time in seconds (mpbench is one thread). */
static double self_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Requests per second; with pid, *cpu = that process's CPU seconds over the run; *self = this
 * client's. */
static long throughput_max; /* --total: the run ends after this many requests (0: by time) */

static double throughput(int port, int nconn, double seconds, const struct source *src,
                         const char *session, int pid, double *cpu, double *self)
{
    int ep = epoll_create1(0);
    struct conn *cs = calloc((size_t)nconn, sizeof(*cs));
    size_t reqlen;
    const char *req;
    for (int i = 0; i < nconn; i++) {
        cs[i].fd = bench_connect(port, 1);
        cs[i].buf = malloc(BUF_MAX);
        if (src->slide && session && asprintf(&cs[i].session, "%s-%d-%d", session, nconn, i) < 0)
            die("asprintf");
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev);
        req = source_next(src, &cs[i], &reqlen);
        if (write(cs[i].fd, req, reqlen) != (ssize_t)reqlen)
            die("write");
    }
    long done = 0;
    double cpu0 = pid ? cpu_seconds(pid) : 0, self0 = self_cpu_seconds();
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9);
    struct epoll_event evs[128];
    while (now_ns() < end && (throughput_max == 0 || done < throughput_max)) {
        int n = epoll_wait(ep, evs, 128, 100);
        for (int k = 0; k < n; k++) {
            struct conn *c = &cs[evs[k].data.u32];
            ssize_t r = read(c->fd, c->buf + c->len, BUF_MAX - c->len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                die("read (throughput)");
            }
            c->len += (size_t)r;
            size_t whole = resp_complete(c->buf, c->len);
            if (whole) {
                done++;
                memmove(c->buf, c->buf + whole, c->len - whole);
                c->len -= whole;
                req = source_next(src, c, &reqlen);
                if (write(c->fd, req, reqlen) != (ssize_t)reqlen)
                    die("write");
            }
        }
    }
    double elapsed = (double)(now_ns() - t0) / 1e9;
    if (pid)
        *cpu = cpu_seconds(pid) - cpu0;
    *self = self_cpu_seconds() - self0;
    for (int i = 0; i < nconn; i++)
        conn_close(&cs[i]);
    free(cs);
    close(ep);
    return (double)done / elapsed;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        die(path);
    char *s = calloc(1, BUF_MAX);
    size_t n = fread(s, 1, BUF_MAX - 1, f);
    fclose(f);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* 1. and 2.: one request at a time, plain (unless NULL) then streamed (unless NULL). */
static void measure_latency(int dport, int pport, const struct source *plain,
                            const struct source *stream, const char *session, int n, int gap_us)
{
    if (plain != NULL) {
        struct pair_result lat = pairwise(dport, pport, plain, session, n, 0, gap_us);
        printf("| latency p50, 1 request at a time | %.1f us | %.1f us | **%.1f us** |\n",
               lat.direct_p50, lat.proxy_p50, lat.added_p50);
        printf("| latency p99, 1 request at a time | %.1f us | %.1f us | **%.1f us** (p90 "
               "%.1f) |\n",
               lat.direct_p99, lat.proxy_p99, lat.added_p99, lat.added_p90);
        printf("| latency p99.9 / max, 1 request at a time | | %.1f / %.1f us | |\n",
               lat.proxy_p999, lat.proxy_max);
    }
    if (stream == NULL)
        return;
    struct pair_result ttft = pairwise(dport, pport, stream, session, n, 1, gap_us);
    printf("| stream time to first token p50 | %.1f us | %.1f us | **%.1f us** |\n",
           ttft.direct_p50, ttft.proxy_p50, ttft.added_p50);
    printf("| stream time to first token p99 | %.1f us | %.1f us | **%.1f us** |\n",
           ttft.direct_p99, ttft.proxy_p99, ttft.added_p99);
    printf("| added to the stream's end p50 / p99 | | | %.1f / %.1f us |\n", ttft.end_p50,
           ttft.end_p99);
}

struct tp_args {
    int dport, pport, pid, upid;
    double seconds, commit_us;
    const char *session;
};

/* --total: N requests through memproxy, 16 connections, closed loop. */
static void measure_total(int pport, int pid, const struct source *plain, const char *session)
{
    double cpu = 0, self = 0;
    uint64_t t0 = now_ns();
    double rate = throughput(pport, 16, 1e9, plain, session, pid, &cpu, &self);
    double s = (double)(now_ns() - t0) / 1e9;
    printf(
        "| %ld requests, 16 connections | | %.0f req/s for %.0f s | memproxy used %.1f CPU-s |\n",
        throughput_max, rate, s, cpu);
}

/* 3. and 5.: the throughput runs, what each end costs, the floor. */
static void measure_throughput(const struct tp_args *a, const struct source *plain)
{
    int conns[] = {16, 64};
    double up_us[2] = {0, 0}, client_us[2] = {0, 0}, mp_us[2] = {0, 0}, seconds = a->seconds;
    for (int i = 0; i < 2; i++) {
        double cpu = 0, ucpu = 0, dself = 0, pself = 0;
        double d =
            throughput(a->dport, conns[i], seconds, plain, a->session, a->upid, &ucpu, &dself);
        double p = throughput(a->pport, conns[i], seconds, plain, a->session, a->pid, &cpu, &pself);
        printf("| throughput, %d connections | %.0f req/s | %.0f req/s |", conns[i], d, p);
        if (a->pid && cpu > 0)
            printf(" memproxy used %.2f CPU-s in %.0f s: **%.0f req per CPU-second** |\n", cpu,
                   seconds, p * seconds / cpu);
        else
            printf(" |\n");
        up_us[i] = ucpu * 1e6 / (d * seconds);
        client_us[i] = dself * 1e6 / (d * seconds);
        mp_us[i] = cpu * 1e6 / (p * seconds);
    }
    for (int i = 0; a->upid && a->pid && i < 2; i++)
        printf("| CPU per request, %d connections | mock upstream %.1f us, client %.1f us | "
               "memproxy %.1f us | |\n",
               conns[i], up_us[i], client_us[i], mp_us[i]);
    for (int i = 0; a->upid && a->commit_us > 0 && i < 2; i++) {
        double f = up_us[i] + client_us[i] + a->commit_us;
        printf("| throughput floor, recording on, %d connections | | | mock upstream + client + "
               "group commit = %.1f us of CPU per request: **%.0f req per CPU-second** |\n",
               conns[i], f, 1e6 / f);
    }
}

int main(int argc, char **argv)
{
    int dport = 0, pport = 0, pid = 0, upid = 0, n = 5000, c, slide = 0, gap_us = 0;
    double commit_us = 0;
    const char *session = NULL, *only = "";
    double seconds = 5;
    char *body = strdup("{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\","
                        "\"content\":\"Hello there\"}]}");
    static const struct option opts[] = {
        {"direct", 1, NULL, 'd'},   {"proxy", 1, NULL, 'p'},        {"pid", 1, NULL, 'P'},
        {"requests", 1, NULL, 'n'}, {"seconds", 1, NULL, 's'},      {"body", 1, NULL, 'b'},
        {"session", 1, NULL, 'S'},  {"upstream-pid", 1, NULL, 'U'}, {"commit-us", 1, NULL, 'C'},
        {"only", 1, NULL, 'O'},     {"slide", 0, NULL, 'W'},        {"gap-us", 1, NULL, 'G'},
        {"call", 0, NULL, 'K'},     {"total", 1, NULL, 'T'},        {NULL, 0, NULL, 0}};
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            dport = atoi(optarg);
            break;
        case 'p':
            pport = atoi(optarg);
            break;
        case 'P':
            pid = atoi(optarg);
            break;
        case 'n':
            n = atoi(optarg);
            break;
        case 's':
            seconds = atof(optarg);
            break;
        case 'S':
            session = optarg;
            break;
        case 'U':
            upid = atoi(optarg);
            break;
        case 'C':
            commit_us = atof(optarg);
            break;
        case 'O':
            only = optarg;
            break;
        case 'W':
            slide = 1;
            break;
        case 'K':
            slide = 2;
            break;
        case 'T':
            throughput_max = atol(optarg);
            break;
        case 'G':
            gap_us = atoi(optarg);
            break;
        case 'b':
            free(body);
            body = read_file(optarg);
            break;
        default:
            return 2;
        }
    }
    int lat_only = strcmp(only, "latency") == 0, tp_only = strcmp(only, "throughput") == 0;
    int ttft_only = strcmp(only, "ttft") == 0;
    if (!dport || !pport || (*only && !lat_only && !tp_only && !ttft_only) ||
        (slide == 1 && session == NULL)) {
        fprintf(stderr, "usage: mpbench --direct PORT --proxy PORT [--pid PID] [--requests N] "
                        "[--seconds S] [--body FILE] [--session ID] [--slide | --call] "
                        "[--upstream-pid PID [--commit-us US]] [--only "
                        "latency|throughput|ttft] [--gap-us US]\n");
        return 2;
    }
    size_t plain_len, stream_len;
    char *plain = bench_request(body, session, &plain_len);
    char *sbody = NULL;
    if (asprintf(&sbody, "{\"stream\":true,%s", body + 1) < 0)
        die("asprintf");
    char *stream = bench_request(sbody, session, &stream_len);
    long rss0 = pid ? rss_kb(pid, "VmRSS:") : 0;

    struct source psrc = {.req = plain, .len = plain_len, .slide = slide};
    struct source ssrc = {.req = stream, .len = stream_len, .slide = slide, .stream = 1};

    printf("| measure | direct | through memproxy | added by memproxy |\n|---|---|---|---|\n");
    if (throughput_max > 0)
        measure_total(pport, pid, &psrc, session);
    else if (!tp_only)
        measure_latency(dport, pport, ttft_only ? NULL : &psrc, lat_only ? NULL : &ssrc, session, n,
                        gap_us);
    if (!lat_only && !ttft_only && throughput_max == 0)
        measure_throughput(&(struct tp_args){dport, pport, pid, upid, seconds, commit_us, session},
                           &psrc);
    if (pid)
        printf("| memproxy RSS | | %ld KiB before, %ld KiB after, peak %ld KiB | |\n", rss0,
               rss_kb(pid, "VmRSS:"), rss_kb(pid, "VmHWM:"));
    free(plain);
    free(stream);
    free(sbody);
    free(body);
    return 0;
}
