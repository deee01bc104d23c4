/*
 * restio: what the REST modules (rest, users, deliveries, notify) share — answering in the
 * one JSON error shape, reading a JSON body, a page's cursor, and answering once a change is
 * committed (paths and query parameters are restpath.h's).
 *
 * Ownership: restio_json takes its body;
 * restio_wait returns an arg that restio_waited frees.
 */
#ifndef MEMPROXY_RESTIO_H
#define MEMPROXY_RESTIO_H

#include "proxy/http/apierr.h"
#include "proxy/http/request.h"

#include <event2/http.h>
#include <jansson.h>
#include <stddef.h>

struct evkeyvalq;
struct memory_reader;
struct worker;

void restio_error(struct worker *w, struct evhttp_request *req, enum apierr_kind kind,
                  const char *param, const char *msg);
/* Send body (taken) as JSON with status. */
void restio_json(struct worker *w, struct evhttp_request *req, int status, json_t *body);
/* The request body as a JSON object, or NULL with the error sent. */
json_t *restio_body(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc);
/* A page's "next" as the opaque string clients pass back. */
void restio_page_cursor(json_t *page);
/* Answer 405 naming the allowed methods. */
void restio_method(struct worker *w, struct evhttp_request *req, const char *allow);

/*
 * Answering after a commit: restio_wait() holds the worker (a draining loop waits for the
 * answer) and returns the arg for a memory_done_cb, which is restio_waited; once the commit
 * is reported, answer(w, req, ok, scope, id) runs and everything is released.
 */
typedef void (*restio_answer_fn)(struct worker *w, struct evhttp_request *req, int ok,
                                 const char *scope, const char *id);
void *restio_wait(struct worker *w, struct evhttp_request *req, restio_answer_fn answer,
                  const char *scope, const char *id);
void restio_waited(void *arg, int ok);

/*
 * Reading before answering, without making the worker's loop wait (worker_read): a handler
 * fills a restread with what the read needs, restio_read() runs read(r, rr) with a reader (a
 * pool thread's with PostgreSQL, so it may touch only rr) and then then(rr) on the worker,
 * which answers or goes on (a change to submit). A read that went unanswered is answered
 * 503 storage_failed instead, and then() does not run. rr is freed after then() returns,
 * with its strings, data and what the read found.
 */
struct restread;
typedef void (*restread_fn)(struct memory_reader *r, struct restread *rr);
typedef void (*restread_then)(struct restread *rr);
struct restread {
    struct worker *w;
    struct evhttp_request *req;
    char *tenant, *id, *text; /* copies: the tenant, the session/user/notice id, one more value */
    const char *lit;          /* a constant the handler chose (a status filter), or NULL */
    long long n, before;      /* a limit, a cursor, a format: the handler's */
    int flag;
    json_t *data;       /* what the answer carries on (a change, a snapshot), or NULL */
    json_t *got, *more; /* what read found: new references, or NULL */
};
struct restread *restio_read_new(struct worker *w, struct evhttp_request *req, const char *tenant,
                                 const char *id);
void restio_read(struct restread *rr, restread_fn read, restread_then then);

#endif
