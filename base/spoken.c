#include "base/spoken.h"

#include <stddef.h>
#include <string.h>

/* A text read as spoken, one byte at a time. */
struct spoken_reader {
    const unsigned char *p;
    int gap;     /* whitespace passed since the last byte given */
    int started; /* a byte given already: a gap before the next one is a space */
};

/* The length of the whitespace character at p, or 0: ASCII's and Unicode's (UTF-8), the set
 * Python's str.split() splits words on, as a client joining a TTS's words by it does. */
static size_t spoken_space(const unsigned char *p)
{
    if (*p == ' ' || (*p >= '\t' && *p <= '\r') || (*p >= 0x1c && *p <= 0x1f))
        return 1;
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

static int spoken_is_mark(unsigned char c)
{
    return c != 0 && strchr("*_`#~", c) != NULL;
}

/* The next byte as spoken (a gap between words is one ' '), or -1 at the end. */
static int spoken_next(struct spoken_reader *r)
{
    for (;; r->p++) {
        unsigned char c = *r->p;
        size_t n;
        if (c == 0)
            return -1;
        if ((n = spoken_space(r->p)) > 0) {
            r->gap = 1;
            r->p += n - 1;
        } else if (!spoken_is_mark(c)) {
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
}

enum spoken_match spoken_compare(const char *said, const char *heard)
{
    struct spoken_reader a = {.p = (const unsigned char *)said};
    struct spoken_reader b = {.p = (const unsigned char *)heard};
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
