#include "rest.h"

#include "memory.h"
#include "respond.h"
#include "server.h"
#include "session.h"
#include "util.h"

#include <event2/buffer.h>
#include <ctype.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

#define REST_LIST_DEFAULT   50
#define REST_LIST_MAX       1000
#define REST_HISTORY_MAX    100000
#define REST_MAX_RUNTIME    64 /* runtime system messages */
#define REST_MAX_RUNTIME_SZ (32 * 1024)

/* The parts of a REST path: /{collection}/{id}/{action}. */
struct rest_path {
    int agents;         /* /agents/... (Agora's names) rather than /sessions/... */
    char *id;           /* decoded; NULL for the collection */
    const char *action; /* "", "history", "update", "stop", "leave" */
    size_t action_len;
};

/* A change waiting for its commit. */
struct rest_pending {
    struct worker *w;
    struct evhttp_request *req;
    char *tenant, *id;
    enum memory_change what;
};

int rest_match(const char *path, size_t len)
{
    return (len >= 9 && memcmp(path, "/sessions", 9) == 0 && (len == 9 || path[9] == '/')) ||
           (len > 8 && memcmp(path, "/agents/", 8) == 0);
}

static void rest_error(struct worker *w, struct evhttp_request *req, enum apierr_kind kind,
                       const char *param, const char *msg)
{
    struct apierr e;
    apierr_set(&e, kind, param, "%s", msg);
    respond_error(w, METRICS_ROUTE_REST, req, &e);
}

static void rest_json(struct worker *w, struct evhttp_request *req, int status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    respond_send(w, METRICS_ROUTE_REST, req, status, NULL, text, strlen(text));
    free(text);
    json_decref(body);
}

/* Split the path; -1 when it is not a route or its id is unusable. */
static int rest_parse(const char *path, size_t len, struct rest_path *p)
{
    memset(p, 0, sizeof(*p));
    p->agents = path[1] == 'a';
    const char *rest = path + (p->agents ? 8 : 9), *end = path + len;
    p->action = "";
    if (!p->agents && (rest == end || (rest + 1 == end && *rest == '/')))
        return 0; /* the collection */
    if (!p->agents)
        rest++; /* the '/' after "sessions" */
    const char *slash = memchr(rest, '/', (size_t)(end - rest));
    const char *id_end = slash ? slash : end;
    char *raw = xstrndup(rest, (size_t)(id_end - rest));
    size_t n = 0;
    p->id = evhttp_uridecode(raw, 0, &n);
    free(raw);
    if (p->id == NULL || !session_id_valid(p->id, n))
        return -1;
    if (slash != NULL) {
        p->action = slash + 1;
        p->action_len = (size_t)(end - slash - 1);
    }
    return 0;
}

static int rest_action_is(const struct rest_path *p, const char *name)
{
    return p->action_len == strlen(name) && memcmp(p->action, name, p->action_len) == 0;
}

/* ---- reads ---- */

/* A query parameter as a whole number in [1, max]; def when absent; -1 when bad. */
static long rest_limit(struct evkeyvalq *q, long def, long max)
{
    const char *v = evhttp_find_header(q, "limit");
    long long n = 0;
    if (v == NULL)
        return def;
    if (util_parse_ll(v, &n) != 0 || n < 1 || n > max)
        return -1;
    return (long)n;
}

/* One stored turn in Agora's history shape; full adds memproxy's own fields. */
static json_t *rest_content(json_t *t, int full)
{
    static const char *const extra[] = {"seq",     "turn_idx",   "tool_calls", "tool_call_id",
                                        "name",    "model",      "usage",      "finish_reason",
                                        "ttft_us", "latency_us", "importance"};
    json_t *meta = json_deep_copy(json_object_get(t, "metadata"));
    if (!json_is_object(meta)) {
        json_decref(meta);
        meta = json_object();
    }
    if (json_is_string(json_object_get(t, "source")))
        json_object_set(meta, "source", json_object_get(t, "source"));
    if (json_is_true(json_object_get(t, "interrupted"))) {
        json_object_set_new(meta, "interrupted", json_true());
        json_object_set(meta, "interrupt_timestamp", json_object_get(t, "interrupt_timestamp"));
        json_object_set(meta, "original", json_object_get(t, "original"));
    }
    json_t *c =
        json_pack("{s:O, s:O, s:O, s:O, s:o}", "role", json_object_get(t, "role"), "content",
                  json_object_get(t, "content"), "turn_id", json_object_get(t, "turn_id"),
                  "timestamp", json_object_get(t, "timestamp"), "metadata", meta);
    for (size_t i = 0; full && i < UTIL_ARRAY_LEN(extra); i++) {
        json_t *v = json_object_get(t, extra[i]);
        if (v != NULL)
            json_object_set(c, extra[i], v);
    }
    return c;
}

static void rest_history_text(struct worker *w, struct evhttp_request *req, json_t *turns)
{
    struct evbuffer *out = evbuffer_new();
    size_t i;
    json_t *t;
    json_array_foreach(turns, i, t)
    {
        char role[16] = "";
        snprintf(role, sizeof(role), "%s", json_string_value(json_object_get(t, "role")));
        for (char *r = role; *r; r++)
            *r = (char)toupper((unsigned char)*r);
        evbuffer_add_printf(out, "%s%s: %s", i ? "\n\n" : "", role,
                            json_string_value(json_object_get(t, "content")));
    }
    respond_send_buffer(w, METRICS_ROUTE_REST, req, 200, "text/plain; charset=utf-8", out);
    evbuffer_free(out);
}

static void rest_history(struct worker *w, struct evhttp_request *req, const char *tenant,
                         const char *id, struct evkeyvalq *q)
{
    const char *format = evhttp_find_header(q, "format");
    long limit = rest_limit(q, 0, REST_HISTORY_MAX);
    if (format == NULL)
        format = "standard";
    if (limit < 0) {
        rest_error(w, req, APIERR_INVALID_REQUEST, "limit",
                   "limit must be a whole number from 1 to 100000");
        return;
    }
    if (strcmp(format, "full") != 0 && strcmp(format, "standard") != 0 &&
        strcmp(format, "text") != 0) {
        rest_error(w, req, APIERR_INVALID_REQUEST, "format",
                   "format must be full, standard or text");
        return;
    }
    json_t *sess = memory_session(w->reader, tenant, id);
    if (sess == NULL) {
        rest_error(w, req, APIERR_NOT_FOUND, NULL, "no session with this id");
        return;
    }
    json_t *turns = memory_turns(w->reader, tenant, id, (size_t)limit);
    if (strcmp(format, "text") == 0) {
        rest_history_text(w, req, turns);
    } else {
        json_t *contents = json_array(), *t;
        size_t i;
        json_array_foreach(turns, i, t)
            json_array_append_new(contents, rest_content(t, format[0] == 'f'));
        json_int_t start = json_integer_value(json_object_get(sess, "created_ms")) / 1000;
        rest_json(w, req, 200,
                  json_pack("{s:s, s:I, s:O, s:o}", "agent_id", id, "start_ts", start, "status",
                            json_object_get(sess, "status"), "contents", contents));
    }
    json_decref(turns);
    json_decref(sess);
}

static void rest_list(struct worker *w, struct evhttp_request *req, const char *tenant,
                      struct evkeyvalq *q)
{
    const char *status = evhttp_find_header(q, "status");
    const char *cursor = evhttp_find_header(q, "cursor");
    long long before = 0;
    long limit = rest_limit(q, REST_LIST_DEFAULT, REST_LIST_MAX);
    const char *bad = NULL, *why = NULL;
    if (limit < 0)
        bad = "limit", why = "limit must be a whole number from 1 to 1000";
    else if (status != NULL && strcmp(status, "RUNNING") != 0 && strcmp(status, "STOPPED") != 0)
        bad = "status", why = "status must be RUNNING or STOPPED";
    else if (cursor != NULL && (util_parse_ll(cursor, &before) != 0 || before < 1))
        bad = "cursor", why = "cursor must be the next value of a previous page";
    if (bad != NULL) {
        rest_error(w, req, APIERR_INVALID_REQUEST, bad, why);
        return;
    }
    json_t *page = memory_sessions(w->reader, tenant, evhttp_find_header(q, "user_id"), status,
                                   before, (size_t)limit);
    json_t *next = json_object_get(page, "next");
    if (json_is_integer(next)) { /* an opaque string to the client */
        char buf[32];
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(next));
        json_object_set_new(page, "next", json_string(buf));
    }
    rest_json(w, req, 200, page);
}

/* The session without memproxy's internals. */
static json_t *rest_session_view(json_t *sess)
{
    json_object_del(sess, "tenant");
    json_object_del(sess, "window_hash");
    return sess;
}

/* ---- changes ---- */

static void rest_committed(void *arg, int ok)
{
    struct rest_pending *p = arg;
    struct worker *w = p->w;
    if (!ok) {
        rest_error(w, p->req, APIERR_NOT_FOUND, NULL, "no session with this id");
    } else if (p->what == MEMORY_DELETE) {
        rest_json(w, p->req, 200, json_pack("{s:s, s:b}", "id", p->id, "deleted", 1));
    } else {
        json_t *sess = memory_session(w->reader, p->tenant, p->id);
        if (sess == NULL)
            rest_error(w, p->req, APIERR_NOT_FOUND, NULL, "no session with this id");
        else
            rest_json(w, p->req, 200, rest_session_view(sess));
    }
    free(p->tenant);
    free(p->id);
    free(p);
    server_release(w);
}

/* Submit the change; the answer goes out from rest_committed(). Takes data. */
static void rest_change(struct worker *w, struct evhttp_request *req, const char *tenant,
                        const char *id, enum memory_change what, json_t *data)
{
    json_t *sess = memory_session(w->reader, tenant, id);
    if (sess == NULL) {
        json_decref(data);
        rest_error(w, req, APIERR_NOT_FOUND, NULL, "no session with this id");
        return;
    }
    json_decref(sess);
    struct rest_pending *p = xcalloc(1, sizeof(*p));
    *p = (struct rest_pending){.w = w, .req = req, .what = what};
    p->tenant = xstrdup(tenant);
    p->id = xstrdup(id);
    server_hold(w); /* a draining worker waits for the answer */
    memory_change(w->mem, tenant, id, what, data, w->base, rest_committed, p);
    json_decref(data);
}

/* The body as a JSON object, or NULL with the error sent. */
static json_t *rest_body(struct worker *w, struct evhttp_request *req, const struct route_ctx *rc)
{
    json_error_t jerr;
    json_t *b = rc->body ? json_loadb(rc->body, rc->body_len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (json_is_object(b))
        return b;
    json_decref(b);
    rest_error(w, req, rc->body ? APIERR_INVALID_JSON : APIERR_INVALID_REQUEST, NULL,
               "the body must be a JSON object");
    return NULL;
}

/* Agora's update body: properties.llm.system_messages, strings or {role, content}. */
static json_t *rest_runtime(json_t *body, struct apierr *e)
{
    json_t *sm = json_object_get(json_object_get(json_object_get(body, "properties"), "llm"),
                                 "system_messages");
    json_t *out = json_array(), *m;
    size_t i;
    if (!json_is_array(sm) || json_array_size(sm) > REST_MAX_RUNTIME) {
        apierr_set(e, APIERR_INVALID_REQUEST, "properties.llm.system_messages",
                   "properties.llm.system_messages must be an array of at most %d messages",
                   REST_MAX_RUNTIME);
        goto fail;
    }
    json_array_foreach(sm, i, m)
    {
        json_t *c = json_is_string(m) ? m : json_object_get(m, "content");
        if (!json_is_string(c) || json_string_length(c) > REST_MAX_RUNTIME_SZ) {
            apierr_set(e, APIERR_INVALID_REQUEST, "properties.llm.system_messages",
                       "system_messages[%zu] must be a string or {role, content} of at most "
                       "32 KiB of text",
                       i);
            goto fail;
        }
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "system", "content", c));
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* PATCH: labels and metadata objects, user_id a valid id; nothing else. */
static json_t *rest_patch(json_t *body, struct apierr *e)
{
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v)
    {
        int obj = strcmp(key, "labels") == 0 || strcmp(key, "metadata") == 0;
        int user = strcmp(key, "user_id") == 0;
        if ((obj && json_is_object(v)) ||
            (user && json_is_string(v) && json_string_length(v) >= 1 &&
             json_string_length(v) <= SESSION_MAX_ID))
            continue;
        apierr_set(e, APIERR_INVALID_REQUEST, key,
                   obj || user ? "%s has the wrong type"
                               : "%s cannot be changed (labels, metadata, user_id can)",
                   key);
        return NULL;
    }
    if (json_object_size(body) == 0) {
        apierr_set(e, APIERR_INVALID_REQUEST, NULL, "nothing to change");
        return NULL;
    }
    return json_incref(body);
}

static void rest_write(struct worker *w, struct evhttp_request *req, const struct route_ctx *rc,
                       const char *id, int update)
{
    struct apierr e;
    json_t *body = rest_body(w, req, rc);
    if (body == NULL)
        return;
    json_t *data = update ? rest_runtime(body, &e) : rest_patch(body, &e);
    json_decref(body);
    if (data == NULL) {
        respond_error(w, METRICS_ROUTE_REST, req, &e);
        return;
    }
    rest_change(w, req, rc->tenant, id, update ? MEMORY_RUNTIME : MEMORY_PATCH, data);
}

/* ---- dispatch ---- */

static void rest_method(struct worker *w, struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    rest_error(w, req, APIERR_METHOD, NULL, "this method is not allowed here");
}

static void rest_get_session(struct worker *w, struct evhttp_request *req, const char *tenant,
                             const char *id)
{
    json_t *sess = memory_session(w->reader, tenant, id);
    if (sess != NULL)
        rest_json(w, req, 200, rest_session_view(sess));
    else
        rest_error(w, req, APIERR_NOT_FOUND, NULL, "no session with this id");
}

/* A route on one session: its action (history, update, stop/leave) or the session itself. */
static void rest_one(struct worker *w, struct evhttp_request *req, const struct route_ctx *rc,
                     const struct rest_path *p, struct evkeyvalq *q)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *allow = "POST";
    if (rest_action_is(p, "history")) {
        allow = "GET";
        if (m == EVHTTP_REQ_GET)
            allow = NULL, rest_history(w, req, rc->tenant, p->id, q);
    } else if (rest_action_is(p, "update")) {
        if (m == EVHTTP_REQ_POST)
            allow = NULL, rest_write(w, req, rc, p->id, 1);
    } else if (rest_action_is(p, p->agents ? "leave" : "stop")) {
        if (m == EVHTTP_REQ_POST)
            allow = NULL, rest_change(w, req, rc->tenant, p->id, MEMORY_STOP, NULL);
    } else if (p->action_len > 0 || p->agents) {
        allow = NULL;
        rest_error(w, req, APIERR_NOT_FOUND, NULL, "no route for this path");
    } else {
        allow = "GET, PATCH, DELETE";
        if (m == EVHTTP_REQ_GET)
            allow = NULL, rest_get_session(w, req, rc->tenant, p->id);
        else if (m == EVHTTP_REQ_PATCH)
            allow = NULL, rest_write(w, req, rc, p->id, 0);
        else if (m == EVHTTP_REQ_DELETE)
            allow = NULL, rest_change(w, req, rc->tenant, p->id, MEMORY_DELETE, NULL);
    }
    if (allow != NULL)
        rest_method(w, req, allow);
}

void rest_handle(struct worker *w, struct evhttp_request *req, const char *path, size_t len,
                 const struct route_ctx *rc)
{
    struct rest_path p;
    struct evkeyvalq q;
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (evhttp_parse_query_str(query ? query : "", &q) != 0) { /* also initialises q */
        rest_error(w, req, APIERR_INVALID_REQUEST, NULL, "the query string is malformed");
        goto out;
    }
    if (rest_parse(path, len, &p) != 0) {
        rest_error(w, req, APIERR_NOT_FOUND, NULL,
                   "no session with this id (ids are 1 to 256 bytes without control characters)");
        free(p.id);
        goto out;
    }
    if (p.id == NULL) {
        if (evhttp_request_get_command(req) == EVHTTP_REQ_GET)
            rest_list(w, req, rc->tenant, &q);
        else
            rest_method(w, req, "GET");
    } else {
        rest_one(w, req, rc, &p, &q);
    }
    free(p.id);
out:
    evhttp_clear_headers(&q);
}
