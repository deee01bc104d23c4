/*
 * respond: sending whole responses (JSON bodies and API errors) and counting them in the
 * worker's metrics. Error bodies come from apierr, so every route answers errors alike.
 *
 * An answer is counted before its bytes are written: a response is written in the callback
 * that completes it, so a client that has it may scrape /metrics, on another worker, before
 * this one would otherwise have counted it.
 */
#ifndef MEMPROXY_RESPOND_H
#define MEMPROXY_RESPOND_H

#include "proxy/http/apierr.h"
#include "proxy/http/metrics.h"

#include <event2/http.h>
#include <stddef.h>

struct worker;

/* Send status with body (copied) as content_type (NULL = application/json). */
void respond_send(struct worker *w, enum metrics_route route, struct evhttp_request *req,
                  int status, const char *content_type, const char *body, size_t len);
/* The same with a body already in an evbuffer (drained). */
void respond_send_buffer(struct worker *w, enum metrics_route route, struct evhttp_request *req,
                         int status, const char *content_type, struct evbuffer *body);
/* Add the Date header to h: evhttp would format the date for each response (time, gmtime
 * and a printf); the worker formats it once a second. */
void respond_date(struct worker *w, struct evkeyvalq *h);
void respond_error(struct worker *w, enum metrics_route route, struct evhttp_request *req,
                   const struct apierr *e);

#endif
