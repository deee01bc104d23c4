/* Unit tests: the shapes of data that leave and enter memproxy's memory — history and dump
 * payloads (memory/history.c), exported sessions and user memory on import
 * (memory/snapshot.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "memory/history.h"
#include "memory/snapshot.h"

#include <jansson.h>
#include <string.h>

static const char session_json[] =
    "{\"id\":\"room-42\",\"user_id\":\"1002\",\"profile\":\"default\",\"status\":\"STOPPED\","
    "\"labels\":{\"campaign\":\"spring\"},\"metadata\":{},\"system_messages\":null,"
    "\"runtime_system\":null,\"runtime_params\":null,\"window_hash\":-42,"
    "\"created_ms\":1763800099000,\"updated_ms\":1763800190000,\"stopped_ms\":1763800190000,"
    "\"turns\":2}";

static const char turns_json[] =
    "[{\"seq\":1,\"turn_id\":1,\"turn_idx\":0,\"role\":\"user\",\"content\":\"Tell me a joke\","
    "\"source\":\"asr\",\"interrupted\":false,\"interrupt_timestamp\":null,\"original\":null,"
    "\"metadata\":{\"user\":\"1002\"},\"timestamp\":1763800100000,\"importance\":0.6},"
    "{\"seq\":2,\"turn_id\":1,\"turn_idx\":0,\"role\":\"assistant\",\"content\":\"A cat walks\","
    "\"source\":\"llm\",\"interrupted\":true,\"interrupt_timestamp\":1763800106500,"
    "\"original\":\"A cat walks into a bar.\",\"metadata\":{},\"timestamp\":1763800105000,"
    "\"importance\":0.4,\"model\":\"gpt-4o-mini\",\"usage\":{\"total_tokens\":9},"
    "\"finish_reason\":\"stop\",\"ttft_us\":1200,\"latency_us\":4000}]";

static json_t *load(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static json_t *snapshot(void)
{
    return json_pack("{s:s, s:o, s:o}", "format", SNAPSHOT_FORMAT, "session", load(session_json),
                     "turns", load(turns_json));
}

static void test_history_keeps_heard_and_generated(void **state)
{
    json_t *sess = load(session_json), *turns = load(turns_json);
    json_t *h = history_object(sess, turns, 0);
    assert_string_equal(json_string_value(json_object_get(h, "agent_id")), "room-42");
    assert_int_equal(json_integer_value(json_object_get(h, "start_ts")), 1763800099);
    json_t *cut = json_array_get(json_object_get(h, "contents"), 1);
    json_t *meta = json_object_get(cut, "metadata");
    assert_string_equal(json_string_value(json_object_get(cut, "content")), "A cat walks");
    assert_string_equal(json_string_value(json_object_get(meta, "original")),
                        "A cat walks into a bar.");
    assert_true(json_is_true(json_object_get(meta, "interrupted")));
    assert_int_equal(json_integer_value(json_object_get(meta, "interrupt_timestamp")),
                     1763800106500LL);
    assert_null(json_object_get(cut, "model")); /* standard: Agora's fields only */
    json_t *first = json_array_get(json_object_get(h, "contents"), 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(first, "metadata"), "user")), "1002");
    assert_null(json_object_get(json_object_get(first, "metadata"), "interrupted"));
    json_decref(h);

    json_t *p = history_payload(sess, turns, HISTORY_EVENT_HISTORY);
    assert_int_equal(json_integer_value(json_object_get(p, "stop_ts")), 1763800190);
    assert_string_equal(json_string_value(json_object_get(p, "user_id")), "1002");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(p, "labels"), "campaign")), "spring");
    json_t *full = json_array_get(json_object_get(p, "contents"), 1);
    assert_string_equal(json_string_value(json_object_get(full, "model")), "gpt-4o-mini");
    json_decref(p);
    p = history_payload(sess, turns, HISTORY_EVENT_LEFT);
    assert_null(json_object_get(p, "contents"));
    json_decref(p);
    json_decref(sess);
    json_decref(turns);
}

static void test_snapshot_accepts_an_export(void **state)
{
    char *err = NULL;
    json_t *s = snapshot();
    assert_int_equal(snapshot_check(s, &err), 0);
    assert_null(err);
    json_decref(s);
}

/* Break a fresh snapshot with f; it must be refused with a message. */
static void refused(void (*f)(json_t *s), const char *want)
{
    char *err = NULL;
    json_t *s = snapshot();
    f(s);
    assert_int_equal(snapshot_check(s, &err), -1);
    assert_non_null(strstr(err, want));
    free(err);
    json_decref(s);
}

static json_t *sess_of(json_t *s)
{
    return json_object_get(s, "session");
}
static json_t *turn_of(json_t *s, size_t i)
{
    return json_array_get(json_object_get(s, "turns"), i);
}
static void no_format(json_t *s)
{
    json_object_set_new(s, "format", json_string("v0"));
}
static void no_created(json_t *s)
{
    json_object_del(sess_of(s), "created_ms");
}
static void bad_status(json_t *s)
{
    json_object_set_new(sess_of(s), "status", json_string("X"));
}
static void bad_id(json_t *s)
{
    json_object_set_new(sess_of(s), "id", json_string("a\nb"));
}
static void seq_string(json_t *s)
{
    json_object_set_new(turn_of(s, 0), "seq", json_string("1"));
}
static void unknown(json_t *s)
{
    json_object_set_new(turn_of(s, 1), "colour", json_true());
}
static void bad_role(json_t *s)
{
    json_object_set_new(turn_of(s, 0), "role", json_string("bot"));
}
static void backwards(json_t *s)
{
    json_object_set_new(turn_of(s, 1), "seq", json_integer(1));
}
static void repeated(json_t *s)
{
    json_t *t = json_deep_copy(turn_of(s, 0));
    json_object_set_new(t, "seq", json_integer(3));
    json_array_append_new(json_object_get(s, "turns"), t);
}

static void test_snapshot_refuses_what_it_cannot_restore(void **state)
{
    refused(no_format, "format");
    refused(no_created, "session.created_ms is missing");
    refused(bad_status, "session.status");
    refused(bad_id, "session.id");
    refused(seq_string, "turns[0].seq");
    refused(unknown, "turns[1].colour is not a known field");
    refused(bad_role, "turns[0].role");
    refused(backwards, "turns[1].seq");
    refused(repeated, "turns[2] repeats");
    char *err = NULL;
    json_t *arr = json_array();
    assert_int_equal(snapshot_check(arr, &err), -1);
    assert_non_null(strstr(err, "object"));
    free(err);
    json_decref(arr);
}

static void test_user_memory(void **state)
{
    char *err = NULL;
    json_t *in = load("{\"summary\":\"Likes cats.\",\"facts\":[{\"category\":\"pet\",\"key\":"
                      "\"cat\",\"value\":\"Misu\"}]}");
    json_t *out = snapshot_user_memory(in, &err);
    assert_non_null(out);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "summary"), "text")),
                        "Likes cats.");
    json_t *f = json_array_get(json_object_get(out, "facts"), 0);
    assert_true(json_real_value(json_object_get(f, "confidence")) == 0.5);
    json_decref(out);
    json_decref(in);
    const char *bad[] = {
        "{\"summary\":1}",
        "{\"facts\":{}}",
        "{\"other\":1}",
        "{\"facts\":[{\"category\":\"a\",\"key\":\"b\"}]}",
        "{\"facts\":[{\"category\":\"a\",\"key\":\"b\",\"value\":\"c\",\"confidence\":1.5}]}",
        "{\"facts\":[{\"category\":\"\",\"key\":\"b\",\"value\":\"c\"}]}",
        ("{\"facts\":[{\"category\":\"a\",\"key\":\"b\",\"value\":\"c\"},"
         "{\"category\":\"a\",\"key\":\"b\",\"value\":\"d\"}]}"),
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *b = load(bad[i]);
        assert_null(snapshot_user_memory(b, &err));
        assert_non_null(err);
        free(err);
        err = NULL;
        json_decref(b);
    }
    json_t *none = load("{}");
    out = snapshot_user_memory(none, &err);
    assert_null(err);
    assert_true(json_is_null(json_object_get(out, "summary")));
    assert_int_equal(json_array_size(json_object_get(out, "facts")), 0);
    json_decref(out);
    json_decref(none);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_history_keeps_heard_and_generated),
        cmocka_unit_test(test_snapshot_accepts_an_export),
        cmocka_unit_test(test_snapshot_refuses_what_it_cannot_restore),
        cmocka_unit_test(test_user_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
