#include "proxy/rest/users.h"

#include "base/util.h"
#include "memory/memory.h"
#include "memory/snapshot.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"
#include "proxy/rest/restio.h"

#include <string.h>

static void users_read_memory(struct memory_reader *r, struct restread *rr)
{
    rr->got = memory_user(r, rr->tenant, rr->id);
}

static void users_memory_then(struct restread *rr)
{
    restio_json(rr->w, rr->req, 200, json_incref(rr->got));
}

/* What is remembered of the user, read off the loop. */
static void users_get(struct worker *w, struct evhttp_request *req, const char *tenant,
                      const char *user)
{
    restio_read(restio_read_new(w, req, tenant, user), users_read_memory, users_memory_then);
}

static void users_answer_memory(struct worker *w, struct evhttp_request *req, int ok,
                                const char *tenant, const char *user)
{
    if (ok)
        users_get(w, req, tenant, user);
    else
        restio_error(w, req, APIERR_STORAGE, NULL, "the change could not be stored");
}

static void users_answer_erased(struct worker *w, struct evhttp_request *req, int ok,
                                const char *tenant, const char *user)
{
    (void)tenant;
    if (ok)
        restio_json(w, req, 200, json_pack("{s:s, s:b}", "user_id", user, "deleted", 1));
    else
        restio_error(w, req, APIERR_STORAGE, NULL, "the erasure could not be stored");
}

static void users_change(struct worker *w, struct evhttp_request *req, const char *tenant,
                         const char *user, enum memory_user_change what, json_t *data)
{
    restio_answer_fn answer = what == MEMORY_USER_ERASE ? users_answer_erased : users_answer_memory;
    memory_user_change(w->mem, tenant, user, what, data, w->base, restio_waited,
                       restio_wait(w, req, answer, tenant, user));
}

static void users_put(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc,
                      const char *user)
{
    char *why = NULL;
    json_t *body = restio_body(w, req, rc);
    if (body == NULL)
        return;
    json_t *data = snapshot_user_memory(body, &why);
    json_decref(body);
    if (data == NULL) {
        restio_error(w, req, APIERR_INVALID_REQUEST, NULL, why);
        free(why);
        return;
    }
    users_change(w, req, rc->tenant, user, MEMORY_USER_MEMORY, data);
    json_decref(data);
}

static void users_memory(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc,
                         const char *user)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
        users_get(w, req, rc->tenant, user);
        break;
    case EVHTTP_REQ_PUT:
        users_put(w, req, rc, user);
        break;
    case EVHTTP_REQ_DELETE: {
        json_t *none = json_object();
        users_change(w, req, rc->tenant, user, MEMORY_USER_MEMORY, none);
        json_decref(none);
        break;
    }
    default:
        restio_method(w, req, "GET, PUT, DELETE");
    }
}

void users_handle(struct worker *w, struct evhttp_request *req, const struct restpath *p,
                  const struct request_ctx *rc)
{
    if (p->action_len == 0) {
        if (evhttp_request_get_command(req) == EVHTTP_REQ_DELETE)
            users_change(w, req, rc->tenant, p->id, MEMORY_USER_ERASE, NULL);
        else
            restio_method(w, req, "DELETE");
    } else if (restpath_action_is(p, "memory")) {
        users_memory(w, req, rc, p->id);
    } else {
        restio_error(w, req, APIERR_NOT_FOUND, NULL, "no route for this path");
    }
}
