/*
 * Fuzz chat request parsing and validation with client bodies. A body that passes must yield
 * an upstream body that is valid JSON with the same messages. The depth pre-scan (for bodies
 * forwarded unread) must agree with a byte-by-byte reference on every input, and the cap
 * chatreq_parse() checks while reading (jtext_load_nested) with the pre-scan on every input
 * the reader accepts.
 */
#include "base/jtext.h"
#include "fuzz.h"
#include "proxy/chat/chatreq.h"

#include <stdlib.h>

/* The obvious scan, one byte at a time: what jtext_too_deep() must answer. */
static int reference_too_deep(const char *buf, size_t len, size_t max_depth)
{
    size_t depth = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > max_depth)
                return 1;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t d = 0; d < 6; d++) {
        if (jtext_too_deep((const char *)data, size, d) !=
            reference_too_deep((const char *)data, size, d))
            abort();
    }
    json_t *all = jtext_load((const char *)data, size, JSON_DECODE_ANY, NULL);
    for (size_t d = 0; all != NULL && d < 6; d++) {
        json_error_t err;
        json_t *capped = jtext_load_nested((const char *)data, size, JSON_DECODE_ANY, d, &err);
        int deep = reference_too_deep((const char *)data, size, d);
        if ((capped == NULL) != deep ||
            (capped == NULL && json_error_code(&err) != json_error_stack_overflow))
            abort();
        json_decref(capped);
    }
    json_decref(all);
    struct chatreq_opts lim = {.max_depth = 64, .max_messages = 4096};
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
