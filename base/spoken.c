#include "base/spoken.h"

#include <string.h>

/* A text read as spoken, one byte at a time. */
struct spoken_reader {
    const unsigned char *p;
    int gap;     /* whitespace passed since the last byte given */
    int started; /* a byte given already: a gap before the next one is a space */
};

static int spoken_is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
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
        if (c == 0)
            return -1;
        if (spoken_is_space(c)) {
            r->gap = 1;
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
