#include "memory/snapshot.h"

#include "base/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* What a field may hold. */
enum {
    K_STR = 1 << 0,
    K_INT = 1 << 1,
    K_REAL = 1 << 2,
    K_BOOL = 1 << 3,
    K_OBJ = 1 << 4,
    K_ARR = 1 << 5,
    K_NULL = 1 << 6,
    K_ID = 1 << 7, /* a string that is a valid id */
};

struct snapshot_field {
    const char *name;
    unsigned kinds;
    int required;
};

static const struct snapshot_field snapshot_session[] = {
    {"id", K_ID, 1},
    {"user_id", K_ID | K_NULL, 0},
    {"profile", K_STR, 1},
    {"status", K_STR, 1},
    {"labels", K_OBJ, 0},
    {"metadata", K_OBJ, 0},
    {"system_messages", K_ARR | K_NULL, 0},
    {"runtime_system", K_ARR | K_NULL, 0},
    {"runtime_params", K_OBJ | K_NULL, 0},
    {"window_hash", K_INT | K_NULL, 0},
    {"created_ms", K_INT, 1},
    {"updated_ms", K_INT, 1},
    {"stopped_ms", K_INT | K_NULL, 0},
    {"turns", K_INT, 0}, /* the count an export shows; recomputed on import */
};

static const struct snapshot_field snapshot_turn[] = {
    {"seq", K_INT, 1},
    {"turn_id", K_INT, 1},
    {"turn_idx", K_INT, 1},
    {"role", K_STR, 1},
    {"content", K_STR, 1},
    {"source", K_STR | K_NULL, 0},
    {"interrupted", K_BOOL, 0},
    {"interrupt_timestamp", K_INT | K_NULL, 0},
    {"original", K_STR | K_NULL, 0},
    {"metadata", K_OBJ, 0},
    {"tool_calls", K_ARR, 0},
    {"tool_call_id", K_STR, 0},
    {"name", K_STR, 0},
    {"timestamp", K_INT, 1},
    {"importance", K_INT | K_REAL, 1},
    {"model", K_STR, 0},
    {"usage", K_OBJ, 0},
    {"finish_reason", K_STR, 0},
    {"ttft_us", K_INT, 0},
    {"latency_us", K_INT, 0},
};

static const char *const snapshot_roles[] = {"system", "developer", "user", "assistant", "tool"};

static int snapshot_fail(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int snapshot_fail(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *err = xvasprintf(fmt, ap);
    va_end(ap);
    return -1;
}

static int snapshot_kind_ok(json_t *v, unsigned kinds)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        if (kinds & K_ID)
            return util_id_valid(json_string_value(v), json_string_length(v));
        return (kinds & K_STR) != 0;
    case JSON_INTEGER:
        return (kinds & K_INT) != 0;
    case JSON_REAL:
        return (kinds & K_REAL) != 0;
    case JSON_TRUE:
    case JSON_FALSE:
        return (kinds & K_BOOL) != 0;
    case JSON_OBJECT:
        return (kinds & K_OBJ) != 0;
    case JSON_ARRAY:
        return (kinds & K_ARR) != 0;
    default:
        return (kinds & K_NULL) != 0;
    }
}

/* Every key known and of its kind, every required key present. */
static int snapshot_fields(json_t *obj, const struct snapshot_field *f, size_t n, const char *where,
                           char **err)
{
    const char *key;
    json_t *v;
    if (!json_is_object(obj))
        return snapshot_fail(err, "%s must be an object", where);
    json_object_foreach(obj, key, v) {
        size_t i = 0;
        while (i < n && strcmp(f[i].name, key) != 0)
            i++;
        if (i == n)
            return snapshot_fail(err, "%s.%.64s is not a known field", where, key);
        if (!snapshot_kind_ok(v, f[i].kinds))
            return snapshot_fail(err, "%s.%s has the wrong type or value", where, key);
    }
    for (size_t i = 0; i < n; i++) {
        if (f[i].required && json_object_get(obj, f[i].name) == NULL)
            return snapshot_fail(err, "%s.%s is missing", where, f[i].name);
    }
    return 0;
}

static int snapshot_role_ok(const char *role)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(snapshot_roles); i++) {
        if (strcmp(role, snapshot_roles[i]) == 0)
            return 1;
    }
    return 0;
}

/* Turns in increasing seq order, each (turn_id, role, turn_idx) once. */
static int snapshot_turns(json_t *turns, char **err)
{
    json_t *seen = json_object(), *t;
    json_int_t last = 0;
    size_t i;
    int rc = 0;
    json_array_foreach(turns, i, t) {
        char where[48], key[96];
        snprintf(where, sizeof(where), "turns[%zu]", i);
        if ((rc = snapshot_fields(t, snapshot_turn, UTIL_ARRAY_LEN(snapshot_turn), where, err)) !=
            0)
            break;
        json_int_t seq = json_integer_value(json_object_get(t, "seq"));
        const char *role = json_string_value(json_object_get(t, "role"));
        if (seq <= last) {
            rc = snapshot_fail(err, "%s.seq must be above the previous turn's", where);
            break;
        }
        if (!snapshot_role_ok(role)) {
            rc = snapshot_fail(err, "%s.role is not a known role", where);
            break;
        }
        snprintf(key, sizeof(key), "%" JSON_INTEGER_FORMAT "/%s/%" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(t, "turn_id")), role,
                 json_integer_value(json_object_get(t, "turn_idx")));
        if (json_object_get(seen, key) != NULL) {
            rc = snapshot_fail(err, "%s repeats turn_id, role and turn_idx", where);
            break;
        }
        json_object_set_new(seen, key, json_true());
        last = seq;
    }
    json_decref(seen);
    return rc;
}

int snapshot_check(json_t *snap, char **err)
{
    const char *format = json_string_value(json_object_get(snap, "format"));
    json_t *sess = json_object_get(snap, "session"), *turns = json_object_get(snap, "turns");
    if (!json_is_object(snap))
        return snapshot_fail(err, "the body must be a JSON object");
    if (json_object_size(snap) != 3 || format == NULL || strcmp(format, SNAPSHOT_FORMAT) != 0)
        return snapshot_fail(err,
                             "the body must be {\"format\": \"%s\", \"session\", \"turns\"}, "
                             "as GET /v1/sessions/{id}/export gives",
                             SNAPSHOT_FORMAT);
    if (snapshot_fields(sess, snapshot_session, UTIL_ARRAY_LEN(snapshot_session), "session", err) !=
        0)
        return -1;
    const char *status = json_string_value(json_object_get(sess, "status"));
    if (strcmp(status, "RUNNING") != 0 && strcmp(status, "STOPPED") != 0)
        return snapshot_fail(err, "session.status must be RUNNING or STOPPED");
    if (!json_is_array(turns) || json_array_size(turns) > SNAPSHOT_MAX_TURNS)
        return snapshot_fail(err, "turns must be an array of at most %d turns", SNAPSHOT_MAX_TURNS);
    return snapshot_turns(turns, err);
}

static const struct snapshot_field snapshot_fact[] = {
    {"category", K_STR, 1},
    {"key", K_STR, 1},
    {"value", K_STR, 1},
    {"confidence", K_INT | K_REAL, 0},
};

/* One fact, checked, as stored; NULL with err set. seen holds "category/key" already met. */
static json_t *snapshot_fact_one(json_t *f, size_t i, json_t *seen, char **err)
{
    char where[32];
    snprintf(where, sizeof(where), "facts[%zu]", i);
    if (snapshot_fields(f, snapshot_fact, UTIL_ARRAY_LEN(snapshot_fact), where, err) != 0)
        return NULL;
    json_t *conf = json_object_get(f, "confidence");
    double c = conf ? json_number_value(conf) : 0.5;
    const char *cat = json_string_value(json_object_get(f, "category"));
    const char *key = json_string_value(json_object_get(f, "key"));
    if (c < 0 || c > 1) {
        snapshot_fail(err, "%s.confidence must be from 0 to 1", where);
        return NULL;
    }
    if (*cat == '\0' || *key == '\0' || strlen(cat) > 128 || strlen(key) > 128 ||
        json_string_length(json_object_get(f, "value")) > 4096) {
        snapshot_fail(err, "%s: category and key must be 1 to 128 bytes, value at most 4096",
                      where);
        return NULL;
    }
    char *id = xasprintf("%s\x1f%s", cat, key);
    int dup = json_object_get(seen, id) != NULL;
    json_object_set_new(seen, id, json_true());
    free(id);
    if (dup) {
        snapshot_fail(err, "%s repeats a category and key", where);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:O, s:f}", "category", cat, "key", key, "value",
                     json_object_get(f, "value"), "confidence", c);
}

static json_t *snapshot_facts(json_t *facts, char **err)
{
    json_t *out = json_array(), *seen = json_object(), *f;
    size_t i;
    json_array_foreach(facts, i, f) {
        json_t *one = snapshot_fact_one(f, i, seen, err);
        if (one == NULL) {
            json_decref(out);
            out = NULL;
            break;
        }
        json_array_append_new(out, one);
    }
    json_decref(seen);
    return out;
}

json_t *snapshot_user_memory(json_t *body, char **err)
{
    static const struct snapshot_field top[] = {{"summary", K_STR | K_NULL, 0},
                                                {"facts", K_ARR, 0}};
    if (snapshot_fields(body, top, UTIL_ARRAY_LEN(top), "body", err) != 0)
        return NULL;
    json_t *sum = json_object_get(body, "summary"), *facts = json_object_get(body, "facts");
    if (json_string_length(sum) > SNAPSHOT_MAX_SUMMARY) {
        snapshot_fail(err, "summary is longer than %d bytes", SNAPSHOT_MAX_SUMMARY);
        return NULL;
    }
    if (json_array_size(facts) > SNAPSHOT_MAX_FACTS) {
        snapshot_fail(err, "facts holds more than %d facts", SNAPSHOT_MAX_FACTS);
        return NULL;
    }
    json_t *out_facts = snapshot_facts(facts, err);
    if (out_facts == NULL)
        return NULL;
    json_t *out = json_pack("{s:n, s:o}", "summary", "facts", out_facts);
    if (json_is_string(sum) && json_string_length(sum) > 0)
        json_object_set_new(out, "summary", json_pack("{s:O}", "text", sum));
    return out;
}
