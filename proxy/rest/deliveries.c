#include "proxy/rest/deliveries.h"

#include "base/util.h"
#include "memory/memory.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/hook.h"
#include "proxy/rest/restio.h"

#include <event2/keyvalq_struct.h>
#include <string.h>

#define DELIVERIES_DEFAULT 50
#define DELIVERIES_MAX     1000

/* The tenant's delivery by notice id (rr->id) into rr->got, or NULL. */
static void deliveries_read_one(struct memory_reader *r, struct restread *rr)
{
    json_t *page = memory_deliveries(r, rr->tenant, NULL, NULL, rr->id, 0, 1);
    rr->got = json_incref(json_array_get(json_object_get(page, "deliveries"), 0));
    json_decref(page);
}

static void deliveries_read_list(struct memory_reader *r, struct restread *rr)
{
    rr->got = memory_deliveries(r, rr->tenant, rr->lit, rr->text, NULL, rr->before, (size_t)rr->n);
}

static void deliveries_list_then(struct restread *rr)
{
    restio_page_cursor(rr->got);
    restio_json(rr->w, rr->req, 200, json_incref(rr->got));
}

/* A status filter as one of the constants it may be, or NULL when it is none of them. */
static const char *deliveries_status(const char *status)
{
    static const char *const known[] = {"pending", "delivered", "failed"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(status, known[i]) == 0)
            return known[i];
    return NULL;
}

static void deliveries_list(struct worker *w, struct evhttp_request *req, const char *tenant,
                            struct evkeyvalq *q)
{
    const char *status = evhttp_find_header(q, "status");
    const char *sid = NULL;
    long limit = restpath_limit(q, DELIVERIES_DEFAULT, DELIVERIES_MAX);
    long long before = restpath_cursor(q);
    if (limit < 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "limit",
                     "limit must be a whole number from 1 to 1000");
    } else if (status != NULL && deliveries_status(status) == NULL) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "status",
                     "status must be pending, delivered or failed");
    } else if (before < 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "cursor",
                     "cursor must be the next value of a previous page");
    } else if (restpath_query_id(q, "session_id", &sid) != 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "session_id",
                     "session_id must be 1 to 256 bytes of UTF-8 text");
    } else {
        struct restread *rr = restio_read_new(w, req, tenant, NULL);
        rr->lit = status ? deliveries_status(status) : NULL;
        rr->text = sid ? xstrdup(sid) : NULL;
        rr->before = before;
        rr->n = limit;
        restio_read(rr, deliveries_read_list, deliveries_list_then);
    }
}

/* After the retry's commit (rr->flag: it went through): the delivery as it is now. */
static void deliveries_retried_then(struct restread *rr)
{
    /* the retry fails when the row is delivered by then, or when the commit failed */
    const char *status = json_string_value(json_object_get(rr->got, "status"));
    if (rr->got == NULL) {
        restio_error(rr->w, rr->req, APIERR_NOT_FOUND, NULL, "no delivery with this id");
    } else if (!rr->flag && strcmp(status, "delivered") == 0) {
        restio_error(rr->w, rr->req, APIERR_CONFLICT, NULL,
                     "this delivery was delivered meanwhile");
    } else if (!rr->flag) {
        restio_error(rr->w, rr->req, APIERR_STORAGE, NULL, "the retry could not be stored; retry");
    } else {
        hook_wake(rr->w->hooks);
        restio_json(rr->w, rr->req, 200, json_incref(rr->got));
    }
}

static void deliveries_answer_retry(struct worker *w, struct evhttp_request *req, int ok,
                                    const char *tenant, const char *notice)
{
    struct restread *rr = restio_read_new(w, req, tenant, notice);
    rr->flag = ok;
    restio_read(rr, deliveries_read_one, deliveries_retried_then);
}

static void deliveries_retry_then(struct restread *rr)
{
    struct worker *w = rr->w;
    const char *status = json_string_value(json_object_get(rr->got, "status"));
    if (rr->got == NULL)
        restio_error(w, rr->req, APIERR_NOT_FOUND, NULL, "no delivery with this id");
    else if (strcmp(status, "delivered") == 0)
        restio_error(w, rr->req, APIERR_CONFLICT, NULL, "this delivery was delivered already");
    else
        memory_delivery_retry(w->mem, rr->tenant, rr->id, w->base, restio_waited,
                              restio_wait(w, rr->req, deliveries_answer_retry, rr->tenant, rr->id));
}

static void deliveries_get_then(struct restread *rr)
{
    if (rr->got != NULL)
        restio_json(rr->w, rr->req, 200, json_incref(rr->got));
    else
        restio_error(rr->w, rr->req, APIERR_NOT_FOUND, NULL, "no delivery with this id");
}

void deliveries_handle(struct worker *w, struct evhttp_request *req, const struct restpath *p,
                       const struct request_ctx *rc, struct evkeyvalq *q)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (p->id == NULL && m == EVHTTP_REQ_GET)
        deliveries_list(w, req, rc->tenant, q);
    else if (p->id == NULL)
        restio_method(w, req, "GET");
    else if (p->action_len == 0 && m == EVHTTP_REQ_GET)
        restio_read(restio_read_new(w, req, rc->tenant, p->id), deliveries_read_one,
                    deliveries_get_then);
    else if (p->action_len == 0)
        restio_method(w, req, "GET");
    else if (!restpath_action_is(p, "retry"))
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no route for this path");
    else if (m == EVHTTP_REQ_POST)
        restio_read(restio_read_new(w, req, rc->tenant, p->id), deliveries_read_one,
                    deliveries_retry_then);
    else
        restio_method(w, req, "POST");
}
