/*
 * turnrow: a stored turn's row and the JSON memory/reconcile.h describes, the same for every
 * backend: reading, the columns each backend selects in this order (STORE_TURN_COLS in their
 * schemas) through the backend's own column getter (sqlite_read.c, pgsql_read.c); writing, a
 * turn's fields in that order for the writer to bind (sqlite_exec.c, pgsql_exec.c).
 */
#ifndef MEMPROXY_TURNROW_H
#define MEMPROXY_TURNROW_H

#include <jansson.h>

#define TURNROW_COLUMNS 20

/* The columns, in order. */
enum turnrow_col {
    TURNROW_SEQ,
    TURNROW_TURN_ID,
    TURNROW_TURN_IDX,
    TURNROW_ROLE,
    TURNROW_CONTENT,
    TURNROW_SOURCE,
    TURNROW_INTERRUPTED,
    TURNROW_INTERRUPT_TS,
    TURNROW_ORIGINAL,
    TURNROW_METADATA,
    TURNROW_TOOL_CALLS,
    TURNROW_TOOL_CALL_ID,
    TURNROW_NAME,
    TURNROW_TIMESTAMP,
    TURNROW_IMPORTANCE,
    TURNROW_MODEL,
    TURNROW_USAGE,
    TURNROW_FINISH_REASON,
    TURNROW_TTFT_US,
    TURNROW_LATENCY_US
};

/* Column i of the row as JSON (null when NULL), its text decoded as JSON when as_json. */
typedef json_t *(*turnrow_col_fn)(void *row, int i, int as_json);

/* The turn (a new object): the tool and reply fields only when they hold a value, interrupted
 * as a boolean. */
json_t *turnrow_json(turnrow_col_fn col, void *row);

/* Turn t's fields in column order: out[i] is t's value for column i, borrowed, or NULL when t
 * has none (keys that name no column are skipped). One pass over t's keys: a writer binds
 * every column of every turn it stores, and twenty lookups by name cost it more than the
 * binding did (callgrind: ~3.6k instructions a turn, against ~1k). */
void turnrow_fields(json_t *t, json_t *out[TURNROW_COLUMNS]);

/* Whether v is a JSON object without members: a turn's usual metadata. */
int turnrow_empty_object(json_t *v);

/* How a backend binds one value to its parameter `at`: a JSON integer (NULL when v is not
 * one), a JSON string (NULL when not), an object or array as its compact text (NULL when
 * neither), a text, a 0/1, a real. */
struct turnrow_binder {
    void (*integer)(void *ctx, int at, json_t *v);
    void (*string)(void *ctx, int at, json_t *v);
    void (*json)(void *ctx, int at, json_t *v);
    void (*text)(void *ctx, int at, const char *s);
    void (*flag)(void *ctx, int at, int on);
    void (*real)(void *ctx, int at, double d);
};

/* Bind turn t's columns with b: turn_id .. latency_us to parameters first .. first + 18, seq
 * to seq_at. The one place that knows each column's type, for both writers: metadata absent
 * or empty is bound as "{}" without writing it out (most turns'), interrupted as 0/1. */
void turnrow_bind(json_t *t, const struct turnrow_binder *b, void *ctx, int first, int seq_at);

#endif
