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

/* The tenant's delivery by notice id, or NULL. */
static json_t *deliveries_one(struct worker *w, const char *tenant, const char *notice)
{
    json_t *page = memory_deliveries(w->reader, tenant, NULL, NULL, notice, 0, 1);
    json_t *d = json_incref(json_array_get(json_object_get(page, "deliveries"), 0));
    json_decref(page);
    return d;
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
    } else if (status != NULL && strcmp(status, "pending") != 0 &&
               strcmp(status, "delivered") != 0 && strcmp(status, "failed") != 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "status",
                     "status must be pending, delivered or failed");
    } else if (before < 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "cursor",
                     "cursor must be the next value of a previous page");
    } else if (restpath_query_id(q, "session_id", &sid) != 0) {
        restio_error(w, req, APIERR_INVALID_REQUEST, "session_id",
                     "session_id must be 1 to 256 bytes of UTF-8 text");
    } else {
        json_t *page =
            memory_deliveries(w->reader, tenant, status, sid, NULL, before, (size_t)limit);
        restio_page_cursor(page);
        restio_json(w, req, 200, page);
    }
}

static void deliveries_answer_retry(struct worker *w, struct evhttp_request *req, int ok,
                                    const char *tenant, const char *notice)
{
    /* the retry fails when the row is delivered by then, or when the commit failed */
    json_t *d = deliveries_one(w, tenant, notice);
    const char *status = json_string_value(json_object_get(d, "status"));
    if (d == NULL) {
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no delivery with this id");
    } else if (!ok && strcmp(status, "delivered") == 0) {
        restio_error(w, req, APIERR_CONFLICT, NULL, "this delivery was delivered meanwhile");
    } else if (!ok) {
        restio_error(w, req, APIERR_STORAGE, NULL, "the retry could not be stored; retry");
    } else {
        hook_wake(w->hooks);
        restio_json(w, req, 200, json_incref(d));
    }
    json_decref(d);
}

static void deliveries_retry(struct worker *w, struct evhttp_request *req, const char *tenant,
                             const char *notice)
{
    json_t *d = deliveries_one(w, tenant, notice);
    const char *status = json_string_value(json_object_get(d, "status"));
    if (d == NULL)
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no delivery with this id");
    else if (strcmp(status, "delivered") == 0)
        restio_error(w, req, APIERR_CONFLICT, NULL, "this delivery was delivered already");
    else
        memory_delivery_retry(w->mem, tenant, notice, w->base, restio_waited,
                              restio_wait(w, req, deliveries_answer_retry, tenant, notice));
    json_decref(d);
}

static void deliveries_get(struct worker *w, struct evhttp_request *req, const char *tenant,
                           const char *notice)
{
    json_t *d = deliveries_one(w, tenant, notice);
    if (d != NULL)
        restio_json(w, req, 200, d);
    else
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no delivery with this id");
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
        deliveries_get(w, req, rc->tenant, p->id);
    else if (p->action_len == 0)
        restio_method(w, req, "GET");
    else if (!restpath_action_is(p, "retry"))
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no route for this path");
    else if (m == EVHTTP_REQ_POST)
        deliveries_retry(w, req, rc->tenant, p->id);
    else
        restio_method(w, req, "POST");
}
