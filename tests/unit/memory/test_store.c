/* Unit tests: the SQLite store and its readers (memory/store.c): round trips, schema and
 * migrations, retention, the outbox, embeddings. The writer thread's grouping, hooks and
 * checkpoints are in test_store_writer.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/store.h"
#include "storetest.h"

#include <event2/thread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_round_trip(void **state)
{
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    struct store_batch *b = store_batch_new("acme", "room-42");
    json_t *sys = json_pack("[{s:s, s:s}]", "role", "system", "content", "Be brief.");
    json_t *u = storetest_turn("user", "Tell me a joke.", 2, 0, 1);
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
    assert_int_equal(storetest_commit(st, b), 1);

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
    assert_int_equal(storetest_commit(st, b), 1);
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

static void test_persistence_and_schema(void **state)
{
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    struct store_batch *b = store_batch_new("t", "s");
    json_t *t = storetest_turn("user", "remember me", 1, 0, 1);
    store_batch_insert(b, t);
    json_decref(t);
    store_submit(st, b, NULL, NULL, NULL); /* nobody waits: close commits it */
    store_close(st);

    st = storetest_open(path);
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
    char *path = storetest_path(), *err = NULL;
    store_close(storetest_open(path)); /* the schema as it is today */
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

    struct store *st = storetest_open(path);
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

/* retention: a session idle past it is deleted with its turns at start, then a finished
 * delivery as old; a fresh session and a pending delivery stay. */
static void test_retention(void **state)
{
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    const char *ids[] = {"old", "fresh"};
    for (int i = 0; i < 2; i++) {
        struct store_batch *b = store_batch_new("t", ids[i]);
        json_t *t = storetest_turn("user", "hi", 1, 0, 1);
        store_batch_insert(b, t);
        json_decref(t);
        assert_int_equal(storetest_commit(st, b), 1);
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

    st = storetest_open_retention(path, 2 * 86400000LL);
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
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t = storetest_turn("user", "hi", 1, 0, 1);
    store_batch_session(b, "1002", NULL);
    store_batch_insert(b, t);
    json_decref(t);
    assert_int_equal(storetest_commit(st, b), 1);

    json_t *guard = json_pack("{s:[{s:s, s:i}], s:I}", "hooks", "url", "http://h/1", "event", 103,
                              "idle_before", (json_int_t)1); /* updated after 1 ms: no stop */
    b = store_batch_new("t", "call-1");
    store_batch_existing(b);
    store_batch_stop(b, guard);
    json_decref(guard);
    assert_int_equal(storetest_commit(st, b), 1);
    struct store_reader *r = store_reader_open(st, &err);
    assert_int_equal(store_outbox_next(r), -1);

    json_t *how = json_pack("{s:[{s:s, s:i}, {s:s, s:i}]}", "hooks", "url", "http://h/1", "event",
                            103, "url", "http://h/2", "event", 102);
    for (int i = 0; i < 2; i++) {
        b = store_batch_new("t", "call-1");
        store_batch_existing(b);
        store_batch_stop(b, how);
        assert_int_equal(storetest_commit(st, b), 1);
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
    assert_int_equal(storetest_commit(st, b), 1);
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
    return storetest_commit(st, b);
}

/* Retrieval's queue: a batch that wants embeddings queues its user and assistant turns with
 * text; an embedding is kept only for the text it was made from; a changed turn loses it and
 * waits again; a retry counts. */
/* A question embedded for its recall: the user turn reading exactly that text takes the
 * embedding at once; the reply, and a user turn reading otherwise, wait in the queue. */
static void test_known_embedding(void **state)
{
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    float q[3] = {0.25f, 0.5f, 1.0f};
    struct store_batch *b = store_batch_new("t", "call-2");
    json_t *u = storetest_turn("user", "What is the gate code?", 1, 0, 1);
    json_t *a = storetest_turn("assistant", "It is 4417.", 1, 0, 2);
    json_t *u2 = storetest_turn("user", "what is the gate code", 2, 0, 3);
    store_batch_embed(b);
    store_batch_known_embedding(b, "embed-model", "What is the gate code?", q, 3);
    store_batch_insert(b, u);
    store_batch_insert(b, a);
    store_batch_insert(b, u2);
    assert_int_equal(storetest_commit(st, b), 1);
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
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t1 = storetest_turn("user", "my gate code is 4417", 1, 0, 1);
    json_t *t2 = storetest_turn("assistant", "Noted, and I will", 1, 0, 2);
    json_t *t3 = storetest_turn("tool", "{}", 1, 0, 3);
    json_t *t4 = storetest_turn("user", "", 2, 0, 4);
    store_batch_embed(b);
    store_batch_session(b, "1002", NULL);
    store_batch_insert(b, t1);
    store_batch_insert(b, t2);
    store_batch_insert(b, t3);
    store_batch_insert(b, t4);
    assert_int_equal(storetest_commit(st, b), 1);
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
    assert_int_equal(storetest_commit(st, b), 1);
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
    assert_int_equal(storetest_commit(st, b), 1);
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
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    json_t *how = json_object();
    for (int i = 1; i <= 4; i++) {
        struct store_batch *b = store_batch_new("t", "call-1");
        json_t *t = storetest_turn(i % 2 ? "user" : "assistant", "x", (i + 1) / 2, 0, i);
        store_batch_insert(b, t);
        json_decref(t);
        assert_int_equal(storetest_commit(st, b), 1);
        if (i % 2 == 1)
            continue; /* two turns in a row while running, then a stop */
        b = store_batch_new("t", "call-1");
        store_batch_existing(b);
        store_batch_stop(b, how);
        assert_int_equal(storetest_commit(st, b), 1);
        assert_int_equal(count(path, "SELECT status = 'STOPPED' FROM sessions"), 1);
    }
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t = storetest_turn("user", "back again", 3, 0, 5);
    store_batch_insert(b, t);
    json_decref(t);
    assert_int_equal(storetest_commit(st, b), 1);
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
    char *path = storetest_path(), *err = NULL;
    struct store *st = storetest_open(path);
    struct store_batch *b = store_batch_new("t", "call-1");
    json_t *t = storetest_turn("assistant", "Noted, and I will", 1, 0, 1);
    store_batch_embed(b);
    store_batch_insert(b, t);
    json_decref(t);
    assert_int_equal(storetest_commit(st, b), 1);
    struct store_reader *r = store_reader_open(st, &err);
    json_t *due = store_to_embed(r, util_wall_ms(), 10);
    float v[2] = {1, 0};
    assert_int_equal(embed_one(st, json_array_get(due, 0), "Noted, and I will", v, 0), 1);
    json_decref(due);
    store_reader_close(r);
    store_close(st);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings"), 1);

    st = storetest_open(path); /* retrieval off now: the batch asks for no embedding */
    json_t *cut = json_pack("{s:i, s:s, s:s, s:b}", "seq", 1, "content", "Noted,", "original",
                            "Noted, and I will", "interrupted", 1);
    b = store_batch_new("t", "call-1");
    store_batch_update(b, cut);
    json_decref(cut);
    assert_int_equal(storetest_commit(st, b), 1);
    assert_int_equal(count(path, "SELECT COUNT(*) FROM embeddings"), 0);
    store_close(st);
    unlink(path);
    free(path);
}

int main(void)
{
    evthread_use_pthreads(); /* completions arrive from the writer thread */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_persistence_and_schema),
        cmocka_unit_test(test_migration_names_ids_that_are_not_text),
        cmocka_unit_test(test_retention),
        cmocka_unit_test(test_stop_fills_the_outbox),
        cmocka_unit_test(test_embedding_queue),
        cmocka_unit_test(test_known_embedding),
        cmocka_unit_test(test_turn_after_stop_reopens),
        cmocka_unit_test(test_changed_turn_loses_embedding_after_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
