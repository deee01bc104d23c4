#include "memory/history.h"

#include "base/log.h"
#include "base/util.h"

#include <openssl/rand.h>
#include <stdio.h>

/* An OpenAI message's own fields, in every format when the turn has them: without them an
 * entry of a tool call or its result is no message a model takes back (history.h). */
static const char *const history_message_fields[] = {"tool_calls", "tool_call_id", "name"};

static const char *const history_full_fields[] = {
    "seq", "turn_idx", "model", "usage", "finish_reason", "ttft_us", "latency_us", "importance"};

/* t's fields of names present in c as they are. */
static void history_copy(json_t *c, json_t *t, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(t, names[i]);
        if (v != NULL)
            json_object_set(c, names[i], v);
    }
}

/* A new reference to v, or null when absent (the packers want a value). */
static json_t *history_or_null(json_t *v)
{
    return v ? json_incref(v) : json_null();
}

/* The client's metadata with memproxy's voice fields laid over it. */
static json_t *history_metadata(json_t *t)
{
    json_t *meta = json_deep_copy(json_object_get(t, "metadata"));
    if (!json_is_object(meta)) {
        json_decref(meta);
        meta = json_object();
    }
    if (json_is_string(json_object_get(t, "source")))
        json_object_set(meta, "source", json_object_get(t, "source"));
    if (json_is_true(json_object_get(t, "interrupted"))) {
        json_object_set_new(meta, "interrupted", json_true());
        json_object_set_new(meta, "interrupt_timestamp",
                            history_or_null(json_object_get(t, "interrupt_timestamp")));
        json_object_set_new(meta, "original", history_or_null(json_object_get(t, "original")));
    }
    return meta;
}

json_t *history_content(json_t *t, int full)
{
    json_t *c = json_pack(
        "{s:o, s:o, s:o, s:o, s:o}", "role", history_or_null(json_object_get(t, "role")), "content",
        history_or_null(json_object_get(t, "content")), "turn_id",
        history_or_null(json_object_get(t, "turn_id")), "timestamp",
        history_or_null(json_object_get(t, "timestamp")), "metadata", history_metadata(t));
    history_copy(c, t, history_message_fields, UTIL_ARRAY_LEN(history_message_fields));
    if (full)
        history_copy(c, t, history_full_fields, UTIL_ARRAY_LEN(history_full_fields));
    return c;
}

static json_t *history_contents(json_t *turns, int full)
{
    json_t *out = json_array(), *t;
    size_t i;
    json_array_foreach(turns, i, t)
        json_array_append_new(out, history_content(t, full));
    return out;
}

static json_int_t history_seconds(json_t *session, const char *key)
{
    return json_integer_value(json_object_get(session, key)) / 1000;
}

json_t *history_object(json_t *session, json_t *turns, int full)
{
    return json_pack("{s:o, s:I, s:o, s:o}", "agent_id",
                     history_or_null(json_object_get(session, "id")), "start_ts",
                     history_seconds(session, "created_ms"), "status",
                     history_or_null(json_object_get(session, "status")), "contents",
                     history_contents(turns, full));
}

json_t *history_payload(json_t *session, json_t *turns, int event)
{
    json_t *labels = json_object_get(session, "labels");
    json_t *p = json_pack("{s:o, s:I, s:I, s:o, s:s, s:o, s:o}", "agent_id",
                          history_or_null(json_object_get(session, "id")), "start_ts",
                          history_seconds(session, "created_ms"), "stop_ts",
                          history_seconds(session, "stopped_ms"), "status",
                          history_or_null(json_object_get(session, "status")), "message", "OK",
                          "labels", json_is_object(labels) ? json_incref(labels) : json_object(),
                          "user_id", history_or_null(json_object_get(session, "user_id")));
    if (event == HISTORY_EVENT_HISTORY)
        json_object_set_new(p, "contents", history_contents(turns, 1));
    return p;
}

void history_notice_id(char *out, size_t len, long long event)
{
    unsigned char raw[12];
    char hex[2 * sizeof(raw) + 1];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        log_fatal("store: the random generator failed (RAND_bytes)");
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    snprintf(out, len, "%s:%lld", hex, event);
}
