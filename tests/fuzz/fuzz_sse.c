/*
 * Fuzz the SSE parser with bytes as an upstream might send them, split into pieces at
 * places chosen by the input. Checks the invariant the proxy relies on: the raw spans of the
 * events, followed by the bytes still held, are exactly the input; and each event's data and
 * type are what a byte-by-byte reading of its raw span gives.
 */
#include "fuzz.h"
#include "proxy/chat/sse.h"

#include <stdlib.h>
#include <string.h>

struct fuzz_sse {
    const uint8_t *in;
    size_t off;
};

/* The reference: split raw into lines one byte at a time (\n, \r or \r\n), join the data
 * lines' values with \n, keep the last event line's value. */
static void fuzz_sse_reference(const struct sse_event *ev)
{
    char data[4096 + 1];
    size_t dlen = 0, i = 0, tlen = 0;
    const char *type = NULL;
    int has_data = 0;
    while (i < ev->raw_len) {
        size_t j = i;
        while (j < ev->raw_len && ev->raw[j] != '\n' && ev->raw[j] != '\r')
            j++;
        const char *line = ev->raw + i, *colon = memchr(line, ':', j - i);
        size_t nlen = colon ? (size_t)(colon - line) : j - i;
        const char *v = colon ? colon + 1 : ev->raw + j;
        size_t vlen = (size_t)(ev->raw + j - v);
        if (vlen > 0 && *v == ' ') {
            v++;
            vlen--;
        }
        if (j > i && nlen == 4 && memcmp(line, "data", 4) == 0) {
            if (has_data)
                data[dlen++] = '\n';
            memcpy(data + dlen, v, vlen);
            dlen += vlen;
            has_data = 1;
        } else if (j > i && nlen == 5 && memcmp(line, "event", 5) == 0) {
            type = v;
            tlen = vlen;
        }
        if (j < ev->raw_len && ev->raw[j] == '\r' && j + 1 < ev->raw_len && ev->raw[j + 1] == '\n')
            j++;
        i = j + 1;
    }
    if (has_data != (ev->data != NULL) ||
        (has_data && (dlen != ev->data_len || memcmp(data, ev->data, dlen) != 0)))
        abort();
    if ((type != NULL) != (ev->type != NULL) ||
        (type != NULL && (tlen != ev->type_len || memcmp(type, ev->type, tlen) != 0)))
        abort();
}

static int fuzz_sse_event(void *arg, const struct sse_event *ev)
{
    struct fuzz_sse *st = arg;
    if (memcmp(ev->raw, st->in + st->off, ev->raw_len) != 0)
        abort();
    st->off += ev->raw_len;
    if (ev->data != NULL && ev->data_len > ev->raw_len)
        abort();
    fuzz_sse_reference(ev);
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
