/*
 * restpath: a REST request's path and query read as outside input — which area it names,
 * the decoded id, the action after it, and the paging and filter parameters. Pure (libevent's
 * key/value list only), so the fuzz target reads paths and queries exactly as the server does.
 *
 *   /sessions[/]                  the collection        /sessions/{id}[/{action}]
 *   /agents/{id}[/{action}]       Agora's names for the same sessions
 *   /users/{id}[/{action}]        /webhooks/deliveries[/{id}[/{action}]]
 *
 * An id segment is percent-decoded and must be an id (util_id_valid): UTF-8 text without
 * control characters, 1 to UTIL_MAX_ID bytes. A trailing '/' after the id is no action.
 *
 * Ownership: restpath_parse fills p with a malloc'd id that restpath_clear frees; the
 * action points into the caller's path.
 */
#ifndef MEMPROXY_RESTPATH_H
#define MEMPROXY_RESTPATH_H

#include <stddef.h>

struct evkeyvalq;

enum restpath_area {
    RESTPATH_SESSIONS,
    RESTPATH_AGENTS,
    RESTPATH_USERS,
    RESTPATH_DELIVERIES,
};

struct restpath {
    enum restpath_area area;
    char *id;           /* decoded; NULL for the collection */
    const char *action; /* after the id's '/', "" when none */
    size_t action_len;
};

#define RESTPATH_NO_ROUTE (-1) /* not a REST path */
#define RESTPATH_BAD_ID   (-2) /* p->area is set; the id segment is not an id */

/* 0 with p filled, or one of the codes above (p then holds no id). path is /v1-stripped. */
int restpath_parse(const char *path, size_t len, struct restpath *p);
int restpath_action_is(const struct restpath *p, const char *name);
void restpath_clear(struct restpath *p);

/* ?limit= in [1, max]; def when absent; -1 when bad. */
long restpath_limit(struct evkeyvalq *q, long def, long max);
/* ?cursor= (a previous page's next); 0 when absent, -1 when bad. */
long long restpath_cursor(struct evkeyvalq *q);
/* The id in ?name= (decoded): 0 with *out set (NULL when absent), -1 when it is not an id: a
 * filter that can match nothing is refused rather than answered with an empty page. */
int restpath_query_id(struct evkeyvalq *q, const char *name, const char **out);

#endif
