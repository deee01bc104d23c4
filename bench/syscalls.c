/*
 * syscalls: what each system call memproxy makes costs it on this machine, measured inside
 * memproxy. An LD_PRELOAD module (bench/syscalls drives it): it wraps the calls memproxy and
 * its libraries make on the request path and keeps, per thread name and call, a histogram of
 * the wall time and of the thread's CPU time spent in the call.
 *
 *   LD_PRELOAD=build-bench/bench/libmpsyscalls.so MPSYSCALLS_DIR=DIR memproxy ...
 *
 * Control, through files in DIR (a thread of this module looks every 2 ms): "reset" zeroes
 * the counts (after start-up, between phases); "dump" writes the table to DIR/table
 * (tab-separated: thread, call, calls, wall p50/p90/mean, CPU p50/p90/mean, in ns). Each file
 * is removed once acted on. A wrapper leaves errno as the real call set it.
 *
 * Why both clocks: a call that wakes a thread (an eventfd write, sem_post) may be preempted
 * by it on the same CPU, and its wall time then holds the woken thread's work; its CPU time
 * does not. The thread CPU clock is itself a system call (no vDSO), so every figure carries
 * the cost of reading the clocks: measured at start (an empty interval, median) and
 * subtracted.
 *
 * Only calls made through the dynamic linker are seen (memproxy, libevent, libcurl, SQLite,
 * glibc's exported functions); poll() is counted only with a zero timeout (a check, not a
 * wait), and calls that wait (epoll_wait, sem_wait) are not wrapped.
 */
/* the wrappers must define the 32-bit-offset names too (fcntl beside fcntl64), which meson's
 * _FILE_OFFSET_BITS=64 would redirect onto the 64-bit ones */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum sc_call {
    SC_READV,
    SC_RECV,
    SC_WRITEV,
    SC_SEND,
    SC_WRITE,
    SC_POLL0,
    SC_IOCTL,
    SC_FCNTL,
    SC_PREAD,
    SC_PWRITE,
    SC_SEM_POST,
    SC_NCALLS
};

static const char *const sc_names[SC_NCALLS] = {"readv", "recv",   "writev",  "send",
                                                "write", "poll",   "ioctl",   "fcntl",
                                                "pread", "pwrite", "sem_post"};

#define SC_THREADS   8    /* distinct thread names kept; others share the last slot */
#define SC_BUCKETS   4096 /* 100 ns each: up to 409.6 us, the rest in the last */
#define SC_BUCKET_NS 100u

struct sc_hist {
    _Atomic uint32_t b[SC_BUCKETS];
    _Atomic uint64_t n, sum_ns;
};

struct sc_slot {
    char name[16];
    struct sc_hist wall[SC_NCALLS], cpu[SC_NCALLS];
};

static struct sc_slot sc_slots[SC_THREADS];
static _Atomic int sc_nslots;
static pthread_mutex_t sc_slots_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local struct sc_slot *sc_mine;
static uint64_t sc_bias_wall, sc_bias_cpu; /* the clocks' own cost, subtracted */
static const char *sc_dir;

static uint64_t sc_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This thread's slot, found by its name (set by memproxy with pthread_setname_np). */
static struct sc_slot *sc_slot(void)
{
    char name[16] = "";
    if (sc_mine != NULL)
        return sc_mine;
    pthread_getname_np(pthread_self(), name, sizeof(name));
    pthread_mutex_lock(&sc_slots_mu);
    int n = atomic_load(&sc_nslots), i;
    for (i = 0; i < n && strcmp(sc_slots[i].name, name) != 0; i++)
        ;
    if (i == n && n < SC_THREADS) {
        snprintf(sc_slots[n].name, sizeof(sc_slots[n].name), "%s", name);
        atomic_store(&sc_nslots, n + 1);
    }
    pthread_mutex_unlock(&sc_slots_mu);
    /* a thread named before its first call keeps that name's slot */
    return sc_mine = &sc_slots[i < SC_THREADS ? i : SC_THREADS - 1];
}

static void sc_add(struct sc_hist *h, uint64_t ns, uint64_t bias)
{
    ns = ns > bias ? ns - bias : 0;
    uint64_t k = ns / SC_BUCKET_NS;
    atomic_fetch_add_explicit(&h->b[k < SC_BUCKETS ? k : SC_BUCKETS - 1], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->n, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

struct sc_mark {
    uint64_t wall, cpu;
};

static struct sc_mark sc_begin(void)
{
    struct sc_mark m = {.cpu = sc_clock(CLOCK_THREAD_CPUTIME_ID)};
    m.wall = sc_clock(CLOCK_MONOTONIC);
    return m;
}

/* Record the call begun at m; errno is kept for the caller. */
static void sc_end(enum sc_call c, struct sc_mark m)
{
    int saved = errno;
    uint64_t wall = sc_clock(CLOCK_MONOTONIC), cpu = sc_clock(CLOCK_THREAD_CPUTIME_ID);
    struct sc_slot *s = sc_slot();
    sc_add(&s->wall[c], wall - m.wall, sc_bias_wall);
    sc_add(&s->cpu[c], cpu - m.cpu, sc_bias_cpu);
    errno = saved;
}

/* the next definition of fn (libc's); the void ** store is POSIX's way to take a function
 * from dlsym without converting an object pointer */
#define SC_REAL(fn)                                                                                \
    static __typeof__(fn) *real;                                                                   \
    if (real == NULL)                                                                              \
    *(void **)&real = dlsym(RTLD_NEXT, #fn)

/* A wrapper that times every call: fn's signature, its arguments, its counter. */
#define SC_WRAP(type, fn, call, params, args)                                                      \
    type fn params                                                                                 \
    {                                                                                              \
        SC_REAL(fn);                                                                               \
        struct sc_mark m = sc_begin();                                                             \
        type r = real args;                                                                        \
        sc_end(call, m);                                                                           \
        return r;                                                                                  \
    }

SC_WRAP(ssize_t, readv, SC_READV, (int fd, const struct iovec *iov, int n), (fd, iov, n))
SC_WRAP(ssize_t, recv, SC_RECV, (int fd, void *buf, size_t len, int flags), (fd, buf, len, flags))
SC_WRAP(ssize_t, writev, SC_WRITEV, (int fd, const struct iovec *iov, int n), (fd, iov, n))
SC_WRAP(ssize_t, send, SC_SEND, (int fd, const void *buf, size_t len, int flags),
        (fd, buf, len, flags))
SC_WRAP(ssize_t, write, SC_WRITE, (int fd, const void *buf, size_t len), (fd, buf, len))
SC_WRAP(ssize_t, pread64, SC_PREAD, (int fd, void *buf, size_t len, off64_t off),
        (fd, buf, len, off))
SC_WRAP(ssize_t, pwrite64, SC_PWRITE, (int fd, const void *buf, size_t len, off64_t off),
        (fd, buf, len, off))
SC_WRAP(int, sem_post, SC_SEM_POST, (sem_t * s), (s))

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    SC_REAL(poll);
    if (timeout != 0)
        return real(fds, n, timeout);
    struct sc_mark m = sc_begin();
    int r = real(fds, n, timeout);
    sc_end(SC_POLL0, m);
    return r;
}

int ioctl(int fd, unsigned long req, ...)
{
    SC_REAL(ioctl);
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    struct sc_mark m = sc_begin();
    int r = real(fd, req, arg);
    sc_end(SC_IOCTL, m);
    return r;
}

/* SQLite's unix VFS locks the WAL index with fcntl(F_SETLK); glibc exports fcntl64 too */
static int sc_fcntl(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
    struct sc_mark m = sc_begin();
    int r = real(fd, cmd, arg);
    sc_end(SC_FCNTL, m);
    return r;
}

int fcntl(int fd, int cmd, ...)
{
    SC_REAL(fcntl);
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return sc_fcntl(real, fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
    SC_REAL(fcntl64);
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return sc_fcntl(real, fd, cmd, arg);
}

/* ---- control ---- */

static uint64_t sc_pct(const struct sc_hist *h, double p)
{
    uint64_t n = atomic_load(&h->n), want = (uint64_t)((double)n * p), seen = 0;
    for (int k = 0; k < SC_BUCKETS; k++) {
        seen += atomic_load(&h->b[k]);
        if (seen > want)
            return (uint64_t)k * SC_BUCKET_NS + SC_BUCKET_NS / 2;
    }
    return (uint64_t)SC_BUCKETS * SC_BUCKET_NS;
}

static void sc_reset(void)
{
    for (int s = 0; s < SC_THREADS; s++) {
        for (int c = 0; c < SC_NCALLS; c++) {
            struct sc_hist *hs[2] = {&sc_slots[s].wall[c], &sc_slots[s].cpu[c]};
            for (int i = 0; i < 2; i++) {
                for (int k = 0; k < SC_BUCKETS; k++)
                    atomic_store(&hs[i]->b[k], 0);
                atomic_store(&hs[i]->n, 0);
                atomic_store(&hs[i]->sum_ns, 0);
            }
        }
    }
}

static void sc_dump(FILE *f)
{
    int n = atomic_load(&sc_nslots);
    for (int s = 0; s < n; s++) {
        for (int c = 0; c < SC_NCALLS; c++) {
            const struct sc_hist *w = &sc_slots[s].wall[c], *u = &sc_slots[s].cpu[c];
            uint64_t calls = atomic_load(&w->n);
            if (calls == 0)
                continue;
            fprintf(f, "%s\t%s\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n", sc_slots[s].name,
                    sc_names[c], (unsigned long long)calls, (unsigned long long)sc_pct(w, 0.5),
                    (unsigned long long)sc_pct(w, 0.9),
                    (unsigned long long)(atomic_load(&w->sum_ns) / calls),
                    (unsigned long long)sc_pct(u, 0.5), (unsigned long long)sc_pct(u, 0.9),
                    (unsigned long long)(atomic_load(&u->sum_ns) / calls));
        }
    }
}

/* "reset" or "dump" in the control directory: act on it, then remove it. */
static int sc_asked(const char *what, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", sc_dir, what);
    return access(path, F_OK) == 0;
}

static void *sc_control(void *arg)
{
    char path[4096], tmp[4200], out[4200];
    sigset_t all;
    (void)arg;
    /* started before memproxy blocks its signals: SIGTERM is for memproxy's main thread */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        usleep(2000);
        if (sc_asked("reset", path, sizeof(path))) {
            sc_reset();
            unlink(path);
        }
        if (sc_asked("dump", path, sizeof(path))) {
            snprintf(tmp, sizeof(tmp), "%s/table.tmp", sc_dir);
            snprintf(out, sizeof(out), "%s/table", sc_dir);
            FILE *f = fopen(tmp, "w");
            if (f != NULL) {
                sc_dump(f);
                fclose(f);
                rename(tmp, out);
            }
            unlink(path);
        }
    }
    return NULL;
}

static int sc_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The clocks' own cost: the median of 1001 empty intervals, read as sc_begin/sc_end do. */
static void sc_calibrate(void)
{
    enum { N = 1001 };
    static uint64_t w[N], u[N];
    for (int i = 0; i < N; i++) {
        struct sc_mark m = sc_begin();
        uint64_t wall = sc_clock(CLOCK_MONOTONIC), cpu = sc_clock(CLOCK_THREAD_CPUTIME_ID);
        w[i] = wall - m.wall;
        u[i] = cpu - m.cpu;
    }
    qsort(w, N, sizeof(w[0]), sc_cmp);
    qsort(u, N, sizeof(u[0]), sc_cmp);
    sc_bias_wall = w[N / 2];
    sc_bias_cpu = u[N / 2];
}

__attribute__((constructor)) static void sc_init(void)
{
    pthread_t t;
    sc_dir = getenv("MPSYSCALLS_DIR");
    if (sc_dir == NULL)
        return;
    sc_calibrate();
    if (pthread_create(&t, NULL, sc_control, NULL) == 0) {
        pthread_setname_np(t, "mpsyscalls");
        pthread_detach(t);
    }
}
