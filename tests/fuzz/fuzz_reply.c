/*
 * Fuzz the reply accumulator with upstream stream chunks and response bodies: the input is
 * split at newlines into chunks, then read once more as a whole body.
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
        reply_add_chunk(r, s, n);
        s += n + 1;
    }
    size_t len = 0;
    const char *text = reply_content(r, &len);
    if (strlen(text) > len) /* content is NUL-terminated at its length */
        __builtin_trap();
    reply_set_body(r, (const char *)data, size);
    reply_destroy(r);
    return 0;
}
