/*
 * Fuzz the SSE parser with bytes as an upstream might send them, split into pieces at
 * places chosen by the input. Checks the invariant the proxy relies on: the raw spans of the
 * events, followed by the bytes still held, are exactly the input.
 */
#include "fuzz.h"
#include "sse.h"

#include <stdlib.h>
#include <string.h>

struct fuzz_sse {
    const uint8_t *in;
    size_t off;
};

static int fuzz_sse_event(void *arg, const struct sse_event *ev)
{
    struct fuzz_sse *st = arg;
    if (memcmp(ev->raw, st->in + st->off, ev->raw_len) != 0)
        abort();
    st->off += ev->raw_len;
    if (ev->data != NULL && ev->data_len > ev->raw_len)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 64 + 1; /* piece size from the first byte */
    data++;
    size--;
    struct sse_parser *p = sse_parser_create(4096);
    struct fuzz_sse st = {.in = data};
    size_t fed = 0;
    int failed = 0;
    while (fed < size && !failed) {
        size_t n = size - fed < step ? size - fed : step;
        failed = sse_parser_feed(p, (const char *)data + fed, n, fuzz_sse_event, &st) != 0;
        fed += n;
    }
    if (!failed && st.off + sse_parser_pending(p) != size)
        abort();
    sse_parser_destroy(p);
    return 0;
}
