#include "base/jtext.h"

#include "base/log.h"

#include "base/jmemo.h"
#include "base/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The length of the valid UTF-8 sequence at p (its first byte >= 0x80), or 0: jansson's
 * rules (no overlong forms, no surrogates, nothing above U+10FFFF). */
static size_t jtext_utf8_len(const unsigned char *p, const unsigned char *end)
{
    uint32_t cp, min;
    size_t n;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) {
        n = 2, cp = p[0] & 0x1Fu, min = 0x80;
    } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        n = 3, cp = p[0] & 0x0Fu, min = 0x800;
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        n = 4, cp = p[0] & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

/* A string byte that needs no look: printable ASCII but the quote and the backslash. */
static int jtext_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The first byte in [p, end) that is not plain (end when all are). Eight bytes a step while
 * they are all plain (the usual case: voice transcripts are mostly ASCII), with the usual
 * word tricks: a byte below 0x20, or equal to '"' or '\\', or with its top bit set. A match
 * can only make a false one in a byte above it, so "none" is exact; the byte loop finds
 * which. */
static const unsigned char *jtext_plain_run(const unsigned char *p, const unsigned char *end)
{
    const uint64_t ones = 0x0101010101010101ULL, tops = 0x8080808080808080ULL;
    while (end - p >= 8) {
        uint64_t x, q, b;
        memcpy(&x, p, 8);
        q = x ^ (ones * '"');
        b = x ^ (ones * '\\');
        if ((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & tops)
            break;
        p += 8;
    }
    while (p < end && jtext_plain(*p))
        p++;
    return p;
}

const char *jtext_plain_span(const char *p, const char *end)
{
    return (const char *)jtext_plain_run((const unsigned char *)p, (const unsigned char *)end);
}

static int jtext_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* ---- scanning: brackets and strings only ---- */

/*
 * The brackets outside strings, found a 64-byte block at a time rather than a byte at a time:
 * a 32-message window is read to its messages' ends on every request (jtext_memo_object), and
 * it has more quotes than anything else. Per block: masks of its quotes, backslashes and
 * brackets (SSE2, on every x86-64); where it has no backslash, the bytes inside strings are
 * the prefix XOR of the quote mask (each quote turns "inside" on or off), so only brackets
 * are looked at one by one. A block with a backslash, or that starts just after one, is read
 * byte by byte.
 */
#define JTEXT_BLOCK 64

struct jtext_scan {
    const char *buf;
    size_t len, at;    /* the block being taken: buf[at, at + JTEXT_BLOCK) */
    uint64_t brackets; /* its brackets outside strings not yet taken, a bit each */
    uint64_t inside;   /* after it: all ones in a string, else 0 */
    int escaped;       /* after it: the next byte escaped */
};

struct jtext_masks {
    uint64_t quote, slash, bracket;
};

#ifdef __SSE2__
static void jtext_masks16(const char *b, unsigned shift, struct jtext_masks *m)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)b);
    __m128i lower = _mm_or_si128(x, _mm_set1_epi8(0x20)); /* '[' ']' -> '{' '}', no other */
    __m128i br = _mm_or_si128(_mm_cmpeq_epi8(lower, _mm_set1_epi8('{')),
                              _mm_cmpeq_epi8(lower, _mm_set1_epi8('}')));
    m->quote |= (uint64_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"'))) << shift;
    m->slash |= (uint64_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))) << shift;
    m->bracket |= (uint64_t)_mm_movemask_epi8(br) << shift;
}
#endif

static void jtext_block_masks(const char *b, struct jtext_masks *m)
{
    *m = (struct jtext_masks){0};
#ifdef __SSE2__
    for (unsigned i = 0; i < JTEXT_BLOCK; i += 16)
        jtext_masks16(b + i, i, m);
#else
    for (unsigned i = 0; i < JTEXT_BLOCK; i++) {
        unsigned char c = (unsigned char)b[i] | 0x20;
        m->quote |= (uint64_t)(b[i] == '"') << i;
        m->slash |= (uint64_t)(b[i] == '\\') << i;
        m->bracket |= (uint64_t)(c == '{' || c == '}') << i;
    }
#endif
}

/* A block with escapes: byte by byte. */
static uint64_t jtext_block_bytes(struct jtext_scan *s, const char *b)
{
    uint64_t out = 0;
    int inside = s->inside != 0;
    for (unsigned i = 0; i < JTEXT_BLOCK; i++) {
        unsigned char c = (unsigned char)b[i];
        if (s->escaped)
            s->escaped = 0;
        else if (inside)
            s->escaped = c == '\\', inside = c != '"';
        else if (c == '"')
            inside = 1;
        else if ((c | 0x20) == '{' || (c | 0x20) == '}')
            out |= 1ULL << i;
    }
    s->inside = inside ? ~0ULL : 0;
    return out;
}

/* The brackets outside strings of the block at s->at (zeros past the end: none of them a
 * quote, a backslash or a bracket), and the state after it. */
static uint64_t jtext_block(struct jtext_scan *s)
{
    const char *b = s->buf + s->at;
    char pad[JTEXT_BLOCK];
    struct jtext_masks m;
    if (s->len - s->at < JTEXT_BLOCK) {
        memset(pad, 0, sizeof(pad));
        b = memcpy(pad, b, s->len - s->at);
    }
    jtext_block_masks(b, &m);
    if (m.slash != 0 || s->escaped)
        return jtext_block_bytes(s, b);
    uint64_t in = m.quote; /* a bit per byte from an opening quote to its closing one */
    for (unsigned k = 1; k < JTEXT_BLOCK; k <<= 1)
        in ^= in << k;
    in ^= s->inside;
    s->inside = (uint64_t)0 - (in >> (JTEXT_BLOCK - 1));
    return m.bracket & ~in;
}

static void jtext_scan_start(struct jtext_scan *s, const char *p, const char *end)
{
    *s = (struct jtext_scan){.buf = p, .len = (size_t)(end - p)};
    if (s->len > 0)
        s->brackets = jtext_block(s);
}

/* The next bracket outside strings, or NULL at the end. */
static const char *jtext_scan_next(struct jtext_scan *s)
{
    while (s->brackets == 0) {
        if (s->len - s->at <= JTEXT_BLOCK)
            return NULL;
        s->at += JTEXT_BLOCK;
        s->brackets = jtext_block(s);
    }
    unsigned i = (unsigned)__builtin_ctzll(s->brackets);
    s->brackets &= s->brackets - 1;
    return s->buf + s->at + i;
}

int jtext_too_deep(const char *buf, size_t len, size_t max_nest)
{
    size_t depth = 0;
    struct jtext_scan s;
    const char *b;
    jtext_scan_start(&s, buf, buf + len);
    while ((b = jtext_scan_next(&s)) != NULL) {
        if (*b == '{' || *b == '[') {
            if (++depth > max_nest)
                return 1;
        } else if (depth > 0) {
            depth--;
        }
    }
    return 0;
}

/* p is at an object's or array's opening bracket: just past the bracket that closes it, or
 * NULL when none does; *nest is the deepest nesting inside, the container itself counted.
 * Nothing else is checked: for valid JSON this is where the value ends. */
static const char *jtext_container_end(const char *p, const char *end, size_t *nest)
{
    size_t depth = 0, deepest = 0;
    struct jtext_scan s;
    const char *b;
    jtext_scan_start(&s, p, end);
    while ((b = jtext_scan_next(&s)) != NULL) {
        if (*b == '{' || *b == '[') {
            if (++depth > deepest)
                deepest = depth;
        } else if (--depth == 0) {
            *nest = deepest;
            return b + 1;
        }
    }
    return NULL;
}

/* ---- reading ---- */

/* server.max_json_nodes: set once before the workers start (jtext_set_max_values). */
static size_t jtext_max_values = SIZE_MAX;

void jtext_set_max_values(size_t n)
{
    jtext_max_values = n > 0 ? n : SIZE_MAX;
}

struct jtext_reader {
    const unsigned char *start, *p, *end;
    size_t flags;
    size_t values;         /* read so far, against jtext_max_values */
    size_t depth;          /* values, as jansson counts them */
    size_t nest, max_nest; /* objects and arrays */
    json_error_t *err;
    int failed;
    char *scratch; /* the last escaped string, decoded */
    size_t scap;
    struct jmemo *memo; /* or NULL */
    uint64_t seed;
    struct jmemo_key prev; /* the last object at the memo's depth in this container, or len 0 */
};

/* Record the first error: where (line, characters into it, bytes) and what. -1. */
static int jtext_err(struct jtext_reader *r, const unsigned char *at, const char *msg)
{
    if (r->failed++ || r->err == NULL)
        return -1;
    int line = 1, column = 1;
    for (const unsigned char *q = r->start; q < at; q++) {
        if (*q == '\n')
            line++, column = 1;
        else if ((*q & 0xC0) != 0x80) /* count characters, not continuation bytes */
            column++;
    }
    r->err->line = line;
    r->err->column = column;
    r->err->position = (int)(at - r->start);
    snprintf(r->err->text, sizeof(r->err->text), "%s", msg);
    return -1;
}

static json_t *jtext_fail(struct jtext_reader *r, const unsigned char *at, const char *msg)
{
    jtext_err(r, at, msg);
    return NULL;
}

/* Fail with a jansson error code the caller tells apart (json_error_code()). */
static json_t *jtext_fail_code(struct jtext_reader *r, enum json_error_code code, const char *msg)
{
    int first = !r->failed;
    jtext_err(r, r->p, msg);
    if (first && r->err != NULL)
        r->err->text[JSON_ERROR_TEXT_LENGTH - 1] = (char)code;
    return NULL;
}

/* A value nested too deep: fail, with jansson's error code for it. */
static json_t *jtext_fail_deep(struct jtext_reader *r)
{
    return jtext_fail_code(r, json_error_stack_overflow, "maximum parsing depth reached");
}

/* Skip whitespace; 1 when a byte follows. */
static int jtext_ws(struct jtext_reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
    return r->p < r->end;
}

static int jtext_hex4(const unsigned char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        int d = jtext_digit(c)           ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The escape at *q (its backslash) is well formed: step over it. */
static int jtext_escape_ok(struct jtext_reader *r, const unsigned char **q)
{
    const unsigned char *p = *q;
    if (r->end - p < 2)
        return jtext_err(r, p, "premature end of input");
    if (p[1] == 'u') {
        if (r->end - p < 6 || jtext_hex4(p + 2) < 0)
            return jtext_err(r, p, "invalid escape");
        *q = p + 6;
        return 0;
    }
    if (strchr("\"\\/bfnrt", p[1]) == NULL || p[1] == '\0')
        return jtext_err(r, p, "invalid escape");
    *q = p + 2;
    return 0;
}

/* Put code point cp into out as UTF-8; the number of bytes. */
static size_t jtext_put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The \u escape at p (its backslash, well formed) as a code point; *p steps past it and its
 * low surrogate. -1: a lone surrogate or U+0000. */
static long jtext_unicode(struct jtext_reader *r, const unsigned char **p, const unsigned char *e)
{
    const unsigned char *q = *p;
    long cp = jtext_hex4(q + 2);
    q += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        long lo = e - q >= 6 && q[0] == '\\' && q[1] == 'u' ? jtext_hex4(q + 2) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return jtext_err(r, *p, "invalid Unicode surrogate pair");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        q += 6;
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        return jtext_err(r, *p, "invalid Unicode surrogate pair");
    } else if (cp == 0) {
        return jtext_err(r, *p, "\\u0000 is not allowed");
    }
    *p = q;
    return cp;
}

static char jtext_unescaped(unsigned char c)
{
    switch (c) {
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return (char)c; /* " \ / */
    }
}

/* Decode the checked string [p, e) into r->scratch (never longer than its source). */
static int jtext_unescape(struct jtext_reader *r, const unsigned char *p, const unsigned char *e,
                          const char **s, size_t *n)
{
    size_t w = 0;
    if (r->scap < (size_t)(e - p) + 1) {
        r->scap = (size_t)(e - p) + 1;
        r->scratch = xrealloc(r->scratch, r->scap);
    }
    while (p < e) {
        if (*p != '\\') {
            r->scratch[w++] = (char)*p++;
        } else if (p[1] != 'u') {
            r->scratch[w++] = jtext_unescaped(p[1]);
            p += 2;
        } else {
            long cp = jtext_unicode(r, &p, e);
            if (cp < 0)
                return -1;
            w += jtext_put_utf8(r->scratch + w, (uint32_t)cp);
        }
    }
    *s = r->scratch;
    *n = w;
    return 0;
}

/* The string at r->p (its opening quote): its bytes in *s, *n, the input's own when it holds
 * no escape, else r->scratch's (good until the next escaped string). */
static int jtext_string(struct jtext_reader *r, const char **s, size_t *n)
{
    const unsigned char *from = r->p + 1, *q = from;
    int escaped = 0;
    for (;;) {
        q = jtext_plain_run(q, r->end);
        if (q >= r->end)
            return jtext_err(r, q, "premature end of input");
        if (*q == '"')
            break;
        if (*q < 0x20)
            return jtext_err(r, q, "control character in string");
        if (*q == '\\') {
            if (jtext_escape_ok(r, &q) != 0)
                return -1;
            escaped = 1;
            continue;
        }
        size_t k = jtext_utf8_len(q, r->end);
        if (k == 0)
            return jtext_err(r, q, "invalid UTF-8");
        q += k;
    }
    r->p = q + 1;
    if (escaped)
        return jtext_unescape(r, from, q, s, n);
    *s = (const char *)from;
    *n = (size_t)(q - from);
    return 0;
}

int jtext_read_string(const char **p, const char *end, char **scratch, size_t *scap, const char **s,
                      size_t *n)
{
    struct jtext_reader r = {.start = (const unsigned char *)*p,
                             .p = (const unsigned char *)*p,
                             .end = (const unsigned char *)end,
                             .scratch = *scratch,
                             .scap = *scap};
    int rc = *p < end && **p == '"' ? jtext_string(&r, s, n) : -1;
    *scratch = r.scratch;
    *scap = r.scap;
    if (rc == 0)
        *p = (const char *)r.p;
    return rc;
}

static json_t *jtext_integer(struct jtext_reader *r, const unsigned char *s, const unsigned char *e)
{
    int neg = *s == '-';
    unsigned long long v = 0, lim = neg ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
    for (const unsigned char *q = s + neg; q < e; q++) {
        unsigned d = *q - '0';
        if (v > (lim - d) / 10)
            return jtext_fail(r, s, neg ? "too big negative integer" : "too big integer");
        v = v * 10 + d;
    }
    if (!neg)
        return json_integer((json_int_t)v);
    return json_integer(v == lim ? LLONG_MIN : -(json_int_t)v);
}

static json_t *jtext_real(struct jtext_reader *r, const unsigned char *s, const unsigned char *e)
{
    char small[64], *t = small;
    size_t n = (size_t)(e - s);
    if (n >= sizeof(small))
        t = xmalloc(n + 1);
    memcpy(t, s, n);
    t[n] = '\0';
    errno = 0;
    double d = strtod(t, NULL); /* the C locale: memproxy never calls setlocale() */
    int overflow = isinf(d) && errno == ERANGE;
    if (t != small)
        free(t);
    if (overflow)
        return jtext_fail(r, s, "real number overflow");
    return json_real(d);
}

static const unsigned char *jtext_digits(const unsigned char *q, const unsigned char *end)
{
    while (q < end && jtext_digit(*q))
        q++;
    return q;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? : an integer without fraction or exponent. */
static json_t *jtext_number(struct jtext_reader *r)
{
    const unsigned char *s = r->p, *q = s + (*s == '-'), *end = r->end;
    int real = 0;
    if (q >= end || !jtext_digit(*q))
        return jtext_fail(r, s, "invalid token");
    q = *q == '0' ? q + 1 : jtext_digits(q, end);
    if (q < end && jtext_digit(*q)) /* a leading zero */
        return jtext_fail(r, s, "invalid token");
    if (q < end && *q == '.') {
        if (++q >= end || !jtext_digit(*q))
            return jtext_fail(r, s, "invalid token");
        q = jtext_digits(q, end), real = 1;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        if (++q < end && (*q == '+' || *q == '-'))
            q++;
        if (q >= end || !jtext_digit(*q))
            return jtext_fail(r, s, "invalid token");
        q = jtext_digits(q, end), real = 1;
    }
    r->p = q;
    return real ? jtext_real(r, s, q) : jtext_integer(r, s, q);
}

/* true, false, null: a word that goes on with more letters is no word (jansson's rule). */
static json_t *jtext_word(struct jtext_reader *r, const char *word, json_t *v)
{
    size_t n = strlen(word);
    const unsigned char *after = r->p + n;
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0 ||
        (after < r->end && ((*after | 0x20) >= 'a' && (*after | 0x20) <= 'z')))
        return jtext_fail(r, r->p, "invalid token");
    r->p = after;
    return v;
}

static json_t *jtext_value(struct jtext_reader *r);

static json_t *jtext_string_value(struct jtext_reader *r)
{
    const char *s;
    size_t n;
    if (jtext_string(r, &s, &n) != 0)
        return NULL;
    return json_stringn_nocheck(s, n);
}

/* After a member or element: 1 on ',', 0 on the closing byte, -1 otherwise. */
static int jtext_next(struct jtext_reader *r, unsigned char close, const char *expected)
{
    if (!jtext_ws(r) || (*r->p != ',' && *r->p != close))
        return jtext_err(r, r->p, expected);
    return *r->p++ == ',';
}

static json_t *jtext_array(struct jtext_reader *r)
{
    json_t *a = json_array();
    int more = 1;
    r->p++;
    if (jtext_ws(r) && *r->p == ']') {
        r->p++;
        return a;
    }
    while (more > 0) {
        json_t *v = jtext_value(r);
        if (v == NULL || json_array_append_new(a, v) != 0)
            goto fail;
        more = jtext_next(r, ']', "']' expected");
    }
    if (more == 0)
        return a;
fail:
    json_decref(a);
    return NULL;
}

/* One "key": value into o; a key already there is an error under JSON_REJECT_DUPLICATES. */
static int jtext_member(struct jtext_reader *r, json_t *o)
{
    const char *k;
    size_t kn;
    char *own = NULL;
    if (!jtext_ws(r) || *r->p != '"')
        return jtext_err(r, r->p, "string or '}' expected");
    if (jtext_string(r, &k, &kn) != 0)
        return -1;
    if (k == r->scratch) /* the value may decode another escaped string over it */
        k = own = xstrndup(k, kn);
    int rc = -1;
    if (!jtext_ws(r) || *r->p != ':') {
        jtext_err(r, r->p, "':' expected");
        goto out;
    }
    r->p++;
    size_t before = json_object_size(o);
    json_t *v = jtext_value(r);
    if (v == NULL || json_object_setn_new_nocheck(o, k, kn, v) != 0)
        goto out;
    if ((r->flags & JSON_REJECT_DUPLICATES) && json_object_size(o) == before) {
        jtext_err(r, r->p, "duplicate object key");
        goto out;
    }
    rc = 0;
out:
    free(own);
    return rc;
}

static json_t *jtext_object(struct jtext_reader *r)
{
    json_t *o = json_object();
    int more = 1;
    r->p++;
    if (jtext_ws(r) && *r->p == '}') {
        r->p++;
        return o;
    }
    while (more > 0) {
        if (jtext_member(r, o) != 0)
            goto fail;
        more = jtext_next(r, '}', "'}' expected");
    }
    if (more == 0)
        return o;
fail:
    json_decref(o);
    return NULL;
}

/* How deep an object that starts here may nest (itself counted) under the caps: deeper is
 * read, and fails, as ever. r->nest counts the object already. */
static size_t jtext_room(const struct jtext_reader *r)
{
    size_t by_nest = r->max_nest - (r->nest - 1), by_depth = JTEXT_MAX_DEPTH - r->depth;
    return by_nest < by_depth ? by_nest : by_depth;
}

/* The object at r->p from r->memo when these bytes were read before, else read and kept
 * (when it fits the caps here). The one that followed the previous object last time is
 * tried first (jmemo_next); otherwise the object's end is found and its bytes looked up. */
static json_t *jtext_memo_object(struct jtext_reader *r)
{
    const char *s = (const char *)r->p;
    size_t avail = (size_t)(r->end - r->p), room = jtext_room(r), nest = 0;
    struct jmemo_key prev = r->prev, key;
    r->prev = (struct jmemo_key){0};
    json_t *v = jmemo_next(r->memo, &prev, r->seed, r->flags, s, avail, room, &key);
    if (v != NULL) {
        r->p += key.len;
        r->prev = key;
        return json_incref(v);
    }
    const char *e = jtext_container_end(s, (const char *)r->end, &nest);
    int fits = e != NULL && nest <= room;
    v = fits ? jmemo_get(r->memo, r->seed, r->flags, s, (size_t)(e - s), &key) : NULL;
    if (v != NULL) {
        r->p = (const unsigned char *)e;
        json_incref(v);
    } else {
        v = jtext_object(r);
        if (v == NULL || !fits || r->p != (const unsigned char *)e)
            return v;
        jmemo_put(r->memo, r->seed, r->flags, s, (size_t)(e - s), v, nest, &key);
    }
    jmemo_set_next(r->memo, &prev, r->seed, r->flags, &key);
    r->prev = key;
    return v;
}

static json_t *jtext_value(struct jtext_reader *r)
{
    json_t *v;
    if (!jtext_ws(r))
        return jtext_fail(r, r->p, "premature end of input");
    if (++r->depth > JTEXT_MAX_DEPTH)
        return jtext_fail_deep(r);
    if (++r->values > jtext_max_values) {
        r->depth--;
        return jtext_fail_code(r, json_error_out_of_memory, "too many values");
    }
    if (r->depth == JTEXT_MEMO_DEPTH - 1)
        r->prev = (struct jmemo_key){0}; /* a new container: no object before in it */
    switch (*r->p) {
    case '{':
    case '[':
        if (++r->nest > r->max_nest)
            v = jtext_fail_deep(r);
        else if (*r->p == '[')
            v = jtext_array(r);
        else if (r->memo != NULL && r->depth == JTEXT_MEMO_DEPTH)
            v = jtext_memo_object(r);
        else
            v = jtext_object(r);
        r->nest--;
        break;
    case '"':
        v = jtext_string_value(r);
        break;
    case 't':
        v = jtext_word(r, "true", json_true());
        break;
    case 'f':
        v = jtext_word(r, "false", json_false());
        break;
    case 'n':
        v = jtext_word(r, "null", json_null());
        break;
    default:
        v = *r->p == '-' || jtext_digit(*r->p) ? jtext_number(r)
                                               : jtext_fail(r, r->p, "invalid token");
    }
    r->depth--;
    return v;
}

json_t *jtext_load(const char *buf, size_t len, size_t flags, json_error_t *err)
{
    return jtext_load_nested(buf, len, flags, JTEXT_MAX_DEPTH, err);
}

json_t *jtext_load_nested(const char *buf, size_t len, size_t flags, size_t max_nest,
                          json_error_t *err)
{
    return jtext_load_memo(buf, len, flags, max_nest, NULL, 0, err);
}

json_t *jtext_load_memo(const char *buf, size_t len, size_t flags, size_t max_nest,
                        struct jmemo *memo, uint64_t seed, json_error_t *err)
{
    if ((flags & ~(size_t)(JSON_REJECT_DUPLICATES | JSON_DECODE_ANY)) != 0)
        log_fatal("jtext: a flag it does not implement (0x%zx)",
                  (size_t)flags); /* a caller's bug */
    const unsigned char *b = (const unsigned char *)(buf ? buf : "");
    struct jtext_reader r = {.start = b,
                             .p = b,
                             .end = b + (buf ? len : 0),
                             .flags = flags,
                             .max_nest = max_nest,
                             .memo = memo,
                             .seed = seed};
    json_t *v = NULL;
    if (err != NULL) {
        memset(err, 0, sizeof(*err));
        snprintf(err->source, sizeof(err->source), "<buffer>");
    }
    r.err = err;
    if (!jtext_ws(&r) || (!(flags & JSON_DECODE_ANY) && *r.p != '[' && *r.p != '{'))
        jtext_fail(&r, r.p, "'[' or '{' expected");
    else
        v = jtext_value(&r);
    if (v != NULL && jtext_ws(&r)) {
        jtext_fail(&r, r.p, "end of file expected");
        json_decref(v);
        v = NULL;
    }
    free(r.scratch);
    return v;
}

/* ---- writing ---- */

struct jtext_writer {
    char *d;
    size_t len, cap;
    struct jmemo *memo; /* texts of objects at JTEXT_MEMO_DEPTH, or NULL */
};

static void jtext_reserve(struct jtext_writer *w, size_t n)
{
    if (w->cap - w->len >= n)
        return;
    size_t cap = w->cap * 2;
    if (cap < w->len + n)
        cap = w->len + n;
    w->d = xrealloc(w->d, cap);
    w->cap = cap;
}

static void jtext_put(struct jtext_writer *w, const void *s, size_t n)
{
    jtext_reserve(w, n);
    memcpy(w->d + w->len, s, n);
    w->len += n;
}

static void jtext_putc(struct jtext_writer *w, char c)
{
    jtext_reserve(w, 1);
    w->d[w->len++] = c;
}

static void jtext_put_escape(struct jtext_writer *w, unsigned char c)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *short_form = c == '"'    ? "\\\""
                             : c == '\\' ? "\\\\"
                             : c == '\b' ? "\\b"
                             : c == '\f' ? "\\f"
                             : c == '\n' ? "\\n"
                             : c == '\r' ? "\\r"
                             : c == '\t' ? "\\t"
                                         : NULL;
    if (short_form != NULL) {
        jtext_put(w, short_form, 2);
        return;
    }
    char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xF]}; /* c < 0x20 */
    jtext_put(w, u, sizeof(u));
}

static int jtext_put_string(struct jtext_writer *w, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;
    jtext_reserve(w, n + 2);
    jtext_putc(w, '"');
    while (p < end) {
        if (jtext_plain(*p)) {
            p = jtext_plain_run(p, end);
        } else if (*p >= 0x80) {
            size_t k = jtext_utf8_len(p, end);
            if (k == 0)
                return -1;
            p += k;
        } else {
            jtext_put(w, run, (size_t)(p - run));
            jtext_put_escape(w, *p);
            run = ++p;
        }
    }
    jtext_put(w, run, (size_t)(p - run));
    jtext_putc(w, '"');
    return 0;
}

static void jtext_put_integer(struct jtext_writer *w, json_int_t v)
{
    char b[24], *e = b + sizeof(b), *q = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--q = '-';
    jtext_put(w, q, (size_t)(e - q));
}

/* jansson's form: "%.17g", ".0" added when it would read back as an integer, and the
 * exponent without '+' or leading zeros. */
static void jtext_put_real(struct jtext_writer *w, double d)
{
    char b[48];
    int n = snprintf(b, sizeof(b), "%.17g", d);
    char *e = memchr(b, 'e', (size_t)n);
    if (e == NULL) {
        if (memchr(b, '.', (size_t)n) == NULL)
            memcpy(b + n, ".0", 3), n += 2;
        jtext_put(w, b, (size_t)n);
        return;
    }
    char *digits = e + 1 + (e[1] == '-'), *from = e + 1 + (e[1] == '-' || e[1] == '+');
    while (*from == '0')
        from++;
    memmove(digits, from, strlen(from) + 1);
    jtext_put(w, b, strlen(b));
}

static int jtext_put_value(struct jtext_writer *w, const json_t *j, size_t depth);

static int jtext_put_array(struct jtext_writer *w, const json_t *a, size_t depth)
{
    size_t n = json_array_size(a);
    jtext_putc(w, '[');
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            jtext_putc(w, ',');
        if (jtext_put_value(w, json_array_get(a, i), depth + 1) != 0)
            return -1;
    }
    jtext_putc(w, ']');
    return 0;
}

static int jtext_put_object(struct jtext_writer *w, const json_t *o, size_t depth)
{
    json_t *obj = (json_t *)o; /* jansson's iterators take a non-const object */
    void *first = json_object_iter(obj);
    jtext_putc(w, '{');
    for (void *it = first; it != NULL; it = json_object_iter_next(obj, it)) {
        if (it != first)
            jtext_putc(w, ',');
        if (jtext_put_string(w, json_object_iter_key(it), json_object_iter_key_len(it)) != 0)
            return -1;
        jtext_putc(w, ':');
        if (jtext_put_value(w, json_object_iter_value(it), depth + 1) != 0)
            return -1;
    }
    jtext_putc(w, '}');
    return 0;
}

/* An object at the memo's depth: its text from the memo when written before, else written and
 * kept there (when the memo holds the object). */
static int jtext_put_memo_object(struct jtext_writer *w, const json_t *o, size_t depth)
{
    size_t n, at = w->len;
    struct jmemo_tree *t = jmemo_find(w->memo, o);
    const char *text = jmemo_text(t, &n);
    if (text != NULL) {
        jtext_put(w, text, n);
        return 0;
    }
    if (jtext_put_object(w, o, depth) != 0)
        return -1;
    jmemo_set_text(w->memo, t, w->d + at, w->len - at);
    return 0;
}

static int jtext_put_value(struct jtext_writer *w, const json_t *j, size_t depth)
{
    if (j == NULL || depth > JTEXT_MAX_DEPTH)
        return -1;
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        if (w->memo != NULL && depth == JTEXT_MEMO_DEPTH)
            return jtext_put_memo_object(w, j, depth);
        return jtext_put_object(w, j, depth);
    case JSON_ARRAY:
        return jtext_put_array(w, j, depth);
    case JSON_STRING:
        return jtext_put_string(w, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        jtext_put_integer(w, json_integer_value(j));
        return 0;
    case JSON_REAL:
        jtext_put_real(w, json_real_value(j));
        return 0;
    case JSON_TRUE:
        jtext_put(w, "true", 4);
        return 0;
    case JSON_FALSE:
        jtext_put(w, "false", 5);
        return 0;
    case JSON_NULL:
        jtext_put(w, "null", 4);
        return 0;
    }
    return -1;
}

char *jtext_dump(const json_t *j, size_t *len)
{
    return jtext_dump_memo(j, NULL, len);
}

char *jtext_dump_memo(const json_t *j, struct jmemo *memo, size_t *len)
{
    /* with a memo it writes an upstream request body, ~3.3 KB for a 32-message window: from
     * 256 bytes that took four reallocs, each a copy */
    size_t cap = memo != NULL ? 4096 : 256;
    struct jtext_writer w = {.d = xmalloc(cap), .cap = cap, .memo = memo};
    if (jtext_put_value(&w, j, 1) != 0) {
        free(w.d);
        return NULL;
    }
    jtext_putc(&w, '\0');
    if (len != NULL)
        *len = w.len - 1;
    return w.d;
}
