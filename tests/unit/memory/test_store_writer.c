/* Unit tests: the SQLite store's writer thread (memory/store.c): group commit, a failed batch
 * among others, completions on the writer or on a base, the commit delay under load, the wait
 * for a commit without sleeping, deferred turns, the WAL checkpoint after a report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/sqlite_ckpt.h"
#include "memory/store.h"
#include "storetest.h"

#include <event2/thread.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Many batches submitted at once are committed (in groups) and each is reported once. */
static void test_group_commit(void **state)
{
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    struct storetest_waiter w = {.want = 200, .base = event_base_new()};
    for (int i = 0; i < 200; i++) {
        char id[32];
        snprintf(id, sizeof(id), "s%d", i % 20);
        struct store_batch *b = store_batch_new("t", id);
        json_t *t = storetest_turn("user", "hi", i / 20 + 1, 0, i / 20 + 1);
        store_batch_insert(b, t);
        json_decref(t);
        store_submit(st, b, w.base, storetest_done, &w);
    }
    event_base_loop(w.base, EVLOOP_NO_EXIT_ON_EMPTY); /* until on_done breaks it */
    assert_int_equal(w.done, 200);
    assert_int_equal(w.ok, 200);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *turns = store_turns(r, "t", "s7", 0, 0);
    assert_int_equal(json_array_size(turns), 10);
    for (size_t i = 0; i < 10; i++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(turns, i), "seq")),
                         (json_int_t)i + 1);
    json_decref(turns);
    store_reader_close(r);
    event_base_free(w.base);
    store_close(st);
    unlink(path);
    free(path);
}

static void on_outcome(void *arg, int ok)
{
    int *slot = arg;
    *slot = ok;
}

/* Holds the writer (a batch's on_writer callback runs on it) until the test opens the gate,
 * so that the batches submitted meanwhile are committed as one group. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
};

static void gate_wait(void *arg, int ok)
{
    struct gate *g = arg;
    (void)ok;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* A batch that fails (here: a turn without a role) leaves nothing behind, grouped with others
 * (the first three share one transaction: the writer is held until all are queued) or alone,
 * and the others are committed. */
static void test_failed_batch(void **state)
{
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int ok[4] = {-1, -1, -1, -1};
    const char *ids[] = {"good1", "bad", "good2", "bad-alone"};
    struct store_batch *hold = store_batch_new("t", "gate");
    store_batch_session(hold, NULL, NULL);
    store_batch_on_writer(hold, gate_wait, &g);
    store_submit(st, hold, NULL, NULL, NULL);
    for (int i = 0; i < 4; i++) {
        if (i == 3) {
            gate_open(&g);
            store_drain(st); /* the last one is surely alone in its transaction */
        }
        struct store_batch *b = store_batch_new("t", ids[i]);
        json_t *t = storetest_turn("user", "hi", 1, 0, 1);
        if (strncmp(ids[i], "bad", 3) == 0)
            json_object_del(t, "role");
        store_batch_insert(b, t);
        json_decref(t);
        store_submit(st, b, NULL, on_outcome, &ok[i]);
    }
    store_drain(st);
    assert_int_equal(ok[0], 1);
    assert_int_equal(ok[1], 0);
    assert_int_equal(ok[2], 1);
    assert_int_equal(ok[3], 0);
    struct store_reader *r = store_reader_open(st, &err);
    for (int i = 0; i < 4; i++) {
        json_t *sess = store_session_get(r, "t", ids[i]);
        assert_true((sess != NULL) == (ok[i] == 1));
        json_decref(sess);
        json_t *turns = store_turns(r, "t", ids[i], INT64_MIN, 0);
        assert_int_equal(json_array_size(turns), ok[i] == 1 ? 1 : 0);
        json_decref(turns);
    }
    struct store_counts n;
    store_counts(st, &n);
    assert_int_equal(n.ok, 3); /* the gate, good1, good2 */
    assert_int_equal(n.failed, 2);
    /* every transaction is timed, the failed ones too: at least bad's (in its group, or
     * alone) and bad-alone's failed, whichever batches the writer found queued together */
    assert_true(n.transactions >= 2);
    assert_true(n.transaction_time.count >= n.transactions + 2);
    uint64_t in_buckets = 0;
    for (size_t i = 0; i < HIST_NBUCKETS; i++)
        in_buckets += n.transaction_time.buckets[i];
    assert_int_equal(in_buckets, n.transaction_time.count);
    assert_true(n.transaction_time.sum_us > 0);
    store_reader_close(r);
    store_close(st);
    unlink(path);
    free(path);
}

static void on_writer(void *arg, int ok)
{
    int *seen = arg;
    *seen = ok ? 1 : -1;
}

/* Without a base the completion runs on the writer; store_drain() waits for it. */
static void test_drain_and_writer_callback(void **state)
{
    char *path = storetest_path();
    struct store *st = storetest_open(path);
    int seen = 0;
    struct store_batch *b = store_batch_new("t", "s");
    json_t *t = storetest_turn("user", "hello", 1, 0, 1);
    store_batch_insert(b, t);
    json_decref(t);
    store_submit(st, b, NULL, on_writer, &seen);
    store_drain(st);
    assert_int_equal(seen, 1);
    store_close(st);
    unlink(path);
    free(path);
}

struct order {
    pthread_t main;
    int step, hook_step, hook_ok, hook_on_main, done_step, done_ok, done_on_main;
    struct event_base *base;
};

static void order_hook(void *arg, int ok)
{
    struct order *o = arg;
    o->hook_step = ++o->step;
    o->hook_ok = ok;
    o->hook_on_main = pthread_equal(pthread_self(), o->main);
}

static void order_done(void *arg, int ok)
{
    struct order *o = arg;
    o->done_step = ++o->step;
    o->done_ok = ok;
    o->done_on_main = pthread_equal(pthread_self(), o->main);
    event_base_loopbreak(o->base);
}

/* The writer-side hook runs on the writer as soon as the transaction is over, the report
 * after it on the submitter's loop; both see the outcome, a failure too. */
static void test_writer_hook_then_report(void **state)
{
    char *path = storetest_path();
    struct store *st = storetest_open(path);
    for (int bad = 0; bad <= 1; bad++) {
        struct order o = {.main = pthread_self(), .base = event_base_new()};
        struct store_batch *b = store_batch_new("t", bad ? "s-bad" : "s");
        json_t *t = storetest_turn("user", "hello", 1, 0, 1);
        if (bad)
            json_object_del(t, "role");
        store_batch_insert(b, t);
        json_decref(t);
        store_batch_on_writer(b, order_hook, &o);
        store_submit(st, b, o.base, order_done, &o);
        event_base_loop(o.base, EVLOOP_NO_EXIT_ON_EMPTY);
        event_base_free(o.base);
        assert_int_equal(o.hook_step, 1);
        assert_int_equal(o.done_step, 2);
        assert_int_equal(o.hook_ok, !bad);
        assert_int_equal(o.done_ok, !bad);
        assert_false(o.hook_on_main);
        assert_true(o.done_on_main);
    }
    store_close(st);
    unlink(path);
    free(path);
}

/* An attached base gets its completions through its inbox, in the order committed; one still
 * queued when the base is detached runs at the detach. */
static int order[8], norder;

static void on_ordered(void *arg, int ok)
{
    order[norder++] = (int)(intptr_t)arg * (ok ? 1 : -1);
}

static void test_attached_base(void **state)
{
    char *path = storetest_path();
    struct store *st = storetest_open(path);
    struct event_base *base = event_base_new();
    assert_int_equal(store_attach(st, base), 0);
    norder = 0;
    for (int i = 1; i <= 5; i++) {
        struct store_batch *b = store_batch_new("t", "call-1");
        json_t *t = storetest_turn("user", "hi", i, 0, i);
        store_batch_insert(b, t);
        json_decref(t);
        store_submit(st, b, base, on_ordered, (void *)(intptr_t)i);
    }
    store_drain(st); /* all five handed over, none run: the base's loop has not turned */
    assert_int_equal(norder, 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(norder, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(order[i], i + 1);

    struct store_batch *b = store_batch_new("t", "call-1");
    store_batch_session(b, "1002", NULL);
    store_submit(st, b, base, on_ordered, (void *)(intptr_t)6);
    store_detach(st, base); /* drains, then runs what the loop did not */
    assert_int_equal(norder, 6);
    assert_int_equal(order[5], 6);
    event_base_free(base);
    store_close(st);
    unlink(path);
    free(path);
}

/* An awaited batch (one with a completion on a base) that comes soon after the previous one,
 * while a reply is on its way, is held for commit_delay_us, and what arrives meanwhile shares
 * its transaction; with nothing on its way the commit is not held. */
static void submit_reply(struct store *st, struct event_base *base, int i)
{
    struct store_batch *b = store_batch_new("t", "busy");
    json_t *t = storetest_turn("assistant", "ok", i, 0, i);
    store_batch_insert(b, t);
    json_decref(t);
    store_submit(st, b, base, on_ordered, (void *)(intptr_t)i);
}

static struct store_counts counts_of(struct store *st)
{
    struct store_counts c;
    store_counts(st, &c);
    return c;
}

static void test_commit_delay(void **state)
{
    (void)state;
    char *path = storetest_path();
    struct store *st = storetest_open_delayed(path, 100000);
    struct event_base *base = event_base_new();
    assert_int_equal(store_attach(st, base), 0);
    norder = 0;
    submit_reply(st, base, 1); /* the first: no batch came just before it */
    store_drain(st);
    assert_int_equal(counts_of(st).transactions, 1);
    assert_int_equal(counts_of(st).delayed, 0);

    store_expect(st, 1); /* another reply on its way */
    submit_reply(st, base, 2);
    for (int i = 0; i < 2000 && counts_of(st).delayed == 0; i++)
        usleep(1000);
    assert_int_equal(counts_of(st).delayed, 1); /* the writer holds 2 for 100 ms */
    store_expect(st, -1);
    submit_reply(st, base, 3);
    store_drain(st);
    assert_int_equal(counts_of(st).transactions, 2); /* 2 and 3 together */

    submit_reply(st, base, 4); /* nothing on its way: committed at once */
    store_drain(st);
    struct store_counts c = counts_of(st);
    assert_int_equal(c.transactions, 3);
    assert_int_equal(c.delayed, 1);
    assert_int_equal(c.ok, 4);
    store_detach(st, base);
    assert_int_equal(norder, 4);
    event_base_free(base);
    store_close(st);
    unlink(path);
    free(path);
}

/* storage.commit_spin_us: one request at a time, the loop that submitted an awaited batch
 * waits for its completion without sleeping. The writer is held (a batch before it whose
 * completion runs on the writer waits for a gate a thread opens 100 ms later), so a loop that
 * turned once without waiting would return before the completion exists. While another reply
 * is expected the loop does not wait, and the completion comes through its wake-up. */
static void *open_later(void *arg)
{
    usleep(100000);
    gate_open(arg);
    return NULL;
}

/* A store whose loops wait up to spin_us for their commits, with base attached. */
static struct store *open_spinning(const char *path, int64_t spin_us, struct event_base *base)
{
    struct store *st = storetest_open_with(path, (struct store_opts){.commit_spin_us = spin_us});
    assert_int_equal(store_attach(st, base), 0);
    return st;
}

static void test_commit_spin(void **state)
{
    (void)state;
    char *path = storetest_path();
    /* long enough for any writer (the wait ends when the completion arrives) */
    struct event_base *base = event_base_new();
    struct store *st = open_spinning(path, 10000000, base);
    struct gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    struct store_batch *held = store_batch_new("t", "held");
    store_batch_session(held, "1002", NULL);
    store_submit(st, held, NULL, gate_wait, &g); /* runs on the writer, holding it */
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_later, &g), 0);
    norder = 0;
    submit_reply(st, base, 1);
    event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    assert_int_equal(norder, 1);
    pthread_join(opener, NULL);

    uint64_t spun = counts_of(st).spun;
    store_expect(st, 1); /* another reply on its way: nobody waits */
    submit_reply(st, base, 2);
    while (norder < 2)
        event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(counts_of(st).spun, spun);
    store_expect(st, -1);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 2);
    store_detach(st, base);
    event_base_free(base);
    store_close(st);
    unlink(path);
    free(path);
}

static void on_expired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(int *)arg = 1;
}

/* A wait too short for the commit: each completion still reaches its loop, taken by the
 * wait or through the wake-up (the writer writes the loop's eventfd unless it saw the wait
 * under way, and the wait ends under the same lock). A lost one would leave the loop asleep:
 * the loop gives up after 10 s. */
static void test_commit_spin_too_short(void **state)
{
    (void)state;
    char *path = storetest_path();
    struct event_base *base = event_base_new();
    struct store *st = open_spinning(path, 1, base);
    struct storetest_waiter w = {.want = 0, .base = base}; /* counts; never breaks the loop */
    int expired = 0;
    struct timeval limit = {10, 0};
    struct event *guard = evtimer_new(base, on_expired, &expired);
    for (int i = 1; i <= 300; i++) {
        struct store_batch *b = store_batch_new("t", "short");
        json_t *t = storetest_turn("user", "hi", i, 0, i);
        store_batch_insert(b, t);
        json_decref(t);
        store_submit(st, b, base, storetest_done, &w);
        evtimer_add(guard, &limit);
        while (w.done < i && !expired)
            event_base_loop(base, EVLOOP_ONCE);
        assert_int_equal(w.done, i);
        evtimer_del(guard);
    }
    event_free(guard);
    store_detach(st, base);
    event_base_free(base);
    store_close(st);
    unlink(path);
    free(path);
}

/* A request's own turns (a deferred batch) under load wait for the next batch that wakes the
 * writer and share its transaction, or commit_delay_us at most; one request at a time, or
 * at a stop, they are committed at once. */
static void submit_turn(struct store *st, const char *role, int seq, int deferred)
{
    struct store_batch *b = store_batch_new("t", "call");
    json_t *t = storetest_turn(role, "hello", (seq + 1) / 2, 0, seq);
    store_batch_insert(b, t);
    json_decref(t);
    if (deferred)
        store_batch_defer(b);
    store_submit(st, b, NULL, NULL, NULL);
}

static size_t turns_in_session(const char *path, const char *session)
{
    char *err = NULL;
    struct store *st = storetest_open(path);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *turns = store_turns(r, "t", session, 0, 0);
    size_t n = json_array_size(turns);
    json_decref(turns);
    store_reader_close(r);
    store_close(st);
    return n;
}

static size_t turns_in(const char *path)
{
    return turns_in_session(path, "call");
}

static void test_deferred_turns(void **state)
{
    (void)state;
    char *path = storetest_path();
    struct store *st = storetest_open_delayed(path, 60000000);
    store_expect(st, 2); /* this request's reply and another one on their way */
    submit_turn(st, "user", 1, 1);
    usleep(50000);
    assert_int_equal(counts_of(st).transactions, 0); /* held for the reply */
    store_expect(st, -1);
    submit_turn(st, "assistant", 2, 0); /* the reply wakes the writer: one transaction */
    store_drain(st);
    assert_int_equal(counts_of(st).transactions, 1);
    assert_int_equal(counts_of(st).ok, 2);

    submit_turn(st, "user", 3, 1); /* one request at a time (expected 1): at once */
    for (int i = 0; i < 10000 && counts_of(st).transactions < 2; i++)
        usleep(1000);
    assert_int_equal(counts_of(st).transactions, 2);

    store_expect(st, 1);
    submit_turn(st, "assistant", 4, 1); /* held, then taken by the stop */
    usleep(20000);
    assert_int_equal(counts_of(st).transactions, 2);
    store_close(st);
    assert_int_equal(turns_in(path), 4);

    st = storetest_open_delayed(path,
                                20000); /* nothing else comes: committed when its wait is over */
    store_expect(st, 2);
    submit_turn(st, "user", 5, 1);
    store_drain(st);
    assert_int_equal(counts_of(st).transactions, 1);
    store_close(st);
    assert_int_equal(turns_in(path), 5);
    unlink(path);
    free(path);
}

/* The WAL's checkpoint: once a commit leaves 1,000 frames or more in the WAL, the checkpointer
 * thread copies them into the database beside the writer, after the group's completions have
 * run, not inside the COMMIT they waited for (a checkpoint syncs the disk twice). Commits with
 * a gap between them (store_drain waits for the checkpointer too) leave it time to copy every
 * frame: the writer never runs one itself, and the WAL starts over from its start. */
struct ckpt_seen {
    struct store *st;
    uint64_t at_report; /* checkpoints counted when the completion ran */
    atomic_int done;
};

static void ckpt_report(void *arg, int ok)
{
    struct ckpt_seen *s = arg;
    (void)ok;
    s->at_report = counts_of(s->st).checkpoints;
    atomic_store(&s->done, 1);
}

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* Submit a turn of text (a row of its own on each page: ~3 frames a commit) as commit i. */
static void ckpt_submit(struct store *st, const char *text, int i, struct ckpt_seen *s)
{
    struct store_batch *b = store_batch_new("t", "long");
    json_t *t = storetest_turn(i % 2 ? "user" : "assistant", text, (i + 1) / 2, 0, i);
    store_batch_insert(b, t);
    json_decref(t);
    store_submit(st, b, NULL, ckpt_report, s); /* reported on the writer */
}

static void test_checkpoint_after_report(void **state)
{
    (void)state;
    char *path = storetest_path(), *wal = xasprintf("%s-wal", path), text[3000];
    struct store *st = storetest_open(path);
    memset(text, 'x', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    int after_report = 0, ok = 0;
    off_t db0 = 0;
    for (int i = 1; i <= 1500; i++) {
        struct ckpt_seen s = {.st = st};
        ckpt_submit(st, text, i, &s);
        store_drain(st); /* the group, and the checkpoint it set off, done */
        if (i == 1)
            db0 = file_size(path);
        after_report += counts_of(st).checkpoints > s.at_report;
    }
    struct store_counts c = counts_of(st);
    ok = (int)c.ok;
    assert_int_equal(ok, 1500);
    assert_true(c.checkpoints >= 3);                  /* ~4,500 frames written */
    assert_int_equal(after_report, c.checkpoints);    /* each after its group's report */
    assert_int_equal(c.checkpoints_held, 0);          /* none held a commit */
    assert_true(file_size(path) > db0 + 1000 * 4096); /* the pages are in the database */
    assert_true(file_size(wal) < 1100 * (4096 + 24)); /* and the WAL started over */
    store_close(st);
    assert_int_equal(turns_in_session(path, "long"), 1500);
    unlink(path);
    free(wal);
    free(path);
}

/* Commits back to back, each waited for but not the checkpointer: whether or not it keeps up,
 * the WAL stays within the writer's hard bound (twice SQLITE_CKPT_FRAMES_MAX frames, give or
 * take a group's) and every turn is stored. */
static void test_checkpoint_bounded(void **state)
{
    (void)state;
    char *path = storetest_path(), *wal = xasprintf("%s-wal", path), text[3000];
    struct store *st = storetest_open(path);
    memset(text, 'x', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    for (int i = 1; i <= 4000; i++) {
        struct ckpt_seen s = {.st = st};
        ckpt_submit(st, text, i, &s);
        while (!atomic_load(&s.done))
            sched_yield();
    }
    store_drain(st);
    struct store_counts c = counts_of(st);
    assert_int_equal((int)c.ok, 4000);
    assert_true(c.checkpoints + c.checkpoints_held >= 2); /* ~12,000 frames written */
    assert_true(file_size(wal) < (2 * SQLITE_CKPT_FRAMES_MAX + 200) * (4096 + 24));
    store_close(st);
    assert_int_equal(turns_in_session(path, "long"), 4000);
    unlink(path);
    free(wal);
    free(path);
}

/* A replica's group in the order of its sessions' rows (store_batch_order): sorted by tenant
 * and session, a session's batches in their order, a batch of no session where it was with
 * the batches on each side of it sorted apart. */
static void test_group_order(void **state)
{
    (void)state;
    static const char *const in[][2] = {{"u", NULL}, {"t", "b"}, {"t", "a"},
                                        {"t", "b"},  {"s", "z"}, {"t", NULL},
                                        {"t", NULL}, {"t", "c"}, {"t", "a"}};
    static const char *const want[] = {"u/-/0", "s/z/4", "t/a/2", "t/b/1", "t/b/3",
                                       "t/-/5", "t/-/6", "t/a/8", "t/c/7"};
    struct store_batch *list = NULL, **tail = &list;
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        *tail = store_batch_new(in[i][0], in[i][1]);
        (*tail)->version = (int64_t)i; /* its place before */
        tail = &(*tail)->next;
    }
    list = store_batch_order(list);
    size_t n = 0;
    for (struct store_batch *b = list, *next; b != NULL; b = next, n++) {
        char got[32];
        snprintf(got, sizeof(got), "%s/%s/%lld", b->tenant, b->session_id ? b->session_id : "-",
                 (long long)b->version);
        assert_true(n < sizeof(want) / sizeof(want[0]));
        assert_string_equal(got, want[n]);
        next = b->next;
        store_batch_free(b);
    }
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
}

int main(void)
{
    evthread_use_pthreads(); /* completions arrive from the writer thread */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_commit),
        cmocka_unit_test(test_group_order),
        cmocka_unit_test(test_drain_and_writer_callback),
        cmocka_unit_test(test_writer_hook_then_report),
        cmocka_unit_test(test_failed_batch),
        cmocka_unit_test(test_attached_base),
        cmocka_unit_test(test_commit_delay),
        cmocka_unit_test(test_commit_spin),
        cmocka_unit_test(test_commit_spin_too_short),
        cmocka_unit_test(test_deferred_turns),
        cmocka_unit_test(test_checkpoint_after_report),
        cmocka_unit_test(test_checkpoint_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
