#include "memory/sqlite_ckpt.h"

#include "base/log.h"
#include "base/util.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sqlite_ckpt {
    sqlite3 *db; /* the thread's own connection */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake_cv;        /* want or stop set */
    pthread_cond_t idle_cv;        /* a pass ended */
    int want, busy, stop;          /* under mu */
    struct sqlite_ckpt *cut_first; /* under mu: a thread whose pass this one's must end */
    int idle;                      /* SCHED_IDLE */
    int failing;                   /* the thread's: its last pass failed (logged once) */
    atomic_uint_fast64_t n;
};

int sqlite_ckpt_run(sqlite3 *db, int *failing)
{
    int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc == SQLITE_OK) {
        if (*failing)
            log_info("store: checkpoints work again");
        *failing = 0;
        return 0;
    }
    if (rc != SQLITE_BUSY && rc != SQLITE_INTERRUPT && !*failing) { /* cut: sqlite_ckpt_cut */
        log_warn("store: checkpoint: %s (the WAL grows until one succeeds)", sqlite3_errmsg(db));
        *failing = 1;
    }
    return -1;
}

/* An idle thread runs only on a CPU nothing else wants (the header says why). Without it (a
 * system that refuses SCHED_IDLE) it runs as the writer does. */
static void sqlite_ckpt_idle_policy(void)
{
    struct sched_param sp = {0};
    int rc = pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
    if (rc != 0)
        log_debug("store: the checkpoint thread keeps its priority: %s", strerror(rc));
}

static void *sqlite_ckpt_main(void *arg)
{
    struct sqlite_ckpt *c = arg;
    if (c->idle)
        sqlite_ckpt_idle_policy();
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->want && !c->stop)
            pthread_cond_wait(&c->wake_cv, &c->mu);
        if (c->stop)
            break;
        struct sqlite_ckpt *other = c->cut_first;
        c->want = 0;
        c->busy = 1;
        c->cut_first = NULL;
        pthread_mutex_unlock(&c->mu);
        if (other != NULL) /* it would hold the lock this pass needs */
            sqlite_ckpt_cut(other);
        if (sqlite_ckpt_run(c->db, &c->failing) == 0)
            atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->idle_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* The connection: the writer's durability for the copy (synchronous=NORMAL syncs the WAL
 * before it and the database after it); never written through, so no WAL hook. */
static int sqlite_ckpt_connect(struct sqlite_ckpt *c, const char *path, char **err)
{
    if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(c->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK) {
        *err = xasprintf("%s: cannot open for checkpoints: %s", path, sqlite3_errmsg(c->db));
        return -1;
    }
    return 0;
}

struct sqlite_ckpt *sqlite_ckpt_create(const char *path, int idle, char **err)
{
    struct sqlite_ckpt *c = xcalloc(1, sizeof(*c));
    c->idle = idle;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->wake_cv, NULL);
    pthread_cond_init(&c->idle_cv, NULL);
    if (sqlite_ckpt_connect(c, path, err) != 0)
        goto fail;
    if (util_thread_start(&c->thread, sqlite_ckpt_main, c) != 0) {
        *err = xasprintf("%s: cannot start the checkpoint thread", path);
        goto fail;
    }
    return c;
fail:
    sqlite3_close(c->db);
    pthread_cond_destroy(&c->idle_cv);
    pthread_cond_destroy(&c->wake_cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return NULL;
}

void sqlite_ckpt_destroy(struct sqlite_ckpt *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->wake_cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    sqlite3_close(c->db);
    pthread_cond_destroy(&c->idle_cv);
    pthread_cond_destroy(&c->wake_cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int sqlite_ckpt_wake_cut(struct sqlite_ckpt *c, struct sqlite_ckpt *first)
{
    pthread_mutex_lock(&c->mu);
    int asked = !c->busy && !c->want;
    if (asked) {
        c->want = 1;
        c->cut_first = first;
        pthread_cond_signal(&c->wake_cv);
    }
    pthread_mutex_unlock(&c->mu);
    return asked;
}

int sqlite_ckpt_wake(struct sqlite_ckpt *c)
{
    return sqlite_ckpt_wake_cut(c, NULL);
}

int sqlite_ckpt_busy(struct sqlite_ckpt *c)
{
    pthread_mutex_lock(&c->mu);
    int busy = c->busy || c->want;
    pthread_mutex_unlock(&c->mu);
    return busy;
}

void sqlite_ckpt_idle(struct sqlite_ckpt *c)
{
    pthread_mutex_lock(&c->mu);
    while ((c->busy || c->want) && !c->stop)
        pthread_cond_wait(&c->idle_cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

void sqlite_ckpt_cut(struct sqlite_ckpt *c)
{
    pthread_mutex_lock(&c->mu);
    c->want = 0; /* asked for and not begun: not begun */
    while (c->busy && !c->stop) {
        /* again each millisecond: a pass clears the flag as it begins, so one sent just
         * before that would be lost */
        sqlite3_interrupt(c->db);
        struct timespec ts = util_timespec(util_now_ns() + 1000000u);
        int rc = pthread_cond_clockwait(&c->idle_cv, &c->mu, CLOCK_MONOTONIC, &ts);
        if (rc != 0 && rc != ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&c->mu);
}

uint64_t sqlite_ckpt_count(struct sqlite_ckpt *c)
{
    return atomic_load_explicit(&c->n, memory_order_relaxed);
}
