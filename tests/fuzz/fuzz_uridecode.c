/*
 * Fuzz the percent-decoding of ids in REST paths (config/util.c util_uridecode, used by
 * proxy/rest.c rest_id): it must decode exactly as libevent's evhttp_uridecode (which
 * memproxy used before, and whose result it can no longer free once libevent allocates
 * through jalloc), never write past what it returns, and never grow the input. The same bytes
 * as an HTTP request target (base/util.c util_target_path, which routes every request by): its
 * path and authority found inside it.
 */
#include "base/util.h"
#include "fuzz.h"

#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0, ref_n = 0;
    char *got = util_uridecode((const char *)data, size, &n);
    if (n > size || got[n] != '\0')
        abort();
    /* the oracle reads a C string: compare on the input up to its first NUL */
    size_t len = strnlen((const char *)data, size);
    char *in = xmalloc(len + 1);
    memcpy(in, data, len);
    in[len] = '\0';
    char *prefix = util_uridecode(in, len, &n);
    char *ref = evhttp_uridecode(in, 0, &ref_n);
    if (ref == NULL || ref_n != n || memcmp(ref, prefix, n + 1) != 0)
        abort();
    (void)util_id_valid(got, n);
    /* the same bytes as a request target: its path and authority lie inside it, in order */
    const char *authority = NULL;
    size_t path_len = 0;
    const char *path = util_target_path(in, &path_len, &authority);
    if (path < in || path + path_len > in + len || memchr(path, '?', path_len) != NULL ||
        (authority != NULL && (authority < in || authority > path)) ||
        (authority == NULL && path != in))
        abort();
    free(ref);
    free(prefix);
    free(in);
    free(got);
    return 0;
}
