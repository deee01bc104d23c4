/*
 * Fuzz chat request parsing and validation with client bodies. A body that passes must yield
 * an upstream body that is valid JSON with the same messages.
 */
#include "chatreq.h"
#include "fuzz.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct chatreq_limits lim = {.max_depth = 64, .max_messages = 4096};
    struct chatreq r;
    struct apierr e;
    if (chatreq_parse((const char *)data, size, &lim, &r, &e) != 0)
        return 0;
    size_t len = 0;
    char *body = chatreq_upstream_body(&r, size % 2 ? "override" : NULL, &len);
    json_t *up = json_loadb(body, len, 0, NULL);
    if (!json_is_object(up) || !json_equal(json_object_get(up, "messages"), r.messages))
        abort();
    if (r.stream &&
        !json_is_true(json_object_get(json_object_get(up, "stream_options"), "include_usage")))
        abort();
    json_decref(up);
    free(body);
    chatreq_clear(&r);
    return 0;
}
