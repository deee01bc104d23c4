#include "memory/store.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/pgsql.h"
#include "memory/purge.h"
#include "memory/sqlite.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define STORE_PURGE_EVERY_MS (3600 * 1000LL)

/* Completions waiting for an attached base's loop: the writer appends and writes efd after
 * unlocking; the base's event on efd takes the whole list. Where the backend has edge
 * triggering (epoll) the event is edge-triggered and efd is read only every 65536th wake-up
 * (so its counter stays far from full): each write is one wake-up, and the read level
 * triggering needs each time (a system call, on the response's path) is saved. */
struct store_inbox {
    struct event_base *base;
    struct event *ev;
    int efd;
    int edge;       /* ev is edge-triggered: efd is read only now and then */
    unsigned wakes; /* on the base's thread */
    pthread_mutex_t mu;
    struct store_batch *head, *tail;
    /* The wait for a commit without sleeping (store_opts.commit_spin_us): while spinning
     * (under mu) the base's thread is in store_inbox_spin, looking at the list, and efd is
     * not written; spin_ev runs that wait once the callback that submitted has returned. */
    int spinning;
    struct event *spin_ev;
    struct store *st;
    atomic_int pending;       /* its awaited batches submitted and not yet reported */
    _Atomic uint64_t last_ns; /* when one was last submitted (any thread may submit) */
    atomic_int sparse;        /* ... and it came spin_us * 2 or more after the one before */
    struct store_inbox *next;
};

struct store {
    const struct store_backend *be;
    void *db; /* the backend's write connection: the writer thread's alone after open */
    struct store_opts opts;
    pthread_t thread;
    pthread_mutex_t mu;
    /* The writer sleeps on wake while sleeping is set; whoever queues work or asks for the
     * stop clears it and posts once. A semaphore, not a condition variable: glibc takes a
     * condition variable's mutex back in its contended state, so each wake-up cost the
     * writer one more futex call at its next unlock, with nobody to wake. */
    sem_t wake;
    int sleeping;
    /* For store_gather, about the batches someone waits for (with a completion callback):
     * when the queue's first such batch arrived (0: it holds none), the gap between it and
     * the one before it, and when the last one arrived (CLOCK_MONOTONIC ns). */
    uint64_t wait_ns, wait_gap_ns, last_wait_ns;
    pthread_cond_t idle_cv; /* the writer finished a group */
    struct store_batch *head, *tail;
    /* When the writer takes the queue (CLOCK_MONOTONIC ns): 0 once it holds a batch not
     * deferred, else commit_delay_us after its first deferred batch arrived. */
    uint64_t due_ns;
    int busy;                    /* the writer holds a group not yet completed */
    struct store_inbox *inboxes; /* attached bases (store_attach) */
    pthread_rwlock_t inboxes_lock;
    /* written by the writer, read by /metrics */
    atomic_uint_fast64_t n_tx, n_ok, n_failed, n_delayed, n_spun;
    struct hist tx_time;          /* the writer's: store_transaction */
    atomic_int_fast64_t expected; /* store_expect */
    int stopping;
    int64_t next_purge_ms;
    int upkeep; /* the backend's settle has more to do (the writer thread's alone) */
};

/* ---- completions ---- */

static void store_report(struct store_batch *b)
{
    if (b->cb != NULL)
        b->cb(b->arg, b->ok);
    store_batch_free(b);
}

static void store_done_trampoline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    store_report(arg);
}

/* Queue b on its base's inbox; the first completion of a list wakes the base, after the
 * inbox's lock is released (so the woken loop never waits for it). */
static void store_inbox_put(struct store_inbox *in, struct store_batch *b)
{
    static const uint64_t one = 1;
    b->next = NULL;
    pthread_mutex_lock(&in->mu);
    int was_empty = in->head == NULL && !in->spinning;
    if (in->tail != NULL)
        in->tail->next = b;
    else
        in->head = b;
    in->tail = b;
    pthread_mutex_unlock(&in->mu);
    if (was_empty && write(in->efd, &one, sizeof(one)) != sizeof(one) && errno != EAGAIN)
        log_fatal("store: writing a completion eventfd: %s", strerror(errno)); /* only when full */
}

/* On the base's thread: run every completion queued so far, in order. */
static void store_inbox_run(struct store_inbox *in)
{
    pthread_mutex_lock(&in->mu);
    struct store_batch *b = in->head;
    in->head = in->tail = NULL;
    pthread_mutex_unlock(&in->mu);
    while (b != NULL) {
        struct store_batch *next = b->next;
        store_report(b);
        atomic_fetch_sub_explicit(&in->pending, 1, memory_order_relaxed);
        b = next;
    }
}

static void store_inbox_cb(evutil_socket_t fd, short what, void *arg)
{
    struct store_inbox *in = arg;
    uint64_t n;
    (void)what;
    if ((!in->edge || ++in->wakes % 65536 == 0) && read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
        log_warn("store: reading a completion eventfd: %s", strerror(errno));
    store_inbox_run(in);
}

/* On the base's thread, after the callback that submitted an awaited batch returned: when
 * nothing else is under way (store_inbox_arm found the batches sparse; no other reply
 * expected, no other batch of this base's waiting for the writer, no other event ready on
 * the loop), wait here for the completion, yielding the CPU (to the writer, where they share
 * one), up to commit_spin_us; then run what came. Whatever comes after the wait ends wakes
 * the loop through efd: the writer writes efd unless it saw spinning set, and spinning is
 * cleared under the same lock the list is read under, so a completion is either taken here
 * or signalled. */
static void store_inbox_spin(evutil_socket_t fd, short what, void *arg)
{
    struct store_inbox *in = arg;
    struct store *st = in->st;
    (void)fd;
    (void)what;
    if (!atomic_load_explicit(&in->sparse, memory_order_relaxed) ||
        atomic_load_explicit(&st->expected, memory_order_relaxed) > 0 ||
        atomic_load_explicit(&in->pending, memory_order_relaxed) != 1 ||
        event_base_get_num_events(in->base, EVENT_BASE_COUNT_ACTIVE) > 0)
        return;
    uint64_t end = util_now_ns() + (uint64_t)st->opts.commit_spin_us * 1000u;
    pthread_mutex_lock(&in->mu);
    in->spinning = 1;
    while (in->head == NULL && util_now_ns() < end) {
        pthread_mutex_unlock(&in->mu);
        sched_yield();
        pthread_mutex_lock(&in->mu);
    }
    in->spinning = 0;
    int got = in->head != NULL;
    pthread_mutex_unlock(&in->mu);
    if (got)
        atomic_fetch_add_explicit(&st->n_spun, 1, memory_order_relaxed);
    store_inbox_run(in);
}

/* After an awaited batch was queued for in's base (from any thread): its wait, if submits come
 * far enough apart that the worker is not busy with others (under load they come closer
 * than the wait could last, and a worker waiting there would leave the requests already in
 * its sockets unread). */
static void store_inbox_arm(struct store *st, struct store_inbox *in)
{
    uint64_t now = util_now_ns();
    uint64_t before = atomic_exchange_explicit(&in->last_ns, now, memory_order_relaxed);
    int sparse = now - before >= (uint64_t)st->opts.commit_spin_us * 2000u;
    atomic_store_explicit(&in->sparse, sparse, memory_order_relaxed);
    if (sparse)
        event_active(in->spin_ev, 0, 0);
}

/* Hand the result to the submitter's thread: through its base's inbox when attached, else
 * event_base_once (which writes the base's wake-up while holding the base's lock, so the
 * woken loop often waited for that lock); or run it here when it gave no base.
 * event_base_once fails only without memory. */
static void store_complete(struct store_batch *b)
{
    static const struct timeval now = {0, 0};
    if (b->on_writer != NULL)
        b->on_writer(b->on_writer_arg, b->ok);
    if (b->cb == NULL || b->base == NULL)
        store_report(b);
    else if (b->inbox != NULL)
        store_inbox_put(b->inbox, b);
    else if (event_base_once(b->base, -1, EV_TIMEOUT, store_done_trampoline, b, &now) != 0)
        log_fatal("store: cannot hand a completion to its thread (event_base_once)");
}

static struct store_inbox *store_inbox_of(struct store *st, struct event_base *base)
{
    struct store_inbox *in;
    pthread_rwlock_rdlock(&st->inboxes_lock);
    for (in = st->inboxes; in != NULL && in->base != base; in = in->next)
        ;
    pthread_rwlock_unlock(&st->inboxes_lock);
    return in;
}

int store_attach(struct store *st, struct event_base *base)
{
    struct store_inbox *in = xcalloc(1, sizeof(*in));
    in->base = base;
    in->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    in->edge = (event_base_get_features(base) & EV_FEATURE_ET) != 0;
    short kind = (short)(EV_READ | EV_PERSIST | (in->edge ? EV_ET : 0));
    in->ev = in->efd >= 0 ? event_new(base, in->efd, kind, store_inbox_cb, in) : NULL;
    if (in->ev == NULL || event_add(in->ev, NULL) != 0) {
        if (in->ev != NULL)
            event_free(in->ev);
        if (in->efd >= 0)
            close(in->efd);
        free(in);
        return -1;
    }
    pthread_mutex_init(&in->mu, NULL);
    in->st = st;
    in->spin_ev = event_new(base, -1, 0, store_inbox_spin, in);
    if (in->spin_ev == NULL) /* a user event: only memory can be missing */
        log_fatal("store: out of memory (event_new)");
    pthread_rwlock_wrlock(&st->inboxes_lock);
    in->next = st->inboxes;
    st->inboxes = in;
    pthread_rwlock_unlock(&st->inboxes_lock);
    return 0;
}

void store_detach(struct store *st, struct event_base *base)
{
    struct store_inbox **pp, *in = NULL;
    store_drain(st); /* no completion may still be on its way to the inbox */
    pthread_rwlock_wrlock(&st->inboxes_lock);
    for (pp = &st->inboxes; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == base) {
            in = *pp;
            *pp = in->next;
            break;
        }
    }
    pthread_rwlock_unlock(&st->inboxes_lock);
    if (in == NULL)
        return;
    store_inbox_run(in); /* anything its loop did not run (the caller drained first) */
    event_free(in->spin_ev);
    event_free(in->ev);
    close(in->efd);
    pthread_mutex_destroy(&in->mu);
    free(in);
}

/* ---- the writer ---- */

/* One transaction of the backend's over list, timed, and counted when it committed. */
static int store_transaction(struct store *st, struct store_batch *list)
{
    uint64_t t0 = util_now_us();
    int rc = st->be->transaction(st->db, list);
    hist_observe(&st->tx_time, util_now_us() - t0);
    if (rc != 0)
        return -1;
    atomic_fetch_add_explicit(&st->n_tx, 1, memory_order_relaxed);
    return 0;
}

/* After a group's transaction failed: each batch in a transaction of its own. */
static void store_one_by_one(struct store *st, struct store_batch *list)
{
    for (struct store_batch *b = list; b != NULL;) {
        struct store_batch *next = b->next;
        b->next = NULL;
        b->ok = store_transaction(st, b) == 0;
        b->next = next;
        b = next;
    }
}

/* Commit a group of batches in one transaction, then report each. When it fails, each batch
 * runs again alone: the one that failed fails alone and the others still land. */
static void store_commit_group(struct store *st, struct store_batch *list)
{
    if (st->be->shared && list->next != NULL) /* store_batch.h says why */
        list = store_batch_order(list);
    if (store_transaction(st, list) != 0) {
        if (list->next == NULL)
            list->ok = 0; /* alone: it may have failed only at the commit */
        else
            store_one_by_one(st, list);
    }
    for (struct store_batch *b = list; b != NULL; b = b->next)
        atomic_fetch_add_explicit(b->ok ? &st->n_ok : &st->n_failed, 1, memory_order_relaxed);
    while (list != NULL) {
        struct store_batch *next = list->next;
        store_complete(list);
        list = next;
    }
    st->upkeep = st->be->settle(st->db);
}

/* Sleep until work is queued or due, a stop is asked for, or the next purge is due (st->mu
 * held on entry and on return). A post that comes after a timeout wakes the next wait at
 * once: the caller's loop checks again and sleeps again. */
static void store_wait(struct store *st)
{
    uint64_t until = 0; /* CLOCK_MONOTONIC ns; 0: no timeout */
    if (st->head != NULL) {
        until = st->due_ns;
    } else if (st->opts.retention_ms > 0) {
        int64_t ms = st->next_purge_ms - util_wall_ms();
        until = util_now_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000u;
    }
    struct timespec ts = util_timespec(until);
    st->sleeping = 1;
    pthread_mutex_unlock(&st->mu);
    while ((until ? sem_clockwait(&st->wake, CLOCK_MONOTONIC, &ts) : sem_wait(&st->wake)) != 0 &&
           errno == EINTR)
        ;
    pthread_mutex_lock(&st->mu);
    st->sleeping = 0;
}

/* Under st->mu: whether the writer has work now (a stop, a queue that is due, a purge). */
static int store_writer_due(struct store *st)
{
    if (st->stopping)
        return 1;
    if (st->head != NULL)
        return st->due_ns == 0 || util_now_ns() >= st->due_ns;
    if (st->upkeep)
        return 1;
    return st->opts.retention_ms > 0 && util_wall_ms() >= st->next_purge_ms;
}

/* Under st->mu, with a group queued: hold it until commit_delay_us after the first batch in
 * it that someone waits for (a reply whose response ends at the commit), when other replies
 * are on their way (store_expect) and that batch came less than commit_delay_us after the
 * awaited one before it: replies ending that close together, more will share the commit.
 * PostgreSQL's commit_delay, with commit_siblings.
 *
 * What the wait buys: a transaction costs the writer the same (its locks, its WAL writes, a
 * sleep and a wake-up, a report to each worker) however many batches it holds, and while the
 * writer sleeps here the workers submit without waking it. Who is never held: one client at
 * a time, however fast (nothing else is on its way), and slow streams (a real model's
 * replies, seconds long), which end far apart. Only awaited batches count as arrivals: a
 * request's own turns are submitted tens of microseconds before its reply when the upstream
 * is quick, and would make one client look like load. */
static void store_gather(struct store *st)
{
    uint64_t delay_ns = (uint64_t)st->opts.commit_delay_us * 1000u;
    if (delay_ns == 0 || st->stopping || st->wait_ns == 0 || st->wait_gap_ns >= delay_ns ||
        atomic_load_explicit(&st->expected, memory_order_relaxed) <= 0)
        return;
    uint64_t until = st->wait_ns + delay_ns;
    if (until <= util_now_ns())
        return;
    struct timespec ts = util_timespec(until);
    atomic_fetch_add_explicit(&st->n_delayed, 1, memory_order_relaxed);
    pthread_mutex_unlock(&st->mu);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
    pthread_mutex_lock(&st->mu);
}

/* Under st->mu: whether the caller must post st->wake (after unlocking). */
static int store_wake_needed(struct store *st)
{
    int sleeping = st->sleeping;
    st->sleeping = 0;
    return sleeping;
}

static void *store_writer(void *arg)
{
    struct store *st = arg;
    log_set_thread_name("store");
    for (;;) {
        pthread_mutex_lock(&st->mu);
        st->busy = 0;
        pthread_cond_broadcast(&st->idle_cv);
        while (!store_writer_due(st))
            store_wait(st);
        if (st->head != NULL)
            store_gather(st);
        struct store_batch *list = st->head;
        st->head = st->tail = NULL;
        st->wait_ns = 0;
        st->due_ns = 0;
        st->busy = list != NULL;
        int stop = st->stopping;
        pthread_mutex_unlock(&st->mu);
        if (list != NULL) {
            store_commit_group(st, list);
        } else if (stop) {
            return NULL;
        } else if (st->upkeep) { /* a settle left more: the next step of it */
            st->upkeep = st->be->settle(st->db);
        } else { /* a purge is due: one chunk, then what was queued meanwhile */
            int more = st->be->purge(st->db);
            st->upkeep = st->be->settle(st->db);
            st->next_purge_ms = util_wall_ms() + (more ? PURGE_PAUSE_MS : STORE_PURGE_EVERY_MS);
        }
    }
}

void store_counts(struct store *st, struct store_counts *out)
{
    out->transactions = atomic_load_explicit(&st->n_tx, memory_order_relaxed);
    out->ok = atomic_load_explicit(&st->n_ok, memory_order_relaxed);
    out->failed = atomic_load_explicit(&st->n_failed, memory_order_relaxed);
    out->delayed = atomic_load_explicit(&st->n_delayed, memory_order_relaxed);
    out->spun = atomic_load_explicit(&st->n_spun, memory_order_relaxed);
    memset(&out->transaction_time, 0, sizeof(out->transaction_time));
    hist_read(&st->tx_time, &out->transaction_time);
    st->be->checkpoints(st->db, &out->checkpoints, &out->checkpoints_held);
    out->wal_flushes = st->be->wal_flushes != NULL ? st->be->wal_flushes(st->db) : 0;
    out->expected = atomic_load_explicit(&st->expected, memory_order_relaxed);
}

void store_drain(struct store *st)
{
    pthread_mutex_lock(&st->mu);
    while (st->head != NULL || st->busy)
        pthread_cond_wait(&st->idle_cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
    if (st->be->settled != NULL)
        st->be->settled(st->db);
}

void store_expect(struct store *st, int delta)
{
    atomic_fetch_add_explicit(&st->expected, delta, memory_order_relaxed);
}

/* Under st->mu, b queued last: b may wait (store_batch_defer) while the writer is not due. */
static int store_defers(struct store *st, const struct store_batch *b)
{
    /* a shared backend's commit is a network round trip and a sync (~170 us against SQLite's
     * ~10): a request's turns wait for its own reply's commit even one request at a time */
    return b->deferred && b->cb == NULL && st->opts.commit_delay_us > 0 &&
           atomic_load_explicit(&st->expected, memory_order_relaxed) > (st->be->shared ? 0 : 1);
}

void store_submit(struct store *st, struct store_batch *b, struct event_base *base,
                  store_done_cb cb, void *arg)
{
    b->base = base;
    b->cb = cb;
    b->arg = arg;
    b->inbox = base != NULL && cb != NULL ? store_inbox_of(st, base) : NULL;
    int awaited = st->opts.commit_delay_us > 0 && b->inbox != NULL;
    struct store_inbox *spin = b->inbox; /* b may be freed by the writer once queued */
    if (spin != NULL)
        atomic_fetch_add_explicit(&spin->pending, 1, memory_order_relaxed);
    pthread_mutex_lock(&st->mu);
    /* read under the lock, so that arrival times follow the queue's order */
    uint64_t now = awaited ? util_now_ns() : 0;
    int first = st->head == NULL, defer = store_defers(st, b);
    if (st->tail)
        st->tail->next = b;
    else
        st->head = b;
    st->tail = b;
    if (now != 0) {
        if (st->wait_ns == 0) {
            st->wait_ns = now;
            st->wait_gap_ns = now - st->last_wait_ns;
        }
        st->last_wait_ns = now;
    }
    if (!defer)
        st->due_ns = 0;
    else if (first)
        st->due_ns = util_now_ns() + (uint64_t)st->opts.commit_delay_us * 1000u;
    st->busy = 1;
    /* a deferred batch behind others wakes nobody: the writer is due already or sleeps
     * until an earlier deadline; the first one wakes it to set its timer */
    int wake = (!defer || first) && store_wake_needed(st);
    pthread_mutex_unlock(&st->mu);
    /* after the unlock: a writer woken while the lock is still held would only go back to
     * sleep on the mutex, and its unlock would then cost a second wake-up */
    if (wake)
        sem_post(&st->wake);
    if (spin != NULL && st->opts.commit_spin_us > 0 && !st->be->shared)
        store_inbox_arm(st, spin);
}

/* ---- open and close ---- */

struct store *store_open(const char *path, const struct store_opts *opts, char **err)
{
    struct store *st = xcalloc(1, sizeof(*st));
    int pg = opts->url != NULL && *opts->url != '\0';
    st->be = pg ? &pgsql_backend : &sqlite_backend;
    st->opts = *opts;
    st->db = st->be->open(pg ? opts->url : path, opts, err);
    if (st->db == NULL) {
        free(st);
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    sem_init(&st->wake, 0, 0);
    pthread_rwlock_init(&st->inboxes_lock, NULL);
    pthread_cond_init(&st->idle_cv, NULL);
    st->next_purge_ms = util_wall_ms(); /* a first purge at start */
    if (util_thread_start(&st->thread, store_writer, st) != 0)
        log_fatal("store: cannot start the writer thread");
    return st;
}

void store_close(struct store *st)
{
    if (st == NULL)
        return;
    pthread_mutex_lock(&st->mu);
    st->stopping = 1;
    int wake = store_wake_needed(st);
    pthread_mutex_unlock(&st->mu);
    if (wake)
        sem_post(&st->wake);
    pthread_join(st->thread, NULL);
    st->be->close(st->db);
    pthread_mutex_destroy(&st->mu);
    sem_destroy(&st->wake);
    if (st->inboxes != NULL) /* a caller's bug; its base may be gone: leave the inbox be */
        log_error("store: closed with an event base still attached");
    pthread_rwlock_destroy(&st->inboxes_lock);
    pthread_cond_destroy(&st->idle_cv);
    free(st);
}

/* ---- reads: the backend's ---- */

struct store_reader *store_reader_open(struct store *st, char **err)
{
    return st->be->reader_open(st->db, err);
}

int store_reader_failed(const struct store_reader *r)
{
    return r->failed;
}

struct store_async {
    const struct store_backend *be;
    void *a;
};

struct store_async *store_async_open(struct store *st, struct event_base *base)
{
    if (st->be->async_open == NULL)
        return NULL;
    struct store_async *a = xcalloc(1, sizeof(*a));
    a->be = st->be;
    a->a = st->be->async_open(st->db, base);
    return a;
}

void store_async_close(struct store_async *a)
{
    if (a == NULL)
        return;
    a->be->async_close(a->a);
    free(a);
}

void store_async_version(struct store_async *a, const char *tenant, const char *session_id,
                         store_version_cb cb, void *arg)
{
    a->be->async_version(a->a, tenant, session_id, cb, arg);
}

void store_async_load(struct store_async *a, const char *tenant, const char *session_id,
                      const char *user_id, size_t turns, size_t max_facts, store_loaded_cb cb,
                      void *arg)
{
    a->be->async_load(a->a, tenant, session_id, user_id, turns, max_facts, cb, arg);
}

int store_shared(const struct store *st)
{
    return st->be->shared;
}

int64_t store_session_version(struct store_reader *r, const char *tenant, const char *session_id)
{
    return r->be->session_version ? r->be->session_version(r, tenant, session_id) : 0;
}

void store_reader_clear(struct store_reader *r)
{
    r->failed = 0;
}

const char *store_backend_name(const struct store *st)
{
    return st->be->name;
}

void store_reader_close(struct store_reader *r)
{
    if (r != NULL)
        r->be->reader_close(r);
}

json_t *store_session_get(struct store_reader *r, const char *tenant, const char *session_id)
{
    return r->be->session_get(r, tenant, session_id);
}

json_t *store_turns(struct store_reader *r, const char *tenant, const char *session_id,
                    int64_t min_turn, size_t limit)
{
    return r->be->turns(r, tenant, session_id, min_turn, limit);
}

json_t *store_turns_of(struct store_reader *r, const char *tenant, const char *session_id,
                       const int64_t *turn_ids, size_t n, size_t limit)
{
    return r->be->turns_of(r, tenant, session_id, turn_ids, n, limit);
}

json_t *store_sessions(struct store_reader *r, const char *tenant, const char *user_id,
                       const char *status, int64_t before, size_t limit)
{
    return r->be->sessions(r, tenant, user_id, status, before, limit);
}

json_t *store_user_memory(struct store_reader *r, const char *tenant, const char *user_id,
                          size_t max_facts)
{
    return r->be->user_memory(r, tenant, user_id, max_facts);
}

json_t *store_deliveries(struct store_reader *r, const struct store_delivery_query *q)
{
    return r->be->deliveries(r, q);
}

json_t *store_outbox_due(struct store_reader *r, int64_t now_ms, size_t limit)
{
    return r->be->outbox_due(r, now_ms, limit);
}

int64_t store_outbox_next(struct store_reader *r)
{
    return r->be->outbox_next(r);
}

json_t *store_to_summarize(struct store_reader *r, int64_t now_ms, size_t limit)
{
    return r->be->to_summarize(r, now_ms, limit);
}

int64_t store_summary_next(struct store_reader *r)
{
    return r->be->summary_next(r);
}

json_t *store_running_to_summarize(struct store_reader *r, const char *profile, long threshold,
                                   size_t limit)
{
    return r->be->running_to_summarize(r, profile, threshold, limit);
}

json_t *store_cache_get(struct store_reader *r, const char *key, int64_t now_ms)
{
    return r->be->cache_get(r, key, now_ms);
}

json_t *store_to_embed(struct store_reader *r, int64_t now_ms, size_t limit)
{
    return r->be->to_embed(r, now_ms, limit);
}

int64_t store_embed_next(struct store_reader *r)
{
    return r->be->embed_next(r);
}

int store_recall_embedded(struct store_reader *r, const char *tenant, const char *user_id,
                          const char *session_id)
{
    return r->be->recall_embedded(r, tenant, user_id, session_id);
}

void store_recall(struct store_reader *r, const char *tenant, const char *user_id,
                  const char *session_id, size_t limit, struct recall_pick *p)
{
    r->be->recall(r, tenant, user_id, session_id, limit, p);
}

json_t *store_idle_sessions(struct store_reader *r, int64_t before_ms, size_t limit)
{
    return r->be->idle_sessions(r, before_ms, limit);
}
