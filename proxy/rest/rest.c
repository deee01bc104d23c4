#include "proxy/rest/rest.h"

#include "base/jtext.h"
#include "base/util.h"
#include "memory/history.h"
#include "memory/memory.h"
#include "memory/snapshot.h"
#include "proxy/chat/session.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/lifecycle.h"
#include "proxy/rest/deliveries.h"
#include "proxy/rest/restio.h"
#include "proxy/rest/restpath.h"
#include "proxy/rest/users.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

#define REST_LIST_DEFAULT   50
#define REST_LIST_MAX       1000
#define REST_HISTORY_MAX    100000
#define REST_MAX_RUNTIME    64 /* runtime system messages */
#define REST_MAX_RUNTIME_SZ (32 * 1024)
#define REST_MAX_PARAMS_SZ  (16 * 1024)

int rest_match(const char *path, size_t len)
{
    struct restpath p;
    int rc = restpath_parse(path, len, &p);
    restpath_clear(&p);
    return rc != RESTPATH_NO_ROUTE;
}

/* ---- sessions: reads ---- */

/* A turn's tool calls in a text transcript: "[calls name(arguments)]" each, after what was
 * said (said: some text came before on its line). A turn that only calls tools says nothing,
 * and read alone said nothing at all. */
static void rest_text_calls(struct evbuffer *out, json_t *t, int said)
{
    size_t i;
    json_t *call;
    json_array_foreach(json_object_get(t, "tool_calls"), i, call) {
        json_t *fn = json_object_get(call, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        evbuffer_add_printf(out, "%s[calls %s(%s)]", said || i ? " " : "", name ? name : "?",
                            args ? args : "");
    }
}

static void rest_history_text(struct worker *w, struct evhttp_request *req, json_t *turns)
{
    struct evbuffer *out = evbuffer_new();
    size_t i;
    json_t *t;
    json_array_foreach(turns, i, t) {
        char role[16] = "";
        snprintf(role, sizeof(role), "%s", json_string_value(json_object_get(t, "role")));
        for (char *r = role; *r; r++)
            *r = (char)toupper((unsigned char)*r);
        const char *content = json_string_value(json_object_get(t, "content"));
        evbuffer_add_printf(out, "%s%s: %s", i ? "\n\n" : "", role, content ? content : "");
        rest_text_calls(out, t, content != NULL && *content != '\0');
    }
    respond_send_buffer(w, METRICS_ROUTE_REST, req, 200, "text/plain; charset=utf-8", out);
    evbuffer_free(out);
}

enum { REST_STANDARD, REST_FULL, REST_TEXT }; /* a history's format (restread.flag) */

static void rest_read_history(struct memory_reader *r, struct restread *rr)
{
    rr->got = memory_session(r, rr->tenant, rr->id);
    if (rr->got != NULL)
        rr->more = memory_turns(r, rr->tenant, rr->id, (size_t)rr->n);
}

static void rest_history_then(struct restread *rr)
{
    if (rr->got == NULL)
        restio_error(rr->w, rr->req, APIERR_NOT_FOUND, NULL, "no session with this id");
    else if (rr->flag == REST_TEXT)
        rest_history_text(rr->w, rr->req, rr->more);
    else
        restio_json(rr->w, rr->req, 200, history_object(rr->got, rr->more, rr->flag == REST_FULL));
}

static void rest_history(struct worker *w, struct evhttp_request *req, const char *tenant,
                         const char *id, struct evkeyvalq *q)
{
    const char *format = evhttp_find_header(q, "format");
    long limit = restpath_limit(q, 0, REST_HISTORY_MAX);
    if (format == NULL)
        format = "standard";
    if (limit < 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "limit",
                     "limit must be a whole number from 1 to 100000");
        return;
    }
    if (strcmp(format, "full") != 0 && strcmp(format, "standard") != 0 &&
        strcmp(format, "text") != 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "format",
                     "format must be full, standard or text");
        return;
    }
    struct restread *rr = restio_read_new(w, req, tenant, id);
    rr->n = limit;
    rr->flag = format[0] == 'f' ? REST_FULL : format[0] == 't' ? REST_TEXT : REST_STANDARD;
    restio_read(rr, rest_read_history, rest_history_then);
}

static void rest_read_list(struct memory_reader *r, struct restread *rr)
{
    rr->got = memory_sessions(r, rr->tenant, rr->text, rr->lit, rr->before, (size_t)rr->n);
}

static void rest_list_then(struct restread *rr)
{
    restio_page_cursor(rr->got);
    restio_json(rr->w, rr->req, 200, json_incref(rr->got));
}

static void rest_list(struct worker *w, struct evhttp_request *req, const char *tenant,
                      struct evkeyvalq *q)
{
    const char *status = evhttp_find_header(q, "status");
    long long before = restpath_cursor(q);
    long limit = restpath_limit(q, REST_LIST_DEFAULT, REST_LIST_MAX);
    const char *bad = NULL, *why = NULL, *user = NULL;
    if (limit < 0)
        bad = "limit", why = "limit must be a whole number from 1 to 1000";
    else if (restpath_query_id(q, "user_id", &user) != 0)
        bad = "user_id", why = "user_id must be 1 to 256 bytes of UTF-8 text";
    else if (status != NULL && strcmp(status, "RUNNING") != 0 && strcmp(status, "STOPPED") != 0)
        bad = "status", why = "status must be RUNNING or STOPPED";
    else if (before < 0)
        bad = "cursor", why = "cursor must be the next value of a previous page";
    if (bad != NULL) {
        restio_error(w, req, APIERR_INVALID_REQUEST, bad, why);
        return;
    }
    struct restread *rr = restio_read_new(w, req, tenant, NULL);
    rr->text = user ? xstrdup(user) : NULL;
    rr->lit = status == NULL ? NULL : status[0] == 'R' ? "RUNNING" : "STOPPED";
    rr->before = before;
    rr->n = limit;
    restio_read(rr, rest_read_list, rest_list_then);
}

/* The session without memproxy's internals. */
static json_t *rest_session_view(json_t *sess)
{
    json_object_del(sess, "tenant");
    json_object_del(sess, "window_hash");
    json_object_del(sess, "window_turns");
    return sess;
}

/* body (taken) with 200, or the session's 404 when it is NULL. */
static void rest_found(struct worker *w, struct evhttp_request *req, json_t *body)
{
    if (body != NULL)
        restio_json(w, req, 200, body);
    else
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no session with this id");
}

static void rest_read_session(struct memory_reader *r, struct restread *rr)
{
    rr->got = memory_session(r, rr->tenant, rr->id);
}

static void rest_get_session_then(struct restread *rr)
{
    rest_found(rr->w, rr->req, rr->got ? rest_session_view(json_incref(rr->got)) : NULL);
}

static void rest_get_session(struct worker *w, struct evhttp_request *req, const char *tenant,
                             const char *id)
{
    restio_read(restio_read_new(w, req, tenant, id), rest_read_session, rest_get_session_then);
}

static void rest_read_export(struct memory_reader *r, struct restread *rr)
{
    rr->got = memory_export(r, rr->tenant, rr->id);
}

static void rest_export_then(struct restread *rr)
{
    rest_found(rr->w, rr->req, json_incref(rr->got));
}

static void rest_export(struct worker *w, struct evhttp_request *req, const char *tenant,
                        const char *id)
{
    restio_read(restio_read_new(w, req, tenant, id), rest_read_export, rest_export_then);
}

/* ---- sessions: changes ---- */

/* After a change of session b (tenant a): the session as it is now. */
static void rest_answer_session(struct worker *w, struct evhttp_request *req, int ok,
                                const char *tenant, const char *id)
{
    if (ok) /* a session deleted meanwhile is a 404 there */
        rest_get_session(w, req, tenant, id);
    else
        restio_error(w, req, APIERR_STORAGE, NULL, "the change could not be stored; retry");
}

static void rest_answer_deleted(struct worker *w, struct evhttp_request *req, int ok,
                                const char *tenant, const char *id)
{
    (void)tenant;
    if (ok)
        restio_json(w, req, 200, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
    else
        restio_error(w, req, APIERR_STORAGE, NULL, "the deletion could not be stored; retry");
}

static void rest_imported_then(struct restread *rr)
{
    if (rr->got == NULL)
        restio_error(rr->w, rr->req, APIERR_CONFLICT, "session.id",
                     "a session with this id was created meanwhile");
    else
        restio_json(rr->w, rr->req, 201, rest_session_view(json_incref(rr->got)));
}

static void rest_answer_imported(struct worker *w, struct evhttp_request *req, int ok,
                                 const char *tenant, const char *id)
{
    if (!ok)
        restio_error(w, req, APIERR_STORAGE, NULL, "the import could not be stored; retry");
    else
        restio_read(restio_read_new(w, req, tenant, id), rest_read_session, rest_imported_then);
}

/* The session exists (rr->got): its change (rr->flag, rr->data) goes to the writer. */
static void rest_change_then(struct restread *rr)
{
    struct worker *w = rr->w;
    enum memory_change what = (enum memory_change)rr->flag;
    if (rr->got == NULL) {
        restio_error(w, rr->req, APIERR_NOT_FOUND, NULL, "no session with this id");
        return;
    }
    void *p =
        restio_wait(w, rr->req, what == MEMORY_DELETE ? rest_answer_deleted : rest_answer_session,
                    rr->tenant, rr->id);
    if (what == MEMORY_STOP)
        lifecycle_stop(w, rr->tenant, rr->id,
                       json_string_value(json_object_get(rr->got, "profile")), 0, restio_waited, p);
    else
        memory_change(w->mem, rr->tenant, rr->id, what, rr->data, w->base, restio_waited, p);
}

/* Submit the change to a session that exists; the answer goes out once committed. Takes
 * data. */
static void rest_change(struct worker *w, struct evhttp_request *req, const char *tenant,
                        const char *id, enum memory_change what, json_t *data)
{
    struct restread *rr = restio_read_new(w, req, tenant, id);
    rr->flag = (int)what;
    rr->data = data;
    restio_read(rr, rest_read_session, rest_change_then);
}

/* Agora's update body: properties.llm.system_messages (strings or {role, content}) and/or
 * properties.llm.params (an object). */
static json_t *rest_runtime(json_t *body, struct apierr *e)
{
    json_t *llm = json_object_get(json_object_get(body, "properties"), "llm");
    json_t *sm = json_object_get(llm, "system_messages"), *params = json_object_get(llm, "params");
    json_t *out = json_object(), *m;
    size_t i;
    if ((sm == NULL && params == NULL) || (sm != NULL && !json_is_array(sm)) ||
        json_array_size(sm) > REST_MAX_RUNTIME) {
        apierr_set(e, APIERR_INVALID_REQUEST, "properties.llm.system_messages",
                   "properties.llm needs system_messages (an array of at most %d messages) "
                   "and/or params (an object)",
                   REST_MAX_RUNTIME);
        goto fail;
    }
    if (sm != NULL) /* absent: the session's are kept */
        json_object_set_new(out, "system_messages", json_array());
    json_array_foreach(sm, i, m) {
        json_t *c = json_is_string(m) ? m : json_object_get(m, "content");
        if (!json_is_string(c) || json_string_length(c) > REST_MAX_RUNTIME_SZ) {
            apierr_set(e, APIERR_INVALID_REQUEST, "properties.llm.system_messages",
                       "system_messages[%zu] must be a string or {role, content} of at most "
                       "32 KiB of text",
                       i);
            goto fail;
        }
        json_array_append_new(json_object_get(out, "system_messages"),
                              json_pack("{s:s, s:O}", "role", "system", "content", c));
    }
    if (params != NULL) {
        char *text = json_is_object(params) ? jtext_dump(params, NULL) : NULL;
        size_t n = text ? strlen(text) : 0;
        free(text);
        if (!json_is_object(params) || n > REST_MAX_PARAMS_SZ) {
            apierr_set(e, APIERR_INVALID_REQUEST, "properties.llm.params",
                       "properties.llm.params must be an object of at most 16 KiB");
            goto fail;
        }
        json_object_set(out, "params", params);
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
    json_object_foreach(body, key, v) {
        int obj = strcmp(key, "labels") == 0 || strcmp(key, "metadata") == 0;
        int user = strcmp(key, "user_id") == 0;
        if ((obj && json_is_object(v)) ||
            (user && json_is_string(v) &&
             util_id_valid(json_string_value(v), json_string_length(v))))
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

static void rest_write(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc,
                       const char *id, int update)
{
    struct apierr e;
    json_t *body = restio_body(w, req, rc);
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

/* No session has the snapshot's id (rr->data): it goes to the writer. */
static void rest_import_then(struct restread *rr)
{
    struct worker *w = rr->w;
    if (rr->got != NULL)
        restio_error(w, rr->req, APIERR_CONFLICT, "session.id",
                     "a session with this id exists; delete it first to restore the snapshot");
    else
        memory_import(w->mem, rr->tenant, rr->data, w->base, restio_waited,
                      restio_wait(w, rr->req, rest_answer_imported, rr->tenant, rr->id));
}

/* POST /sessions/import: a snapshot from GET /sessions/{id}/export. */
static void rest_import(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc)
{
    char *why = NULL;
    json_t *snap = restio_body(w, req, rc);
    if (snap == NULL)
        return;
    const char *id = json_string_value(json_object_get(json_object_get(snap, "session"), "id"));
    if (snapshot_check(snap, &why) != 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, NULL, why);
        json_decref(snap);
    } else {
        struct restread *rr = restio_read_new(w, req, rc->tenant, id);
        rr->data = snap;
        restio_read(rr, rest_read_session, rest_import_then);
    }
    free(why);
}

/* ---- dispatch ---- */

/* A route on one session: its action or the session itself. */
static void rest_one(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc,
                     const struct restpath *p, struct evkeyvalq *q)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *allow = "POST";
    if (restpath_action_is(p, "history")) {
        allow = "GET";
        if (m == EVHTTP_REQ_GET)
            allow = NULL, rest_history(w, req, rc->tenant, p->id, q);
    } else if (restpath_action_is(p, "update")) {
        if (m == EVHTTP_REQ_POST)
            allow = NULL, rest_write(w, req, rc, p->id, 1);
    } else if (restpath_action_is(p, (p->area == RESTPATH_AGENTS) ? "leave" : "stop")) {
        if (m == EVHTTP_REQ_POST)
            allow = NULL, rest_change(w, req, rc->tenant, p->id, MEMORY_STOP, NULL);
    } else if (!(p->area == RESTPATH_AGENTS) && restpath_action_is(p, "export")) {
        allow = "GET";
        if (m == EVHTTP_REQ_GET)
            allow = NULL, rest_export(w, req, rc->tenant, p->id);
    } else if (p->action_len > 0 || (p->area == RESTPATH_AGENTS)) {
        allow = NULL;
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no route for this path");
    } else if (strcmp(p->id, "import") == 0) {
        if (m == EVHTTP_REQ_POST)
            allow = NULL, rest_import(w, req, rc);
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
        restio_method(w, req, allow);
}

/* The session routes: the collection or one session. */
static void rest_sessions(struct worker *w, struct evhttp_request *req, const struct restpath *p,
                          const struct request_ctx *rc, struct evkeyvalq *q)
{
    if (p->id != NULL)
        rest_one(w, req, rc, p, q);
    else if (evhttp_request_get_command(req) == EVHTTP_REQ_GET)
        rest_list(w, req, rc->tenant, q);
    else
        restio_method(w, req, "GET");
}

void rest_handle(struct worker *w, struct evhttp_request *req, const char *path, size_t len,
                 const struct request_ctx *rc)
{
    static const char *const no_such[] = {
        [RESTPATH_SESSIONS] = "no session with this id",
        [RESTPATH_AGENTS] = "no session with this id",
        [RESTPATH_USERS] = "no user with this id",
        [RESTPATH_DELIVERIES] = "no delivery with this id",
    };
    struct evkeyvalq q;
    struct restpath p;
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    int rc_path = restpath_parse(path, len, &p);
    char *why = NULL;
    if (evhttp_parse_query_str(query ? query : "", &q) != 0) { /* also initialises q */
        restio_error(w, req, APIERR_INVALID_REQUEST, NULL, "the query string is malformed");
    } else if (rc_path == RESTPATH_NO_ROUTE) {
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no route for this path");
    } else if (rc_path == RESTPATH_BAD_ID) {
        why = xasprintf("%s (ids are 1 to %d bytes of UTF-8 text without control characters)",
                        no_such[p.area], UTIL_MAX_ID);
        restio_error(w, req, APIERR_NOT_FOUND, NULL, why);
    } else if (p.area == RESTPATH_USERS) {
        users_handle(w, req, &p, rc);
    } else if (p.area == RESTPATH_DELIVERIES) {
        deliveries_handle(w, req, &p, rc, &q);
    } else {
        rest_sessions(w, req, &p, rc, &q);
    }
    free(why);
    restpath_clear(&p);
    evhttp_clear_headers(&q);
}
