#include "proxy/chat/sse.h"

#include "base/util.h"

#include <string.h>

struct sse_parser {
    char *buf; /* raw bytes of an event still incomplete */
    size_t len, cap;
    size_t scan;       /* buf[0..scan) holds no event end */
    size_t line_start; /* start of the current line inside buf[0..scan) */
    size_t max_event;
    char *scratch; /* multi-line data, joined */
    size_t scratch_cap;
};

struct sse_parser *sse_parser_create(size_t max_event)
{
    struct sse_parser *p = xcalloc(1, sizeof(*p));
    p->max_event = max_event;
    return p;
}

void sse_parser_destroy(struct sse_parser *p)
{
    if (p == NULL)
        return;
    free(p->buf);
    free(p->scratch);
    free(p);
}

size_t sse_parser_pending(const struct sse_parser *p)
{
    return p->len;
}

int sse_is_done(const struct sse_event *ev)
{
    return ev->data != NULL && ev->data_len == 6 && memcmp(ev->data, "[DONE]", 6) == 0;
}

/* The first line break ('\n' or '\r') in s[from..len), or len. memchr takes the bytes many at
 * a time: an event is one long data line, and every streamed token passes through here. */
static size_t sse_eol(const char *s, size_t from, size_t len)
{
    const char *nl = memchr(s + from, '\n', len - from);
    size_t lim = nl ? (size_t)(nl - s) : len;
    const char *cr = memchr(s + from, '\r', lim - from);
    return cr ? (size_t)(cr - s) : lim;
}

/*
 * Find the end of the first event in s[0..len): the offset just past its blank line, or 0 when
 * it is not complete yet. *scan and *line_start carry the search over between calls, so bytes
 * are looked at once even when an event arrives one byte at a time. A \r as the last byte
 * waits for the next byte, which may be its \n.
 */
static size_t sse_find_end(const char *s, size_t len, size_t *scan, size_t *line_start)
{
    for (size_t i = sse_eol(s, *scan, len); i < len; i = sse_eol(s, i + 1, len)) {
        size_t term = 1;
        if (s[i] == '\r') {
            if (i + 1 == len) {
                *scan = i;
                return 0;
            }
            if (s[i + 1] == '\n')
                term = 2;
        }
        if (i == *line_start)
            return i + term;
        i += term - 1;
        *line_start = i + 1;
    }
    *scan = len;
    return 0;
}

static void sse_append_data(struct sse_parser *p, struct sse_event *ev, const char *v, size_t n)
{
    if (ev->data == NULL) {
        ev->data = v; /* the common case: one data line, no copy */
        ev->data_len = n;
        return;
    }
    size_t need = ev->data_len + 1 + n;
    if (need > p->scratch_cap) {
        char *grown = xmalloc(need * 2);
        memcpy(grown, ev->data, ev->data_len); /* ev->data may point into the old scratch */
        free(p->scratch);
        p->scratch = grown;
        p->scratch_cap = need * 2;
    } else if (ev->data != p->scratch) {
        memmove(p->scratch, ev->data, ev->data_len);
    }
    p->scratch[ev->data_len] = '\n';
    memcpy(p->scratch + ev->data_len + 1, v, n);
    ev->data = p->scratch;
    ev->data_len = need;
}

static void sse_field(struct sse_parser *p, struct sse_event *ev, const char *line, size_t n)
{
    const char *colon = memchr(line, ':', n);
    size_t nlen = colon ? (size_t)(colon - line) : n;
    const char *v = colon ? colon + 1 : line + n;
    size_t vlen = n - (size_t)(v - line);
    if (vlen > 0 && *v == ' ') {
        v++;
        vlen--;
    }
    if (nlen == 4 && memcmp(line, "data", 4) == 0)
        sse_append_data(p, ev, v, vlen);
    else if (nlen == 5 && memcmp(line, "event", 5) == 0) {
        ev->type = v;
        ev->type_len = vlen;
    }
    /* id, retry, comments (nlen == 0) and unknown fields carry nothing the proxy needs */
}

/* Parse the fields of one complete event raw[0..len) and hand it to cb. */
static int sse_dispatch(struct sse_parser *p, const char *raw, size_t len, sse_event_cb cb,
                        void *arg)
{
    struct sse_event ev = {.raw = raw, .raw_len = len};
    size_t i = 0;
    while (i < len) {
        size_t j = sse_eol(raw, i, len);
        if (j > i)
            sse_field(p, &ev, raw + i, j - i);
        if (j < len && raw[j] == '\r' && j + 1 < len && raw[j + 1] == '\n')
            j++;
        i = j + 1;
    }
    return cb(arg, &ev);
}

/* Dispatch every complete event in s[0..len); returns bytes consumed, or -1. */
static long sse_drain(struct sse_parser *p, const char *s, size_t len, sse_event_cb cb, void *arg)
{
    size_t off = 0;
    for (;;) {
        size_t scan = p->scan, ls = p->line_start;
        size_t end = sse_find_end(s + off, len - off, &scan, &ls);
        if (end == 0) {
            if (len - off > p->max_event)
                return -1;
            p->scan = scan;
            p->line_start = ls;
            return (long)off;
        }
        if (end > p->max_event)
            return -1;
        p->scan = p->line_start = 0;
        if (sse_dispatch(p, s + off, end, cb, arg) != 0)
            return -1;
        off += end;
    }
}

static void sse_keep(struct sse_parser *p, const char *s, size_t n)
{
    p->len = n;
    if (n == 0)
        return;
    if (n > p->cap) {
        size_t cap = n < 256 ? 256 : n * 2;
        char *nb = xmalloc(cap);
        memcpy(nb, s, n); /* s may point into the old buffer */
        free(p->buf);
        p->buf = nb;
        p->cap = cap;
    } else {
        memmove(p->buf, s, n);
    }
    p->len = n;
}

int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len, sse_event_cb cb, void *arg)
{
    if (p->len == 0) {
        long used = sse_drain(p, buf, len, cb, arg);
        if (used < 0)
            return -1;
        sse_keep(p, buf + used, len - (size_t)used);
        return 0;
    }
    if (p->len + len > p->cap) {
        p->cap = (p->len + len) * 2;
        p->buf = xrealloc(p->buf, p->cap);
    }
    memcpy(p->buf + p->len, buf, len);
    p->len += len;
    long used = sse_drain(p, p->buf, p->len, cb, arg);
    if (used < 0)
        return -1;
    sse_keep(p, p->buf + used, p->len - (size_t)used);
    return 0;
}
