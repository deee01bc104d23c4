/*
 * users: the REST routes about a user (docs/design.md §8, §10), under an admin key of the tenant:
 *
 *   GET    /v1/users/{id}/memory   the user's summary and facts
 *   PUT    /v1/users/{id}/memory   replace them ({"summary": text|null, "facts": [...]})
 *   DELETE /v1/users/{id}/memory   forget them
 *   DELETE /v1/users/{id}          erase everything held about the user: their sessions and
 *                                  turns, summary, facts and queued webhook dumps
 *
 * A user is an id sessions carry, not a row of its own: every call succeeds for any valid
 * id (an unknown user simply has nothing). Changes are answered once committed.
 */
#ifndef MEMPROXY_USERS_H
#define MEMPROXY_USERS_H

#include "proxy/http/request.h"
#include "proxy/rest/restpath.h"

#include <event2/http.h>
#include <stddef.h>

/* path: what follows "/users". */
void users_handle(struct worker *w, struct evhttp_request *req, const struct restpath *p,
                  const struct request_ctx *rc);

#endif
