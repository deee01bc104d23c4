/*
 * pgsql_conn: what the PostgreSQL backend (pgsql.h) does with libpq, in one place: connecting
 * (and connecting again after the server went away), parameters built from turns' JSON, one
 * statement run and its result turned back into JSON.
 *
 * Every statement goes out with PQexecParams (the extended protocol's unnamed statement):
 * nothing outlives a transaction on the server (no SQL PREPARE, no session settings, no
 * session advisory locks), so memproxy runs behind PgBouncer in transaction pooling.
 *
 * Ownership: pgsql_conn_open() returns a connection closed with pgsql_conn_close(); a
 * struct pgsql_params owns the text it was given through pgsql_param_json() until
 * pgsql_params_clear(); results are the caller's (PQclear).
 */
#ifndef MEMPROXY_PGSQL_CONN_H
#define MEMPROXY_PGSQL_CONN_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#define PGSQL_MAX_PARAMS     24
#define PGSQL_MAX_STATEMENTS 128 /* ids of the statements a connection may prepare */

/* A statement's parameters $1..$n: text, except pgsql_param_blob's (binary bytea). */
struct pgsql_params {
    int n;
    const char *v[PGSQL_MAX_PARAMS];
    int len[PGSQL_MAX_PARAMS], fmt[PGSQL_MAX_PARAMS];
    char num[PGSQL_MAX_PARAMS][32];
    char *owned[PGSQL_MAX_PARAMS];
};

struct pgsql_conn;

/* How memproxy connects (PQconnectdbParams' keys and values, expand_dbname 1): url, with
 * statement_timeout_ms (0: the server's) unless url sets options itself, and UTF-8. */
struct pgsql_conn_params {
    const char *keys[9], *vals[9];
    char options[64];
};
void pgsql_conn_params(struct pgsql_conn_params *cp, const char *url, long statement_timeout_ms);
/* Then to t's lists (pgsql_resolve.h: the host names looked up already) over url's own. */
struct pgsql_target;
void pgsql_conn_params_to(struct pgsql_conn_params *cp, const struct pgsql_target *t);

/* Connect to url (a libpq connection string or URI) with statement_timeout_ms on every
 * statement (0: the server's). NULL with *err set when the server cannot be reached. */
struct pgsql_conn *pgsql_conn_open(const char *url, long statement_timeout_ms, char **err);
/* The same, connected by its first statement (pgsql_conn_exec*), not now: a reader that may
 * never be used (a worker's, whose reads go elsewhere on PostgreSQL) holds no server
 * connection. A failed connect fails that statement; the next one tries again. */
struct pgsql_conn *pgsql_conn_lazy(const char *url, long statement_timeout_ms);
void pgsql_conn_close(struct pgsql_conn *c);
PGconn *pgsql_conn_pg(struct pgsql_conn *c);

/*
 * Run sql with p (NULL: no parameters). The result when the server answered with rows or a
 * command's completion; NULL (logged, with the server's message in *why when why is given)
 * on failure. A connection found broken is connected again before the next statement (not
 * inside a transaction: the transaction failed with it).
 */
PGresult *pgsql_conn_exec(struct pgsql_conn *c, const char *sql, struct pgsql_params *p);
/* The same for statement id (0 to PGSQL_MAX_STATEMENTS - 1; -1: none) whose text is sql:
 * with named statements on, it is prepared on the connection the first time and executed
 * by name after, so the server parses and plans it once a session (measured: parse and bind
 * were ~60% of the server's time for a call's turn). */
PGresult *pgsql_conn_exec_id(struct pgsql_conn *c, int id, const char *sql, struct pgsql_params *p);
/* Named statements on this connection (storage.prepared_statements): protocol-level ones
 * (PQprepare, never SQL PREPARE), which PgBouncer's transaction pooling keeps apart from
 * 1.21 on (max_prepared_statements); off, every statement is the unnamed one. */
void pgsql_conn_set_prepare(struct pgsql_conn *c, int on);
/* Connect again now (a connection left in a state not to be trusted). */
void pgsql_conn_reset(struct pgsql_conn *c);
/* Prepare statement id (sql) now unless it is: 1 with its name in name, 0 when named
 * statements are off or it failed (use the text). */
int pgsql_conn_prepare(struct pgsql_conn *c, int id, const char *sql, char name[16]);
/* Run sql and throw the result away: 0, or -1 on failure. */
int pgsql_conn_run(struct pgsql_conn *c, const char *sql, struct pgsql_params *p);
/* The last failure's message (the server's, or libpq's), valid until the next statement. */
const char *pgsql_conn_error(struct pgsql_conn *c);
/* Statements that failed because the server could not be reached, since open. */
int pgsql_conn_broken(struct pgsql_conn *c);

/* The rows a command changed (PQcmdTuples). */
int64_t pgsql_changes(PGresult *r);

void pgsql_params_init(struct pgsql_params *p);
void pgsql_params_clear(struct pgsql_params *p);
/* dst (uninitialised) becomes a copy of src that owns all its values. */
void pgsql_params_copy(struct pgsql_params *dst, const struct pgsql_params *src);
/* $i = ... (1-based, as in the SQL). NULL (or a JSON value of another type) binds NULL. */
void pgsql_param_text(struct pgsql_params *p, int i, const char *s);
void pgsql_param_int(struct pgsql_params *p, int i, int64_t v);
void pgsql_param_double(struct pgsql_params *p, int i, double v);
void pgsql_param_bool(struct pgsql_params *p, int i, int v);
void pgsql_param_blob(struct pgsql_params *p, int i, const void *data, size_t len);
void pgsql_param_jtext(struct pgsql_params *p, int i, json_t *v); /* a JSON string */
void pgsql_param_jint(struct pgsql_params *p, int i, json_t *v);  /* a JSON integer */
void pgsql_param_json(struct pgsql_params *p, int i, json_t *v);  /* an object or array as text */

/* Column col of row as JSON by its type: bigint/integer → integer, double → real, boolean,
 * NULL → null, text → string, or the JSON it holds when as_json (null when it holds none). */
json_t *pgsql_value(PGresult *r, int row, int col, int as_json);
int64_t pgsql_int(PGresult *r, int row, int col); /* 0 when NULL */

#endif
