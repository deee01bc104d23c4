#include "memory/turnrow.h"

json_t *turnrow_json(turnrow_col_fn col, void *row)
{
    static const char *const names[TURNROW_COLUMNS] = {
        "seq",      "turn_id",       "turn_idx",    "role",
        "content",  "source",        "interrupted", "interrupt_timestamp",
        "original", "metadata",      "tool_calls",  "tool_call_id",
        "name",     "timestamp",     "importance",  "model",
        "usage",    "finish_reason", "ttft_us",     "latency_us"};
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
