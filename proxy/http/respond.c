#include "proxy/http/respond.h"

#include "base/util.h"
#include "proxy/http/access.h"
#include "proxy/http/worker.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

void respond_date(struct worker *w, struct evkeyvalq *h)
{
    int64_t now = util_wall_ms() / 1000;
    if (now != w->date_sec || w->date[0] == '\0') {
        util_http_date(now, w->date);
        w->date_sec = now;
    }
    evhttp_add_header(h, "Date", w->date);
}

/* The access line of a response that is not the chat path's (it writes its own). */
static void respond_access(struct worker *w, struct evhttp_request *req, int status, size_t bytes)
{
    static const char *const methods[] = {"GET",     "POST",  "HEAD",    "PUT",  "DELETE",
                                          "OPTIONS", "TRACE", "CONNECT", "PATCH"};
    const char *method = "?";
    for (size_t i = 0; i < UTIL_ARRAY_LEN(methods); i++)
        if (evhttp_request_get_command(req) == (enum evhttp_cmd_type)(1 << i))
            method = methods[i];
    const char *authority;
    size_t len;
    const char *target = util_target_path(evhttp_request_get_uri(req), &len, &authority);
    char path[256];
    util_copy(path, sizeof(path), target, len);
    struct access_line a = {.method = method,
                            .path = path,
                            .status = status,
                            .dur_us = -1,
                            .ttft_us = -1,
                            .bytes = (long long)bytes};
    access_write(w->cfg, &a);
}

void respond_send_buffer(struct worker *w, enum metrics_route route, struct evhttp_request *req,
                         int status, const char *content_type, struct evbuffer *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", content_type ? content_type : "application/json");
    respond_date(w, h);
    if (w->draining) /* let the client reconnect to a process that is not going away */
        evhttp_add_header(h, "Connection", "close");
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    metrics_request(w->metrics, route, status); /* first: see respond.h */
    if (w->access_quiet == 0)
        respond_access(w, req, status, evbuffer_get_length(body));
    worker_response_sending(w, req);
    evhttp_send_reply(req, status, NULL, body);
    worker_write_now(w, evcon); /* req may be gone */
}

void respond_send(struct worker *w, enum metrics_route route, struct evhttp_request *req,
                  int status, const char *content_type, const char *body, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add(buf, body, len);
    respond_send_buffer(w, route, req, status, content_type, buf);
    evbuffer_free(buf);
}

void respond_error(struct worker *w, enum metrics_route route, struct evhttp_request *req,
                   const struct apierr *e)
{
    size_t len = 0;
    char *body = apierr_json(e, &len);
    respond_send(w, route, req, apierr_status(e->kind), NULL, body, len);
    free(body);
}
