#include "base/spoken.h"

#include <stddef.h>

/* A text read as spoken, one byte at a time. */
struct spoken_reader {
    const unsigned char *p;
    int gap;     /* whitespace passed since the last byte given */
    int started; /* a byte given already: a gap before the next one is a space */
};

/* The length of the Unicode whitespace character (UTF-8) at p, or 0. With ASCII's (below),
 * the set Python's str.split() splits words on, as a client joining a TTS's words by it does. */
static size_t spoken_space(const unsigned char *p)
{
    if (p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) /* NEL, no-break space */
        return 2;
    if (p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) /* ogham space mark */
        return 3;
    if (p[0] == 0xe2 && p[1] == 0x80) /* U+2000-200A, line and paragraph separators, 202F */
        return (p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf ? 3
                                                                                              : 0;
    if ((p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) || /* medium mathematical space */
        (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80))   /* ideographic space */
        return 3;
    return 0;
}

/* What a byte may be, read as spoken: most are said as they are (0). */
enum spoken_class { SPOKEN_SAID, SPOKEN_END, SPOKEN_SPACE, SPOKEN_MARK, SPOKEN_LEAD };

static const unsigned char spoken_classes[256] = {
    [0] = SPOKEN_END,      ['\t'] = SPOKEN_SPACE, ['\n'] = SPOKEN_SPACE, [0x0b] = SPOKEN_SPACE,
    [0x0c] = SPOKEN_SPACE, ['\r'] = SPOKEN_SPACE, [0x1c] = SPOKEN_SPACE, [0x1d] = SPOKEN_SPACE,
    [0x1e] = SPOKEN_SPACE, [0x1f] = SPOKEN_SPACE, [' '] = SPOKEN_SPACE,  ['*'] = SPOKEN_MARK,
    ['_'] = SPOKEN_MARK,   ['`'] = SPOKEN_MARK,   ['#'] = SPOKEN_MARK,   ['~'] = SPOKEN_MARK,
    [0xc2] = SPOKEN_LEAD,  [0xe1] = SPOKEN_LEAD,  [0xe2] = SPOKEN_LEAD,  [0xe3] = SPOKEN_LEAD,
};

/* The next byte as spoken (a gap between words is one ' '), or -1 at the end. */
static int spoken_next(struct spoken_reader *r)
{
    for (;; r->p++) {
        unsigned char c = *r->p;
        size_t n;
        switch (spoken_classes[c]) {
        case SPOKEN_END:
            return -1;
        case SPOKEN_MARK:
            continue;
        case SPOKEN_SPACE:
            r->gap = 1;
            continue;
        case SPOKEN_LEAD:
            if ((n = spoken_space(r->p)) > 0) {
                r->gap = 1;
                r->p += n - 1;
                continue;
            }
            break;
        default:
            break;
        }
        if (r->gap && r->started) {
            r->gap = 0;
            return ' '; /* c again on the next call */
        }
        r->gap = 0;
        r->started = 1;
        r->p++;
        return c;
    }
}

enum spoken_match spoken_compare(const char *said, const char *heard)
{
    const unsigned char *x0 = (const unsigned char *)said, *y0 = (const unsigned char *)heard;
    size_t i = 0;
    /* the bytes both begin with and say as they are: read as spoken, they are themselves
     * (most texts compared differ within a few bytes, or not at all) */
    while (x0[i] == y0[i] && spoken_classes[x0[i]] == SPOKEN_SAID)
        i++;
    struct spoken_reader a = {.p = x0 + i, .started = i > 0};
    struct spoken_reader b = {.p = y0 + i, .started = i > 0};
    for (;;) {
        int x = spoken_next(&a), y = spoken_next(&b);
        if (y < 0)
            return x < 0 ? SPOKEN_SAME : b.started ? SPOKEN_START : SPOKEN_DIFFERENT;
        if (x != y)
            return SPOKEN_DIFFERENT;
    }
}

int spoken_empty(const char *text)
{
    struct spoken_reader r = {.p = (const unsigned char *)text};
    return spoken_next(&r) < 0;
}
