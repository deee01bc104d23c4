/*
 * Fuzz the reading of a REST request's path and query (proxy/rest/restpath.c): both are
 * outside input. The input is "path?query". What passes must be what the handlers rely on:
 * an id that is UTF-8 text within the cap, an action inside the path, limits within their
 * bounds, cursors positive, filter ids valid.
 */
#include "base/util.h"
#include "fuzz.h"
#include "proxy/rest/restpath.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_path(const char *path, size_t len)
{
    struct restpath p;
    int rc = restpath_parse(path, len, &p);
    if (rc != 0 && p.id != NULL)
        abort();
    if (rc == 0) {
        if (p.id != NULL && !util_id_valid(p.id, strlen(p.id)))
            abort();
        if (p.action_len > 0 && (p.action < path || p.action + p.action_len != path + len))
            abort();
        if (p.id == NULL && p.area != RESTPATH_SESSIONS && p.area != RESTPATH_DELIVERIES)
            abort(); /* only these have a collection */
    }
    restpath_clear(&p);
}

static void fuzz_query(const char *query)
{
    struct evkeyvalq q;
    const char *id = NULL;
    if (evhttp_parse_query_str(query, &q) == 0) {
        long limit = restpath_limit(&q, 50, 1000);
        if (limit != -1 && (limit < 1 || limit > 1000))
            abort();
        if (restpath_cursor(&q) < -1)
            abort();
        if (restpath_query_id(&q, "user_id", &id) == 0 && id != NULL &&
            !util_id_valid(id, strlen(id)))
            abort();
    }
    evhttp_clear_headers(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = xmalloc(size + 1);
    memcpy(in, data, size);
    in[size] = '\0';
    char *qmark = memchr(in, '?', size);
    size_t plen = qmark ? (size_t)(qmark - in) : size;
    fuzz_path(in, plen);
    if (qmark != NULL)
        fuzz_query(qmark + 1);
    free(in);
    return 0;
}
