#include "memory/turnrow.h"

#include <string.h>

static const char *const turnrow_names[TURNROW_COLUMNS] = {
    "seq",      "turn_id",       "turn_idx",    "role",
    "content",  "source",        "interrupted", "interrupt_timestamp",
    "original", "metadata",      "tool_calls",  "tool_call_id",
    "name",     "timestamp",     "importance",  "model",
    "usage",    "finish_reason", "ttft_us",     "latency_us"};

json_t *turnrow_json(turnrow_col_fn col, void *row)
{
    const char *const *names = turnrow_names;
    json_t *t = json_object();
    for (int i = 0; i < TURNROW_COLUMNS; i++) {
        int as_json = i == 9 || i == 10 || i == 16;
        int optional = i >= 10 && i != 13 && i != 14; /* tool and reply fields: when they apply */
        json_t *v = col(row, i, as_json);
        if (optional && json_is_null(v)) {
            json_decref(v);
            continue;
        }
        if (i == 6) { /* interrupted: stored 0/1, a boolean in JSON */
            json_t *b = json_boolean(json_integer_value(v) != 0);
            json_decref(v);
            v = b;
        }
        json_object_set_new(t, names[i], v);
    }
    return t;
}

/* The column a key names, or -1: its first letter narrows the names to at most six. The table
 * holds column + 1, 0 ending a letter's list. */
static int turnrow_col_of(const char *k)
{
#define C(x) (TURNROW_##x + 1)
    static const unsigned char first[26][7] = {
        ['c' - 'a'] = {C(CONTENT)},
        ['f' - 'a'] = {C(FINISH_REASON)},
        ['i' - 'a'] = {C(INTERRUPTED), C(INTERRUPT_TS), C(IMPORTANCE)},
        ['l' - 'a'] = {C(LATENCY_US)},
        ['m' - 'a'] = {C(METADATA), C(MODEL)},
        ['n' - 'a'] = {C(NAME)},
        ['o' - 'a'] = {C(ORIGINAL)},
        ['r' - 'a'] = {C(ROLE)},
        ['s' - 'a'] = {C(SEQ), C(SOURCE)},
        ['t' - 'a'] = {C(TURN_ID), C(TURN_IDX), C(TOOL_CALLS), C(TOOL_CALL_ID), C(TIMESTAMP),
                       C(TTFT_US)},
        ['u' - 'a'] = {C(USAGE)},
    };
#undef C
    if (k[0] < 'a' || k[0] > 'z')
        return -1;
    const unsigned char *c = first[k[0] - 'a'];
    for (int i = 0; i < 7 && c[i] != 0; i++)
        if (strcmp(k, turnrow_names[c[i] - 1]) == 0)
            return c[i] - 1;
    return -1;
}

void turnrow_fields(json_t *t, json_t *out[TURNROW_COLUMNS])
{
    const char *k;
    json_t *v;
    memset(out, 0, TURNROW_COLUMNS * sizeof(*out));
    json_object_foreach(t, k, v) {
        int i = turnrow_col_of(k);
        if (i >= 0)
            out[i] = v;
    }
}

int turnrow_empty_object(json_t *v)
{
    return json_is_object(v) && json_object_size(v) == 0;
}

void turnrow_bind(json_t *t, const struct turnrow_binder *b, void *ctx, int first, int seq_at)
{
    json_t *f[TURNROW_COLUMNS];
    turnrow_fields(t, f);
    for (int i = TURNROW_TURN_ID; i < TURNROW_COLUMNS; i++) {
        int at = first + i - TURNROW_TURN_ID;
        switch (i) {
        case TURNROW_INTERRUPTED:
            b->flag(ctx, at, json_is_true(f[i]));
            break;
        case TURNROW_METADATA:
            if (json_is_object(f[i]) && !turnrow_empty_object(f[i]))
                b->json(ctx, at, f[i]);
            else
                b->text(ctx, at, "{}");
            break;
        case TURNROW_TOOL_CALLS:
        case TURNROW_USAGE:
            b->json(ctx, at, f[i]);
            break;
        case TURNROW_IMPORTANCE:
            b->real(ctx, at, json_number_value(f[i]));
            break;
        case TURNROW_TURN_ID:
        case TURNROW_TURN_IDX:
        case TURNROW_INTERRUPT_TS:
        case TURNROW_TIMESTAMP:
        case TURNROW_TTFT_US:
        case TURNROW_LATENCY_US:
            b->integer(ctx, at, f[i]);
            break;
        default:
            b->string(ctx, at, f[i]);
        }
    }
    b->integer(ctx, seq_at, f[TURNROW_SEQ]);
}
