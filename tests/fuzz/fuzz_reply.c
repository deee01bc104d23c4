/*
 * Fuzz the reply accumulator with upstream stream chunks and response bodies: the input is
 * split at newlines into chunks (parsed at once or queued), then read once more as a whole body.
 */
#include "fuzz.h"
#include "reply.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct reply *r = reply_create();
    const char *s = (const char *)data, *end = s + size;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (n % 2)
            reply_add_chunk(r, s, n);
        else
            reply_queue_chunk(r, s, n);
        reply_is_usage_only(s, n);
        s += n + 1;
    }
    reply_flush(r);
    size_t len = 0;
    const char *text = reply_content(r, &len);
    if (strlen(text) > len) /* content is NUL-terminated at its length */
        __builtin_trap();
    reply_set_body(r, (const char *)data, size);
    reply_destroy(r);
    return 0;
}
