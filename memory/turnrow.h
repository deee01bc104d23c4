/*
 * turnrow: a stored turn's row as the JSON memory/reconcile.h describes, the same for every
 * backend (sqlite_read.c, pgsql_read.c): the columns each backend selects in this order
 * (STORE_TURN_COLS in their schemas), read through the backend's own column getter.
 */
#ifndef MEMPROXY_TURNROW_H
#define MEMPROXY_TURNROW_H

#include <jansson.h>

#define TURNROW_COLUMNS 20

/* Column i of the row as JSON (null when NULL), its text decoded as JSON when as_json. */
typedef json_t *(*turnrow_col_fn)(void *row, int i, int as_json);

/* The turn (a new object): the tool and reply fields only when they hold a value, interrupted
 * as a boolean. */
json_t *turnrow_json(turnrow_col_fn col, void *row);

#endif
