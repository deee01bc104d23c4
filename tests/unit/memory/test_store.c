/* Unit tests: the SQLite store, its writer thread and readers (memory/store.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/store.h"

#include <event2/thread.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct waiter {
    int done, ok, want;
    struct event_base *base;
};

static void on_done(void *arg, int ok)
{
    struct waiter *w = arg;
    w->done++;
    w->ok += ok;
    if (w->done == w->want)
        event_base_loopbreak(w->base);
}

static char *tmp_db(void)
{
    char *dir = xstrdup("/tmp/memproxy-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char *path = xasprintf("%s/test.db", dir);
    free(dir);
    return path;
}

/* A store with o's options (and a 5 s busy timeout); fails the test when it does not open. */
static struct store *open_with(const char *path, struct store_opts o)
{
    char *err = NULL;
    o.busy_timeout_ms = 5000;
    struct store *st = store_open(path, &o, &err);
    if (st == NULL)
        fail_msg("%s", err);
    return st;
}

static struct store *open_opts(const char *path, int64_t retention_ms)
{
    return open_with(path, (struct store_opts){.retention_ms = retention_ms});
}

/* A store whose writer waits up to commit_delay_us for more batches under load. */
static struct store *open_delayed(const char *path, int64_t commit_delay_us)
{
    return open_with(path, (struct store_opts){.commit_delay_us = commit_delay_us});
}

static struct store *open_ok(const char *path)
{
    return open_opts(path, 0);
}

static json_t *turn(const char *role, const char *content, int turn_id, int idx, int seq)
{
    return json_pack("{s:i, s:s, s:s, s:i, s:i, s:s, s:b, s:n, s:n, s:{s:s}, s:I, s:f}", "seq", seq,
                     "role", role, "content", content, "turn_id", turn_id, "turn_idx", idx,
                     "source", "asr", "interrupted", 0, "interrupt_timestamp", "original",
                     "metadata", "user", "1002", "timestamp", (json_int_t)1763800104000,
                     "importance", 0.5);
}

/* Submit b and run the loop until it is committed. */
static int commit(struct store *st, struct store_batch *b)
{
    struct waiter w = {.want = 1, .base = event_base_new()};
    store_submit(st, b, w.base, on_done, &w);
    event_base_loop(w.base, EVLOOP_NO_EXIT_ON_EMPTY); /* until on_done breaks it */
    event_base_free(w.base);
    assert_int_equal(w.done, 1);
    return w.ok;
}

static void test_round_trip(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    struct store_batch *b = store_batch_new("acme", "room-42");
    json_t *sys = json_pack("[{s:s, s:s}]", "role", "system", "content", "Be brief.");
    json_t *u = turn("user", "Tell me a joke.", 2, 0, 1);
    json_t *a =
        json_pack("{s:i, s:s, s:s, s:i, s:i, s:s, s:b, s:I, s:s, s:{}, s:[{s:s}], s:I, s:f, "
                  "s:s, s:{s:i}, s:s, s:I, s:I}",
                  "seq", 2, "role", "assistant", "content", "A cat walks into a", "turn_id", 2,
                  "turn_idx", 0, "source", "llm", "interrupted", 1, "interrupt_timestamp",
                  (json_int_t)1763800106500, "original", "A cat walks into a library.", "metadata",
                  "tool_calls", "id", "c1", "timestamp", (json_int_t)1763800105000, "importance",
                  0.5, "model", "gpt-4o-mini", "usage", "total_tokens", 12, "finish_reason", "stop",
                  "ttft_us", (json_int_t)210000, "latency_us", (json_int_t)900000);
    store_batch_session(b, "1002", "default");
    store_batch_window(b, sys, 77);
    store_batch_insert(b, u);
    store_batch_insert(b, a);
    store_batch_insert(b, u); /* the same turn again: skipped */
    assert_int_equal(store_batch_ops(b), 5);
    assert_int_equal(commit(st, b), 1);

    struct store_reader *r = store_reader_open(st, &err);
    assert_non_null(r);
    json_t *turns = store_turns(r, "acme", "room-42", 0, 0);
    assert_int_equal(json_array_size(turns), 2);
    json_t *got = json_array_get(turns, 1);
    assert_int_equal(json_integer_value(json_object_get(got, "seq")), 2);
    if (!json_equal(got, a)) {
        char *g = json_dumps(got, JSON_SORT_KEYS), *w = json_dumps(a, JSON_SORT_KEYS);
        fail_msg("round trip changed the turn:\n got %s\nwant %s", g, w);
    }
    json_t *sess = store_session_get(r, "acme", "room-42");
    assert_string_equal(json_string_value(json_object_get(sess, "user_id")), "1002");
    assert_string_equal(json_string_value(json_object_get(sess, "status")), "RUNNING");
    assert_true(json_equal(json_object_get(sess, "system_messages"), sys));
    assert_int_equal(json_integer_value(json_object_get(sess, "window_hash")), 77);
    assert_int_equal(json_integer_value(json_object_get(sess, "turns")), 2);
    assert_null(store_session_get(r, "other-tenant", "room-42"));
    json_t *none = store_turns(r, "other-tenant", "room-42", 0, 0);
    assert_int_equal(json_array_size(none), 0);
    json_decref(none);
    json_decref(sess);
    json_decref(turns);

    /* an update: what was heard replaces the content, the original stays */
    b = store_batch_new("acme", "room-42");
    json_t *upd = json_pack("{s:i, s:s, s:s, s:b, s:I}", "seq", 2, "content", "A cat", "original",
                            "A cat walks into a library.", "interrupted", 1, "interrupt_timestamp",
                            (json_int_t)1763800106000);
    store_batch_update(b, upd);
    assert_int_equal(commit(st, b), 1);
    turns = store_turns(r, "acme", "room-42", 2, 1); /* the last one only */
    assert_int_equal(json_array_size(turns), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(turns, 0), "content")),
                        "A cat");
    json_decref(turns);
    json_decref(upd);
    json_decref(u);
    json_decref(a);
    json_decref(sys);
    store_reader_close(r);
    store_close(st);
    unlink(path);
    free(path);
}

/* Many batches submitted at once are committed (in groups) and each is reported once. */
static void test_group_commit(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    struct waiter w = {.want = 200, .base = event_base_new()};
    for (int i = 0; i < 200; i++) {
        char id[32];
        snprintf(id, sizeof(id), "s%d", i % 20);
        struct store_batch *b = store_batch_new("t", id);
        json_t *t = turn("user", "hi", i / 20 + 1, 0, i / 20 + 1);
        store_batch_insert(b, t);
        json_decref(t);
        store_submit(st, b, w.base, on_done, &w);
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

static void test_persistence_and_schema(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    struct store_batch *b = store_batch_new("t", "s");
    json_t *t = turn("user", "remember me", 1, 0, 1);
    store_batch_insert(b, t);
    json_decref(t);
    store_submit(st, b, NULL, NULL, NULL); /* nobody waits: close commits it */
    store_close(st);

    st = open_ok(path);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *turns = store_turns(r, "t", "s", 0, 0);
    assert_int_equal(json_array_size(turns), 1);
    json_decref(turns);
    store_reader_close(r);
    store_close(st);

    sqlite3 *db = NULL;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    sqlite3_close(db);
    struct store_opts o = {.busy_timeout_ms = 1000};
    assert_null(store_open(path, &o, &err));
    assert_non_null(strstr(err, "schema version 99"));
    free(err);
    unlink(path);
    free(path);
}

/* Rows written before ids had to be UTF-8 text (schema 9) read back as text after the
 * migration: the idle sweep and the summarizer read every one of them. */
static void test_migration_names_ids_that_are_not_text(void **state)
{
    (void)state;
    char *path = tmp_db(), *err = NULL;
    store_close(open_ok(path)); /* the schema as it is today */
    sqlite3 *db = NULL;
    sqlite3_open(path, &db);
    assert_int_equal(
        sqlite3_exec(db,
                     "INSERT INTO sessions (tenant, id, user_id, created_ms, updated_ms) VALUES"
                     " ('t', CAST(X'ff' AS TEXT), CAST(X'fe41' AS TEXT), 1, 1),"
                     " ('t', 'fine', 'u', 1, 1);"
                     "INSERT INTO user_summaries (tenant, user_id, summary, updated_ms) VALUES"
                     " ('t', CAST(X'fe41' AS TEXT), 'likes cats', 1);"
                     /* the columns of the later migrations go back with the version */
                     "ALTER TABLE sessions DROP COLUMN call_summary;"
                     "ALTER TABLE sessions DROP COLUMN window_turns;"
                     "DROP TABLE session_windows;"
                     "PRAGMA user_version = 9;",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);

    struct store *st = open_ok(path);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *idle = store_idle_sessions(r, 2, 10), *s;
    size_t i;
    assert_int_equal(json_array_size(idle), 2);
    json_array_foreach(idle, i, s) {
        const char *id = json_string_value(json_object_get(s, "id"));
        assert_non_null(id);
        assert_true(strcmp(id, "fine") == 0 || strncmp(id, "invalid-", 8) == 0);
    }
    json_decref(idle);
    json_t *mem = store_user_memory(r, "t", "invalid-fe41", 10);
    assert_string_equal(json_string_value(json_object_get(json_object_get(mem, "summary"), "text")),
                        "likes cats");
    json_decref(mem);
    store_reader_close(r);
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
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
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
        json_t *t = turn("user", "hi", 1, 0, 1);
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
    char *path = tmp_db();
    struct store *st = open_ok(path);
    int seen = 0;
    struct store_batch *b = store_batch_new("t", "s");
    json_t *t = turn("user", "hello", 1, 0, 1);
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
    char *path = tmp_db();
    struct store *st = open_ok(path);
    for (int bad = 0; bad <= 1; bad++) {
        struct order o = {.main = pthread_self(), .base = event_base_new()};
        struct store_batch *b = store_batch_new("t", bad ? "s-bad" : "s");
        json_t *t = turn("user", "hello", 1, 0, 1);
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

/* retention: a session idle past it is deleted with its turns at start, then a finished
 * delivery as old; a fresh session and a pending delivery stay. */
static void test_retention(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    const char *ids[] = {"old", "fresh"};
    for (int i = 0; i < 2; i++) {
        struct store_batch *b = store_batch_new("t", ids[i]);
        json_t *t = turn("user", "hi", 1, 0, 1);
        store_batch_insert(b, t);
        json_decref(t);
        assert_int_equal(commit(st, b), 1);
    }
    store_close(st);
    sqlite3 *db = NULL;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "UPDATE sessions SET updated_ms = updated_ms - 3 * 86400000 WHERE id='old'",
                 NULL, NULL, NULL);
    sqlite3_exec(db,
                 "INSERT INTO webhook_outbox(notice_id, tenant, session_id, url, event, payload, "
                 "status, next_ms, created_ms, updated_ms) VALUES "
                 "('done-old', 't', 'x', 'u', 103, '{}', 'delivered', 0, 0, 0),"
                 "('pending-old', 't', 'x', 'u', 103, '{}', 'pending', 0, 0, 0)",
                 NULL, NULL, NULL);
    sqlite3_close(db);

    st = open_opts(path, 2 * 86400000LL);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *sess = NULL;
    for (int tries = 0; tries < 1000; tries++) { /* the writer purges right after start */
        json_decref(sess);
        sess = store_session_get(r, "t", "old");
        if (sess == NULL)
            break;
        usleep(10000);
    }
    assert_null(sess);
    /* then, a step later of the same pass (memory/purge.h), the finished old delivery */
    struct store_delivery_query q = {.tenant = "t", .limit = 10};
    json_t *dl = NULL;
    for (int tries = 0; tries < 1000; tries++) {
        json_decref(dl);
        dl = store_deliveries(r, &q);
        if (json_array_size(json_object_get(dl, "deliveries")) == 1)
            break;
        usleep(10000);
    }
    assert_int_equal(json_array_size(json_object_get(dl, "deliveries")), 1);
    json_decref(dl);
    json_t *fresh = store_session_get(r, "t", "fresh");
    assert_non_null(fresh);
    json_decref(fresh);
    store_reader_close(r);
    store_close(st);

    sqlite3_open(path, &db);
    sqlite3_stmt *s = NULL;
    sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM messages", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), 1); /* the old session's turn went with it */
    sqlite3_finalize(s);
    sqlite3_prepare_v2(db, "SELECT group_concat(notice_id) FROM webhook_outbox", -1, &s, NULL);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "pending-old"); /* not sent */
    sqlite3_finalize(s);
    sqlite3_close(db);
    unlink(path);
    free(path);
}

/* Stopping queues one outbox row per hook, with the history as committed, in the same
 * transaction; a second stop, or an idle stop of a session used since, queues nothing. */
static void test_stop_fills_the_outbox(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t = turn("user", "hi", 1, 0, 1);
    store_batch_session(b, "1002", NULL);
    store_batch_insert(b, t);
    json_decref(t);
    assert_int_equal(commit(st, b), 1);

    json_t *guard = json_pack("{s:[{s:s, s:i}], s:I}", "hooks", "url", "http://h/1", "event", 103,
                              "idle_before", (json_int_t)1); /* updated after 1 ms: no stop */
    b = store_batch_new("t", "call-1");
    store_batch_existing(b);
    store_batch_stop(b, guard);
    json_decref(guard);
    assert_int_equal(commit(st, b), 1);
    struct store_reader *r = store_reader_open(st, &err);
    assert_int_equal(store_outbox_next(r), -1);

    json_t *how = json_pack("{s:[{s:s, s:i}, {s:s, s:i}]}", "hooks", "url", "http://h/1", "event",
                            103, "url", "http://h/2", "event", 102);
    for (int i = 0; i < 2; i++) {
        b = store_batch_new("t", "call-1");
        store_batch_existing(b);
        store_batch_stop(b, how);
        assert_int_equal(commit(st, b), 1);
    }
    json_decref(how);
    json_t *due = store_outbox_due(r, util_wall_ms(), 10);
    assert_int_equal(json_array_size(due), 2);
    json_t *row = json_array_get(due, 0);
    json_t *payload = json_loads(json_string_value(json_object_get(row, "payload")), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(row, "session_id")), "call-1");
    assert_string_equal(json_string_value(json_object_get(payload, "user_id")), "1002");
    assert_string_equal(json_string_value(json_object_get(payload, "status")), "STOPPED");
    json_t *c0 = json_array_get(json_object_get(payload, "contents"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "content")), "hi");
    assert_non_null(strstr(json_string_value(json_object_get(row, "notice_id")), ":103"));
    json_decref(payload);

    /* an outcome: delivered leaves the due list; a page of the tenant's deliveries */
    json_t *res = json_pack("{s:O, s:s, s:I, s:i}", "id", json_object_get(row, "id"), "status",
                            "delivered", "next_ms", (json_int_t)0, "code", 200);
    b = store_batch_new("t", NULL);
    store_batch_outbox_result(b, res);
    json_decref(res);
    assert_int_equal(commit(st, b), 1);
    json_decref(due);
    due = store_outbox_due(r, util_wall_ms(), 10);
    assert_int_equal(json_array_size(due), 1);
    json_decref(due);
    struct store_delivery_query q = {.tenant = "t", .status = "delivered", .limit = 10};
    json_t *page = store_deliveries(r, &q);
    json_t *d = json_array_get(json_object_get(page, "deliveries"), 0);
    assert_int_equal(json_integer_value(json_object_get(d, "attempts")), 1);
    assert_int_equal(json_integer_value(json_object_get(d, "last_status")), 200);
    json_decref(page);
    q.tenant = "other";
    q.status = NULL;
    page = store_deliveries(r, &q);
    assert_int_equal(json_array_size(json_object_get(page, "deliveries")), 0);
    json_decref(page);
    store_reader_close(r);
    store_close(st);
    unlink(path);
    free(path);
}

static int64_t count(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;
}

static int embed_one(struct store *st, json_t *row, const char *text, const float *vec,
                     int64_t retry_ms)
{
    struct store_batch *b = store_batch_new("", NULL);
    struct store_embedding e = {.sid = json_integer_value(json_object_get(row, "sid")),
                                .seq = json_integer_value(json_object_get(row, "seq")),
                                .model = "emb",
                                .text = text,
                                .vec = vec,
                                .dim = 2,
                                .retry_ms = retry_ms};
    store_batch_embedding(b, &e);
    return commit(st, b);
}

/* Retrieval's queue: a batch that wants embeddings queues its user and assistant turns with
 * text; an embedding is kept only for the text it was made from; a changed turn loses it and
 * waits again; a retry counts. */
/* A question embedded for its recall: the user turn reading exactly that text takes the
 * embedding at once; the reply, and a user turn reading otherwise, wait in the queue. */
static void test_known_embedding(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    float q[3] = {0.25f, 0.5f, 1.0f};
    struct store_batch *b = store_batch_new("t", "call-2");
    json_t *u = turn("user", "What is the gate code?", 1, 0, 1);
    json_t *a = turn("assistant", "It is 4417.", 1, 0, 2);
    json_t *u2 = turn("user", "what is the gate code", 2, 0, 3);
    store_batch_embed(b);
    store_batch_known_embedding(b, "embed-model", "What is the gate code?", q, 3);
    store_batch_insert(b, u);
    store_batch_insert(b, a);
    store_batch_insert(b, u2);
    assert_int_equal(commit(st, b), 1);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings WHERE seq = 1 AND "
                                 "model = 'embed-model' AND length(vec) = 12"),
                     1);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *due = store_to_embed(r, util_wall_ms(), 10);
    assert_int_equal(json_array_size(due), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(due, 0), "text")),
                        "It is 4417.");
    assert_string_equal(json_string_value(json_object_get(json_array_get(due, 1), "text")),
                        "what is the gate code");
    json_decref(due);
    json_decref(u);
    json_decref(a);
    json_decref(u2);
    store_reader_close(r);
    store_close(st);
    unlink(path);
    free(path);
}

static void test_embedding_queue(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t1 = turn("user", "my gate code is 4417", 1, 0, 1);
    json_t *t2 = turn("assistant", "Noted, and I will", 1, 0, 2);
    json_t *t3 = turn("tool", "{}", 1, 0, 3);
    json_t *t4 = turn("user", "", 2, 0, 4);
    store_batch_embed(b);
    store_batch_session(b, "1002", NULL);
    store_batch_insert(b, t1);
    store_batch_insert(b, t2);
    store_batch_insert(b, t3);
    store_batch_insert(b, t4);
    assert_int_equal(commit(st, b), 1);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *due = store_to_embed(r, util_wall_ms(), 10);
    assert_int_equal(json_array_size(due), 2); /* the tool turn and the empty one wait not */
    json_t *u = json_array_get(due, 0), *a = json_array_get(due, 1);
    assert_string_equal(json_string_value(json_object_get(u, "text")), "my gate code is 4417");
    assert_string_equal(json_string_value(json_object_get(u, "profile")), "default");
    assert_false(store_recall_embedded(r, "t", "1002", NULL));

    /* the reply came back interrupted before its embedding was stored: the late embedding of
     * the generated text is not kept, the turn waits again for its heard text */
    json_t *cut = json_pack("{s:i, s:s, s:s, s:b}", "seq", 2, "content", "Noted,", "original",
                            "Noted, and I will", "interrupted", 1);
    b = store_batch_new("t", "call-1");
    store_batch_embed(b);
    store_batch_update(b, cut);
    json_decref(cut);
    assert_int_equal(commit(st, b), 1);
    float v[2] = {1, 0};
    assert_int_equal(embed_one(st, u, "my gate code is 4417", v, 0), 1);
    assert_int_equal(embed_one(st, a, "Noted, and I will", v, 0), 1);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings"), 1);
    assert_true(store_recall_embedded(r, "t", "1002", NULL));
    assert_true(store_recall_embedded(r, "t", NULL, "call-1")); /* the session's user */
    assert_false(store_recall_embedded(r, "t", "other", NULL));
    json_decref(due);
    due = store_to_embed(r, util_wall_ms(), 10);
    assert_int_equal(json_array_size(due), 1);
    a = json_array_get(due, 0);
    assert_string_equal(json_string_value(json_object_get(a, "text")), "Noted,");

    /* a failed try: counted, not due before its time; then stored */
    assert_int_equal(embed_one(st, a, "Noted,", NULL, util_wall_ms() + 60000), 1);
    json_t *later = store_to_embed(r, util_wall_ms(), 10);
    assert_int_equal(json_array_size(later), 0);
    json_decref(later);
    assert_true(store_embed_next(r) > util_wall_ms());
    assert_int_equal(count(path, "SELECT attempts FROM embed_queue"), 1);
    assert_int_equal(embed_one(st, a, "Noted,", v, 0), 1);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings WHERE vec IS NOT NULL"), 2);
    assert_int_equal(store_embed_next(r), -1);
    json_decref(due);

    /* the turns go with their session, embeddings with them */
    b = store_batch_new("t", NULL);
    store_batch_user_erase(b, "1002");
    assert_int_equal(commit(st, b), 1);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings"), 0);
    store_reader_close(r);
    store_close(st);
    json_decref(t1);
    json_decref(t2);
    json_decref(t3);
    json_decref(t4);
    unlink(path);
    free(path);
}

/* A turn after a stop makes the session running again, also when the writer had already
 * seen it running (it remembers that, and must forget it at the stop). */
static void test_turn_after_stop_reopens(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    json_t *how = json_object();
    for (int i = 1; i <= 4; i++) {
        struct store_batch *b = store_batch_new("t", "call-1");
        json_t *t = turn(i % 2 ? "user" : "assistant", "x", (i + 1) / 2, 0, i);
        store_batch_insert(b, t);
        json_decref(t);
        assert_int_equal(commit(st, b), 1);
        if (i % 2 == 1)
            continue; /* two turns in a row while running, then a stop */
        b = store_batch_new("t", "call-1");
        store_batch_existing(b);
        store_batch_stop(b, how);
        assert_int_equal(commit(st, b), 1);
        assert_int_equal(count(path, "SELECT status = 'STOPPED' FROM sessions"), 1);
    }
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t = turn("user", "back again", 3, 0, 5);
    store_batch_insert(b, t);
    json_decref(t);
    assert_int_equal(commit(st, b), 1);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *sess = store_session_get(r, "t", "call-1");
    assert_string_equal(json_string_value(json_object_get(sess, "status")), "RUNNING");
    assert_true(json_is_null(json_object_get(sess, "stopped_ms")));
    json_decref(sess);
    json_decref(how);
    store_reader_close(r);
    store_close(st);
    unlink(path);
    free(path);
}

/* An embedding stored before a restart still goes when its turn changes after it. */
static void test_changed_turn_loses_embedding_after_restart(void **state)
{
    char *path = tmp_db(), *err = NULL;
    struct store *st = open_ok(path);
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t = turn("assistant", "Noted, and I will", 1, 0, 1);
    store_batch_embed(b);
    store_batch_insert(b, t);
    json_decref(t);
    assert_int_equal(commit(st, b), 1);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *due = store_to_embed(r, util_wall_ms(), 10);
    float v[2] = {1, 0};
    assert_int_equal(embed_one(st, json_array_get(due, 0), "Noted, and I will", v, 0), 1);
    json_decref(due);
    store_reader_close(r);
    store_close(st);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings"), 1);

    st = open_ok(path); /* retrieval off now: the batch asks for no embedding */
    json_t *cut = json_pack("{s:i, s:s, s:s, s:b}", "seq", 1, "content", "Noted,", "original",
                            "Noted, and I will", "interrupted", 1);
    b = store_batch_new("t", "call-1");
    store_batch_update(b, cut);
    json_decref(cut);
    assert_int_equal(commit(st, b), 1);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings"), 0);
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
    char *path = tmp_db();
    struct store *st = open_ok(path);
    struct event_base *base = event_base_new();
    assert_int_equal(store_attach(st, base), 0);
    norder = 0;
    for (int i = 1; i <= 5; i++) {
        struct store_batch *b = store_batch_new("t", "call-1");
        json_t *t = turn("user", "hi", i, 0, i);
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
    json_t *t = turn("assistant", "ok", i, 0, i);
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
    char *path = tmp_db();
    struct store *st = open_delayed(path, 100000);
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

/* A request's own turns (a deferred batch) under load wait for the next batch that wakes the
 * writer and share its transaction, or commit_delay_us at most; one request at a time, or
 * at a stop, they are committed at once. */
static void submit_turn(struct store *st, const char *role, int seq, int deferred)
{
    struct store_batch *b = store_batch_new("t", "call");
    json_t *t = turn(role, "hello", (seq + 1) / 2, 0, seq);
    store_batch_insert(b, t);
    json_decref(t);
    if (deferred)
        store_batch_defer(b);
    store_submit(st, b, NULL, NULL, NULL);
}

static size_t turns_in_session(const char *path, const char *session)
{
    char *err = NULL;
    struct store *st = open_ok(path);
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
    char *path = tmp_db();
    struct store *st = open_delayed(path, 60000000);
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

    st = open_delayed(path, 20000); /* nothing else comes: committed when its wait is over */
    store_expect(st, 2);
    submit_turn(st, "user", 5, 1);
    store_drain(st);
    assert_int_equal(counts_of(st).transactions, 1);
    store_close(st);
    assert_int_equal(turns_in(path), 5);
    unlink(path);
    free(path);
}

/* The WAL's checkpoint: once a commit leaves 1,000 frames or more in the WAL, the writer copies
 * them into the database after the group's completions have run, not inside the COMMIT they
 * waited for (a checkpoint syncs the disk twice); the WAL then starts over from its start. */
struct ckpt_seen {
    struct store *st;
    uint64_t at_report; /* checkpoints counted when the completion ran */
};

static void ckpt_report(void *arg, int ok)
{
    struct ckpt_seen *s = arg;
    (void)ok;
    s->at_report = counts_of(s->st).checkpoints;
}

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static void test_checkpoint_after_report(void **state)
{
    (void)state;
    char *path = tmp_db(), *wal = xasprintf("%s-wal", path), text[3000];
    struct store *st = open_ok(path);
    memset(text, 'x', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0'; /* a row of its own on each page: ~3 frames a commit */
    int after_report = 0, ok = 0;
    off_t db0 = 0;
    for (int i = 1; i <= 1500; i++) {
        struct ckpt_seen s = {.st = st};
        struct store_batch *b = store_batch_new("t", "long");
        json_t *t = turn(i % 2 ? "user" : "assistant", text, (i + 1) / 2, 0, i);
        store_batch_insert(b, t);
        json_decref(t);
        store_submit(st, b, NULL, ckpt_report, &s); /* reported on the writer */
        store_drain(st);                            /* the group and its checkpoint done */
        if (i == 1)
            db0 = file_size(path);
        after_report += counts_of(st).checkpoints > s.at_report;
    }
    struct store_counts c = counts_of(st);
    ok = (int)c.ok;
    assert_int_equal(ok, 1500);
    assert_true(c.checkpoints >= 3);                  /* ~4,500 frames written */
    assert_int_equal(after_report, c.checkpoints);    /* each after its group's report */
    assert_true(file_size(path) > db0 + 1000 * 4096); /* the pages are in the database */
    assert_true(file_size(wal) < 1100 * (4096 + 24)); /* and the WAL started over */
    store_close(st);
    assert_int_equal(turns_in_session(path, "long"), 1500);
    unlink(path);
    free(wal);
    free(path);
}

int main(void)
{
    evthread_use_pthreads(); /* completions arrive from the writer thread */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_group_commit),
        cmocka_unit_test(test_persistence_and_schema),
        cmocka_unit_test(test_migration_names_ids_that_are_not_text),
        cmocka_unit_test(test_drain_and_writer_callback),
        cmocka_unit_test(test_writer_hook_then_report),
        cmocka_unit_test(test_failed_batch),
        cmocka_unit_test(test_retention),
        cmocka_unit_test(test_stop_fills_the_outbox),
        cmocka_unit_test(test_embedding_queue),
        cmocka_unit_test(test_known_embedding),
        cmocka_unit_test(test_turn_after_stop_reopens),
        cmocka_unit_test(test_changed_turn_loses_embedding_after_restart),
        cmocka_unit_test(test_attached_base),
        cmocka_unit_test(test_commit_delay),
        cmocka_unit_test(test_deferred_turns),
        cmocka_unit_test(test_checkpoint_after_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
