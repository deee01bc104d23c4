/* Unit tests: a turn's fields in column order (memory/turnrow.c), as both writers bind them —
 * every column found by its name, whatever the order of the turn's keys, and nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "memory/turnrow.h"

#include <stdio.h>
#include <string.h>

static const char *const names[TURNROW_COLUMNS] = {
    "seq",      "turn_id",       "turn_idx",    "role",
    "content",  "source",        "interrupted", "interrupt_timestamp",
    "original", "metadata",      "tool_calls",  "tool_call_id",
    "name",     "timestamp",     "importance",  "model",
    "usage",    "finish_reason", "ttft_us",     "latency_us"};

/* Every column, each holding its own index, in reverse order, among keys that name none. */
static void every_column(void **state)
{
    (void)state;
    json_t *t = json_object(), *f[TURNROW_COLUMNS];
    json_object_set_new(t, "extra", json_string("not a column"));
    for (int i = TURNROW_COLUMNS - 1; i >= 0; i--) {
        json_object_set_new(t, names[i], json_integer(i));
        if (i == 7)
            json_object_set_new(t, "turn", json_string("a prefix of turn_id"));
    }
    json_object_set_new(t, "Seq", json_string("case counts"));
    json_object_set_new(t, "", json_string("empty"));
    json_object_set_new(t, "~", json_string("past z"));
    turnrow_fields(t, f);
    for (int i = 0; i < TURNROW_COLUMNS; i++) {
        assert_non_null(f[i]);
        assert_int_equal(json_integer_value(f[i]), i);
    }
    json_decref(t);
}

/* A user turn as reconciliation makes it: the reply's columns are absent, not some other value. */
static void absent_columns(void **state)
{
    (void)state;
    json_t *t = json_pack("{s:s, s:s, s:I, s:I, s:I, s:{}, s:b, s:n}", "role", "user", "content",
                          "hello", "turn_id", (json_int_t)3, "turn_idx", (json_int_t)0, "seq",
                          (json_int_t)5, "metadata", "interrupted", 0, "original");
    json_t *f[TURNROW_COLUMNS];
    turnrow_fields(t, f);
    assert_string_equal(json_string_value(f[TURNROW_ROLE]), "user");
    assert_string_equal(json_string_value(f[TURNROW_CONTENT]), "hello");
    assert_int_equal(json_integer_value(f[TURNROW_SEQ]), 5);
    assert_int_equal(json_integer_value(f[TURNROW_TURN_ID]), 3);
    assert_true(json_is_false(f[TURNROW_INTERRUPTED]));
    assert_true(json_is_null(f[TURNROW_ORIGINAL]));
    assert_true(turnrow_empty_object(f[TURNROW_METADATA]));
    int absent[] = {TURNROW_SOURCE, TURNROW_INTERRUPT_TS,  TURNROW_TOOL_CALLS, TURNROW_TOOL_CALL_ID,
                    TURNROW_NAME,   TURNROW_TIMESTAMP,     TURNROW_IMPORTANCE, TURNROW_MODEL,
                    TURNROW_USAGE,  TURNROW_FINISH_REASON, TURNROW_TTFT_US,    TURNROW_LATENCY_US};
    for (size_t i = 0; i < sizeof(absent) / sizeof(*absent); i++)
        assert_null(f[absent[i]]);
    json_decref(t);
}

/* What turnrow_json reads from a row is what turnrow_fields finds in the turn it made. */
static json_t *col_of_array(void *row, int i, int as_json)
{
    (void)as_json;
    return json_incref(json_array_get(row, (size_t)i));
}

static void json_round_trip(void **state)
{
    (void)state;
    json_t *row = json_array(), *f[TURNROW_COLUMNS];
    for (int i = 0; i < TURNROW_COLUMNS; i++)
        json_array_append_new(row, i == 6 ? json_integer(1) : json_integer(100 + i));
    json_t *t = turnrow_json(col_of_array, row);
    turnrow_fields(t, f);
    for (int i = 0; i < TURNROW_COLUMNS; i++) {
        if (i == TURNROW_INTERRUPTED)
            assert_true(json_is_true(f[i]));
        else
            assert_int_equal(json_integer_value(f[i]), 100 + i);
    }
    assert_false(turnrow_empty_object(json_object_get(t, "content")));
    json_decref(t);
    json_decref(row);
}

/* A binder that writes what it was given per parameter, as "kind:value". */
static char bound[32][64];

static void b_int(void *ctx, int at, json_t *v)
{
    (void)ctx;
    snprintf(bound[at], sizeof(bound[at]), json_is_integer(v) ? "int:%lld" : "int:null",
             (long long)json_integer_value(v));
}

static void b_string(void *ctx, int at, json_t *v)
{
    (void)ctx;
    snprintf(bound[at], sizeof(bound[at]), "str:%s",
             json_is_string(v) ? json_string_value(v) : "null");
}

static void b_json(void *ctx, int at, json_t *v)
{
    (void)ctx;
    snprintf(bound[at], sizeof(bound[at]), "json:%s",
             json_is_object(v) || json_is_array(v) ? "yes" : "null");
}

static void b_text(void *ctx, int at, const char *s)
{
    (void)ctx;
    snprintf(bound[at], sizeof(bound[at]), "text:%s", s);
}

static void b_flag(void *ctx, int at, int on)
{
    (void)ctx;
    snprintf(bound[at], sizeof(bound[at]), "flag:%d", on);
}

static void b_real(void *ctx, int at, double d)
{
    (void)ctx;
    snprintf(bound[at], sizeof(bound[at]), "real:%.2f", d);
}

static const struct turnrow_binder binder = {b_int, b_string, b_json, b_text, b_flag, b_real};

/* Each column to its parameter with its type, as both writers' statements take them. */
static void bind_columns(void **state)
{
    (void)state;
    json_t *t = json_pack("{s:I, s:I, s:I, s:s, s:s, s:s, s:b, s:I, s:s, s:{s:i}, s:[], s:I, s:f,"
                          " s:{}, s:I, s:s}",
                          "seq", (json_int_t)9, "turn_id", (json_int_t)4, "turn_idx", (json_int_t)1,
                          "role", "assistant", "content", "heard", "source", "llm", "interrupted",
                          1, "interrupt_timestamp", (json_int_t)1700, "original", "heard and more",
                          "metadata", "k", 1, "tool_calls", "timestamp", (json_int_t)1600,
                          "importance", 0.5, "usage", "ttft_us", (json_int_t)300, "model", "m");
    memset(bound, 0, sizeof(bound));
    turnrow_bind(t, &binder, NULL, 2, 21);
    const char *want[22] = {
        [2] = "int:4",     [3] = "int:1",      [4] = "str:assistant", [5] = "str:heard",
        [6] = "str:llm",   [7] = "flag:1",     [8] = "int:1700",      [9] = "str:heard and more",
        [10] = "json:yes", [11] = "json:yes",  [12] = "str:null",     [13] = "str:null",
        [14] = "int:1600", [15] = "real:0.50", [16] = "str:m",        [17] = "json:yes",
        [18] = "str:null", [19] = "int:300",   [20] = "int:null",     [21] = "int:9"};
    for (int i = 2; i <= 21; i++)
        assert_string_equal(bound[i], want[i]);
    json_object_set_new(t, "metadata", json_object()); /* the usual, empty: not written out */
    json_object_del(t, "interrupted");
    turnrow_bind(t, &binder, NULL, 4, 23);
    assert_string_equal(bound[12], "text:{}");
    assert_string_equal(bound[9], "flag:0");
    assert_string_equal(bound[23], "int:9");
    json_decref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_column),
        cmocka_unit_test(absent_columns),
        cmocka_unit_test(json_round_trip),
        cmocka_unit_test(bind_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
