#include "proxy/rest/restpath.h"

#include "base/util.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

static const struct {
    const char *prefix;
    enum restpath_area area;
    int needs_id; /* no collection at the bare prefix */
} restpath_areas[] = {
    {"/sessions", RESTPATH_SESSIONS, 0},
    {"/agents", RESTPATH_AGENTS, 1},
    {"/users", RESTPATH_USERS, 1},
    {"/webhooks/deliveries", RESTPATH_DELIVERIES, 0},
};

/* The area whose prefix path starts with (whole segments); its index, or -1. */
static int restpath_area_of(const char *path, size_t len)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(restpath_areas); i++) {
        size_t n = strlen(restpath_areas[i].prefix);
        if (len >= n && memcmp(path, restpath_areas[i].prefix, n) == 0 &&
            (len == n || path[n] == '/'))
            return (int)i;
    }
    return -1;
}

int restpath_parse(const char *path, size_t len, struct restpath *p)
{
    memset(p, 0, sizeof(*p));
    p->action = "";
    int a = restpath_area_of(path, len);
    if (a < 0)
        return RESTPATH_NO_ROUTE;
    p->area = restpath_areas[a].area;
    const char *rest = path + strlen(restpath_areas[a].prefix), *end = path + len;
    if (rest == end || (rest + 1 == end && *rest == '/')) /* the collection */
        return restpath_areas[a].needs_id ? RESTPATH_NO_ROUTE : 0;
    rest++; /* the '/' before the id */
    const char *slash = memchr(rest, '/', (size_t)(end - rest));
    size_t n = 0, seg = (size_t)((slash ? slash : end) - rest);
    char *id = util_uridecode(rest, seg, &n);
    if (!util_id_valid(id, n)) {
        free(id);
        return RESTPATH_BAD_ID;
    }
    p->id = id;
    if (slash != NULL) {
        p->action = slash + 1;
        p->action_len = (size_t)(end - slash - 1);
    }
    return 0;
}

int restpath_action_is(const struct restpath *p, const char *name)
{
    return p->action_len == strlen(name) && memcmp(p->action, name, p->action_len) == 0;
}

void restpath_clear(struct restpath *p)
{
    free(p->id);
    memset(p, 0, sizeof(*p));
    p->action = "";
}

long restpath_limit(struct evkeyvalq *q, long def, long max)
{
    const char *v = evhttp_find_header(q, "limit");
    long long n = 0;
    if (v == NULL)
        return def;
    if (util_parse_ll(v, &n) != 0 || n < 1 || n > max)
        return -1;
    return (long)n;
}

long long restpath_cursor(struct evkeyvalq *q)
{
    const char *v = evhttp_find_header(q, "cursor");
    long long n = 0;
    if (v == NULL)
        return 0;
    return util_parse_ll(v, &n) == 0 && n >= 1 ? n : -1;
}

int restpath_query_id(struct evkeyvalq *q, const char *name, const char **out)
{
    *out = evhttp_find_header(q, name);
    return *out == NULL || util_id_valid(*out, strlen(*out)) ? 0 : -1;
}
