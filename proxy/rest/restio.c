#include "proxy/rest/restio.h"

#include "base/jtext.h"
#include "base/util.h"
#include "memory/memory.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"

#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

/* A change waiting for its commit. */
struct restio_waiting {
    struct worker *w;
    struct evhttp_request *req;
    restio_answer_fn answer;
    char *scope, *id; /* copies of what restio_wait was given */
};

void restio_error(struct worker *w, struct evhttp_request *req, enum apierr_kind kind,
                  const char *param, const char *msg)
{
    struct apierr e;
    apierr_set(&e, kind, param, "%s", msg);
    respond_error(w, METRICS_ROUTE_REST, req, &e);
}

void restio_json(struct worker *w, struct evhttp_request *req, int status, json_t *body)
{
    size_t len = 0;
    char *text = jtext_dump(body, &len);
    respond_send(w, METRICS_ROUTE_REST, req, status, NULL, text, len);
    free(text);
    json_decref(body);
}

json_t *restio_body(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc)
{
    json_error_t jerr;
    json_t *b = rc->body ? jtext_load(rc->body, rc->body_len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (json_is_object(b))
        return b;
    struct apierr e;
    if (rc->body != NULL && b == NULL)
        apierr_json_syntax(&e, &jerr);
    else
        apierr_set(&e, rc->body ? APIERR_INVALID_JSON : APIERR_INVALID_REQUEST, NULL,
                   "the body must be a JSON object");
    json_decref(b);
    respond_error(w, METRICS_ROUTE_REST, req, &e);
    return NULL;
}

void restio_page_cursor(json_t *page)
{
    json_t *next = json_object_get(page, "next");
    if (json_is_integer(next)) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(next));
        json_object_set_new(page, "next", json_string(buf));
    }
}

void restio_method(struct worker *w, struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    restio_error(w, req, APIERR_METHOD, NULL, "this method is not allowed here");
}

void *restio_wait(struct worker *w, struct evhttp_request *req, restio_answer_fn answer,
                  const char *scope, const char *id)
{
    struct restio_waiting *p = xcalloc(1, sizeof(*p));
    *p = (struct restio_waiting){.w = w, .req = req, .answer = answer};
    p->scope = scope ? xstrdup(scope) : NULL;
    p->id = id ? xstrdup(id) : NULL;
    worker_hold(w);
    return p;
}

void restio_waited(void *arg, int ok)
{
    struct restio_waiting *p = arg;
    struct worker *w = p->w;
    p->answer(w, p->req, ok, p->scope, p->id);
    free(p->scope);
    free(p->id);
    free(p);
    worker_release(w);
}

/* ---- reads off the loop ---- */

struct restio_reading {
    struct restread rr;
    restread_fn read;
    restread_then then;
};

struct restread *restio_read_new(struct worker *w, struct evhttp_request *req, const char *tenant,
                                 const char *id)
{
    struct restio_reading *x = xcalloc(1, sizeof(*x));
    x->rr.w = w;
    x->rr.req = req;
    x->rr.tenant = tenant ? xstrdup(tenant) : NULL;
    x->rr.id = id ? xstrdup(id) : NULL;
    return &x->rr;
}

static void restio_read_run(struct memory_reader *r, void *arg)
{
    struct restio_reading *x = arg;
    x->read(r, &x->rr);
}

/* A read that went unanswered (PostgreSQL unreachable) looks like "nothing there": the
 * answer then() would build from it (a 404, an empty page) must not go out as if it were
 * true. */
static void restio_read_done(void *arg, int failed)
{
    struct restio_reading *x = arg;
    struct restread *rr = &x->rr;
    if (failed)
        restio_error(rr->w, rr->req, APIERR_STORAGE, NULL, "the database did not answer; retry");
    else
        x->then(rr);
    free(rr->tenant);
    free(rr->id);
    free(rr->text);
    json_decref(rr->data);
    json_decref(rr->got);
    json_decref(rr->more);
    free(x);
}

void restio_read(struct restread *rr, restread_fn read, restread_then then)
{
    struct restio_reading *x = (struct restio_reading *)rr; /* rr is its first member */
    x->read = read;
    x->then = then;
    worker_read(rr->w, restio_read_run, restio_read_done, x);
}
