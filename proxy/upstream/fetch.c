#include "proxy/upstream/fetch.h"

#include "base/log.h"

#include "base/jtext.h"
#include "base/util.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fetch {
    struct upstream_xfer *x;
    char *body;
    size_t max;
    long status;
    int overflow;
    struct evbuffer *answer;
    fetch_cb cb;
    void *arg;
};

static void fetch_free(struct fetch *f)
{
    evbuffer_free(f->answer);
    free(f->body);
    free(f);
}

static int fetch_on_head(void *arg, long status, const char *ctype)
{
    struct fetch *f = arg;
    (void)ctype;
    f->status = status;
    return 0;
}

static enum upstream_body_rc fetch_on_body(void *arg, const char *data, size_t len)
{
    struct fetch *f = arg;
    if (evbuffer_get_length(f->answer) + len > f->max) {
        f->overflow = 1;
        return UPSTREAM_BODY_ABORT;
    }
    evbuffer_add(f->answer, data, len);
    return UPSTREAM_BODY_OK;
}

static void fetch_on_done(void *arg, enum upstream_result res, const char *detail)
{
    struct fetch *f = arg;
    char err[160] = "";
    size_t len = evbuffer_get_length(f->answer);
    evbuffer_add(f->answer, "", 1); /* the NUL */
    const char *body = f->status ? (const char *)evbuffer_pullup(f->answer, -1) : NULL;
    if (f->overflow)
        snprintf(err, sizeof(err), "the answer is larger than %zu bytes", f->max);
    else if (res != UPSTREAM_OK)
        snprintf(err, sizeof(err), "%s", *detail ? detail : "the transfer failed");
    f->cb(f->arg, f->status, body, body ? len : 0, err);
    fetch_free(f);
}

static const struct upstream_handler fetch_handler = {fetch_on_head, fetch_on_body, fetch_on_done};

struct fetch *fetch_start(struct upstream *up, const struct cfg_upstream *target, const char *path,
                          json_t *body, size_t max, fetch_cb cb, void *arg)
{
    struct fetch *f = xcalloc(1, sizeof(*f));
    f->max = max;
    f->cb = cb;
    f->arg = arg;
    f->answer = evbuffer_new();
    size_t len = 0;
    f->body = jtext_dump(body, &len);
    if (f->body == NULL)
        log_fatal("fetch: a body that is not JSON text"); /* memproxy builds only checked UTF-8 */
    struct upstream_request rq = {.target = target, .path = path, .body = f->body, .body_len = len};
    f->x = upstream_start(up, &rq, &fetch_handler, f);
    return f;
}

void fetch_cancel(struct fetch *f)
{
    if (f == NULL)
        return;
    upstream_cancel(f->x);
    fetch_free(f);
}
