#include "base/tiktoken.h"

#include "base/unicat.h"
#include "base/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* An open-addressed table of the ranks, keyed by the token's bytes (kept in one pool). The
 * hash's top 16 bits are kept beside each slot so a probe rarely reads the pool. */
struct tiktoken_slot {
    uint32_t off, rank; /* rank UINT32_MAX: an empty slot */
    uint16_t len, tag;
};

struct tiktoken {
    enum tiktoken_pattern pattern;
    unsigned id; /* tiktoken_id() */
    struct tiktoken_slot *slots;
    size_t mask, n;
    unsigned char *pool;
    size_t pool_len, pool_cap;
};

#define TIKTOKEN_NONE UINT32_MAX

static void tiktoken_ascii_init(void);
static atomic_uint tiktoken_ids;
static pthread_once_t tiktoken_ascii_once = PTHREAD_ONCE_INIT;

static uint32_t tiktoken_hash(const unsigned char *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* The slot that holds these bytes, or the empty one where they would go. */
static struct tiktoken_slot *tiktoken_slot(const struct tiktoken *tk, const unsigned char *p,
                                           size_t n)
{
    uint32_t h = tiktoken_hash(p, n);
    uint16_t tag = (uint16_t)(h >> 16);
    for (size_t i = h & tk->mask;; i = (i + 1) & tk->mask) {
        struct tiktoken_slot *s = &tk->slots[i];
        if (s->rank == TIKTOKEN_NONE ||
            (s->tag == tag && s->len == n && memcmp(tk->pool + s->off, p, n) == 0))
            return s;
    }
}

static uint32_t tiktoken_rank(const struct tiktoken *tk, const unsigned char *p, size_t n)
{
    return n > TIKTOKEN_MAX_TOKEN ? TIKTOKEN_NONE : tiktoken_slot(tk, p, n)->rank;
}

/* ---- the ranks file ---- */

static int tiktoken_b64(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decode standard base64 (padded) of n characters into out (TIKTOKEN_MAX_TOKEN bytes): the
 * length, or 0 when it is not base64 or decodes to nothing or too much. */
static size_t tiktoken_unbase64(const char *s, size_t n, unsigned char *out)
{
    size_t len = 0, pad = 0;
    uint32_t acc = 0;
    if (n == 0 || n % 4 != 0 || n / 4 * 3 > TIKTOKEN_MAX_TOKEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int v = s[i] == '=' && i >= n - 2 ? 0 : tiktoken_b64((unsigned char)s[i]);
        if (v < 0 || (pad > 0 && s[i] != '='))
            return 0;
        pad += s[i] == '=';
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            out[len++] = (unsigned char)(acc >> 16);
            out[len++] = (unsigned char)(acc >> 8);
            out[len++] = (unsigned char)acc;
        }
    }
    return len > pad ? len - pad : 0;
}

static int tiktoken_add(struct tiktoken *tk, const unsigned char *p, size_t n, uint32_t rank)
{
    struct tiktoken_slot *s = tiktoken_slot(tk, p, n);
    if (s->rank != TIKTOKEN_NONE)
        return -1;
    if (tk->pool_len + n > tk->pool_cap) {
        tk->pool_cap = (tk->pool_len + n) * 2;
        tk->pool = xrealloc(tk->pool, tk->pool_cap);
    }
    memcpy(tk->pool + tk->pool_len, p, n);
    *s = (struct tiktoken_slot){.off = (uint32_t)tk->pool_len,
                                .rank = rank,
                                .len = (uint16_t)n,
                                .tag = (uint16_t)(tiktoken_hash(p, n) >> 16)};
    tk->pool_len += n;
    tk->n++;
    return 0;
}

/* One line, "<base64> <rank>": 0, or -1 with *why set. */
static int tiktoken_line(struct tiktoken *tk, const char *s, size_t n, const char **why)
{
    unsigned char bytes[TIKTOKEN_MAX_TOKEN];
    const char *sp = memchr(s, ' ', n);
    size_t len = sp != NULL ? tiktoken_unbase64(s, (size_t)(sp - s), bytes) : 0;
    unsigned long rank = 0;
    size_t i = sp != NULL ? (size_t)(sp - s) + 1 : n;
    if (sp == NULL) {
        *why = "a line is '<base64 of the token's bytes> <rank>'";
        return -1;
    }
    if (len == 0) {
        *why = "the token is not base64 of 1 to 512 bytes";
        return -1;
    }
    if (i == n)
        goto bad_rank;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || rank >= TIKTOKEN_MAX_RANKS)
            goto bad_rank;
        rank = rank * 10 + (unsigned long)(s[i] - '0');
    }
    if (rank >= TIKTOKEN_MAX_RANKS)
        goto bad_rank;
    if (tiktoken_add(tk, bytes, len, (uint32_t)rank) != 0) {
        *why = "these bytes have a rank already";
        return -1;
    }
    return 0;
bad_rank:
    *why = "the rank is not a whole number below 2097152";
    return -1;
}

/* Lines that hold something: a slot count that keeps the table at most half full. */
static size_t tiktoken_slots_for(const char *text, size_t len)
{
    size_t lines = 1, cap = 1024;
    for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))) != NULL; p++)
        lines++;
    while (cap < lines * 2)
        cap *= 2;
    return cap;
}

struct tiktoken *tiktoken_parse(const char *text, size_t len, const char *name,
                                enum tiktoken_pattern pattern, char **err)
{
    struct tiktoken *tk = xcalloc(1, sizeof(*tk));
    size_t line = 0, cap = tiktoken_slots_for(text, len);
    pthread_once(&tiktoken_ascii_once, tiktoken_ascii_init); /* before any count */
    const char *why = NULL;
    tk->pattern = pattern;
    tk->id = atomic_fetch_add(&tiktoken_ids, 1) % TIKTOKEN_IDS + 1;
    tk->mask = cap - 1;
    tk->slots = xmalloc(cap * sizeof(*tk->slots));
    memset(tk->slots, 0xff, cap * sizeof(*tk->slots)); /* every rank TIKTOKEN_NONE */
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl != NULL ? (size_t)(nl - text) : len, n = end - at;
        line++;
        if (n > 0 && text[at + n - 1] == '\r')
            n--;
        if (n > 0 && tiktoken_line(tk, text + at, n, &why) != 0)
            goto fail;
        at = end + 1;
    }
    if (tk->n == 0) {
        why = "no ranks";
        goto fail;
    }
    return tk;
fail:
    *err = xasprintf("%s:%zu: %s", name, line, why);
    tiktoken_destroy(tk);
    return NULL;
}

/* The whole of regular file f, at most TIKTOKEN_MAX_FILE bytes: malloc'd, or NULL with *err. */
static char *tiktoken_read(FILE *f, const char *path, size_t *len, char **err)
{
    struct stat st;
    char *text = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        *err = xasprintf("%s: not a regular file", path);
        return NULL;
    }
    if (st.st_size > (off_t)TIKTOKEN_MAX_FILE) {
        *err = xasprintf("%s: larger than %u MiB", path, TIKTOKEN_MAX_FILE >> 20);
        return NULL;
    }
    text = xmalloc((size_t)st.st_size + 1);
    *len = fread(text, 1, (size_t)st.st_size + 1, f);
    if (ferror(f) || *len != (size_t)st.st_size) { /* changed while read */
        *err = xasprintf("%s: could not be read whole", path);
        free(text);
        return NULL;
    }
    return text;
}

struct tiktoken *tiktoken_load(const char *path, enum tiktoken_pattern pattern, char **err)
{
    struct tiktoken *tk = NULL;
    struct stat st;
    size_t len = 0;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* a FIFO's open would wait */
        *err = xasprintf("%s: not a regular file", path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *err = xasprintf("%s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = tiktoken_read(f, path, &len, err);
    if (text != NULL)
        tk = tiktoken_parse(text, len, path, pattern, err);
    fclose(f);
    free(text);
    return tk;
}

int tiktoken_pattern_named(const char *name, enum tiktoken_pattern *out)
{
    if (strcmp(name, "o200k") == 0)
        *out = TIKTOKEN_O200K;
    else if (strcmp(name, "cl100k") == 0)
        *out = TIKTOKEN_CL100K;
    else
        return -1;
    return 0;
}

size_t tiktoken_size(const struct tiktoken *tk)
{
    return tk->n;
}

unsigned tiktoken_id(const struct tiktoken *tk)
{
    return tk != NULL ? tk->id : 0;
}

void tiktoken_destroy(struct tiktoken *tk)
{
    if (tk == NULL)
        return;
    free(tk->slots);
    free(tk->pool);
    free(tk);
}

/* ---- the pre-tokenizers: o200k's and cl100k's patterns ----
 *
 * o200k, its seven alternatives (UP = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
 * LO = [\p{Ll}\p{Lm}\p{Lo}\p{M}], C = (?i:'s|'t|'re|'ve|'m|'ll|'d)):
 *         [^\r\n\p{L}\p{N}]?UP*LO+C?|[^\r\n\p{L}\p{N}]?UP+LO*C?
 *       |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * cl100k: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *       | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * Each function below matches one part at byte i of the text and returns where the match
 * ends: i when it does not match. */

struct tiktoken_text {
    const unsigned char *s;
    size_t n;
};

/* The character at i: its length (0 at the end), its code point and class. */
static size_t tiktoken_char(const struct tiktoken_text *t, size_t i, uint32_t *cp, enum unicat *cat)
{
    if (i >= t->n)
        return 0;
    size_t len = util_utf8_next(t->s + i, t->n - i, cp);
    if (len == 0) { /* not UTF-8: a character of its own, of no class */
        *cp = 0xfffd;
        *cat = UNICAT_OTHER;
        return 1;
    }
    *cat = unicat_of(*cp);
    return len;
}

enum tiktoken_set {
    TIKTOKEN_CRLF = 1,    /* \r \n */
    TIKTOKEN_SPACE = 2,   /* \s */
    TIKTOKEN_LETTER = 4,  /* \p{L} */
    TIKTOKEN_NUMBER = 8,  /* \p{N} */
    TIKTOKEN_UP = 16,     /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
    TIKTOKEN_LO = 32,     /* [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
    TIKTOKEN_PREFIX = 64, /* [^\r\n\p{L}\p{N}] */
    TIKTOKEN_PUNCT = 128, /* [^\s\p{L}\p{N}] */
    TIKTOKEN_SLASH = 256, /* / (o200k's punctuation run ends with [\r\n/]*) */
};

static unsigned tiktoken_sets(uint32_t cp, enum unicat cat)
{
    static const unsigned of[] = {
        [UNICAT_OTHER] = TIKTOKEN_PREFIX | TIKTOKEN_PUNCT,
        [UNICAT_UPPER] = TIKTOKEN_LETTER | TIKTOKEN_UP,
        [UNICAT_LOWER] = TIKTOKEN_LETTER | TIKTOKEN_LO,
        [UNICAT_LETTER] = TIKTOKEN_LETTER | TIKTOKEN_UP | TIKTOKEN_LO,
        [UNICAT_MARK] = TIKTOKEN_UP | TIKTOKEN_LO | TIKTOKEN_PREFIX | TIKTOKEN_PUNCT,
        [UNICAT_NUMBER] = TIKTOKEN_NUMBER,
        [UNICAT_SPACE] = TIKTOKEN_SPACE | TIKTOKEN_PREFIX,
    };
    if (cp == '\r' || cp == '\n')
        return TIKTOKEN_CRLF | TIKTOKEN_SPACE;
    return of[cat] | (cp == '/' ? TIKTOKEN_SLASH : 0);
}

/* ASCII's sets, worked out once: most text a voice agent sends is ASCII, and a character is
 * looked at several times as the alternatives are tried. */
static unsigned tiktoken_ascii[128];

static void tiktoken_ascii_init(void)
{
    for (uint32_t c = 0; c < 128; c++)
        tiktoken_ascii[c] = tiktoken_sets(c, unicat_of(c));
}

/* The sets the character at i is in, its length in *len (0 and no sets at the end). */
static unsigned tiktoken_at(const struct tiktoken_text *t, size_t i, size_t *len)
{
    uint32_t cp;
    enum unicat cat;
    if (i < t->n && t->s[i] < 0x80) {
        *len = 1;
        return tiktoken_ascii[t->s[i]];
    }
    *len = tiktoken_char(t, i, &cp, &cat);
    return *len == 0 ? 0 : tiktoken_sets(cp, cat);
}

/* A run of characters in any of sets from i, at most max of them. */
static size_t tiktoken_run(const struct tiktoken_text *t, size_t i, unsigned sets, size_t max)
{
    size_t len;
    for (size_t k = 0; k < max && (tiktoken_at(t, i, &len) & sets); k++)
        i += len;
    return i;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d); case-insensitive as Unicode folds: 's also matches U+017F. */
static size_t tiktoken_contraction(const struct tiktoken_text *t, size_t i)
{
    if (i + 1 >= t->n || t->s[i] != '\'')
        return i;
    int c = t->s[i + 1] | 0x20, d = i + 2 < t->n ? t->s[i + 2] | 0x20 : 0;
    if (c == 's' || c == 't' || c == 'm' || c == 'd')
        return i + 2;
    if ((c == 'r' || c == 'v') && d == 'e')
        return i + 3;
    if (c == 'l' && d == 'l')
        return i + 3;
    if (t->s[i + 1] == 0xc5 && i + 2 < t->n && t->s[i + 2] == 0xbf)
        return i + 3;
    return i;
}

/* The start of the character before i (not before from). */
static size_t tiktoken_back(const struct tiktoken_text *t, size_t from, size_t i)
{
    size_t k = i - 1;
    while (k > from && i - k < 4 && (t->s[k] & 0xc0) == 0x80)
        k--;
    size_t len;
    return tiktoken_at(t, k, &len) && k + len == i ? k : i - 1;
}

/* o200k's letters at j: UP* LO+ (alt 1) or UP+ LO* (alt 2), then a contraction. */
static size_t tiktoken_o200k_letters(const struct tiktoken_text *t, size_t j, int alt)
{
    size_t up = tiktoken_run(t, j, TIKTOKEN_UP, SIZE_MAX);
    if (alt == 2)
        return up > j ? tiktoken_contraction(t, tiktoken_run(t, up, TIKTOKEN_LO, SIZE_MAX)) : j;
    for (size_t k = up;; k = tiktoken_back(t, j, k)) { /* UP* gives back until LO+ matches */
        size_t lo = tiktoken_run(t, k, TIKTOKEN_LO, SIZE_MAX);
        if (lo > k)
            return tiktoken_contraction(t, lo);
        if (k == j)
            return j;
    }
}

/* [^\r\n\p{L}\p{N}]? then the letters: with the prefix first, then without. */
static size_t tiktoken_word(const struct tiktoken_text *t, size_t i, int alt)
{
    size_t len, e;
    if ((tiktoken_at(t, i, &len) & TIKTOKEN_PREFIX) != 0) {
        e = alt == 0 ? tiktoken_run(t, i + len, TIKTOKEN_LETTER, SIZE_MAX)
                     : tiktoken_o200k_letters(t, i + len, alt);
        if (e > i + len)
            return e;
    }
    return alt == 0 ? tiktoken_run(t, i, TIKTOKEN_LETTER, SIZE_MAX)
                    : tiktoken_o200k_letters(t, i, alt);
}

/* " ?[^\s\p{L}\p{N}]+" then [\r\n]* (cl100k) or [\r\n/]* (o200k). */
static size_t tiktoken_punct(const struct tiktoken_text *t, size_t i, unsigned tail)
{
    size_t len, j = i;
    if (t->s[i] == ' ' && (tiktoken_at(t, i + 1, &len) & TIKTOKEN_PUNCT))
        j = i + 1;
    size_t e = tiktoken_run(t, j, TIKTOKEN_PUNCT, SIZE_MAX);
    return e > j ? tiktoken_run(t, e, tail, SIZE_MAX) : i;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ */
static size_t tiktoken_spaces(const struct tiktoken_text *t, size_t i)
{
    size_t e = tiktoken_run(t, i, TIKTOKEN_SPACE, SIZE_MAX), last_crlf = i, k, len;
    for (k = i; k < e; k += len)
        if (tiktoken_at(t, k, &len) & TIKTOKEN_CRLF)
            last_crlf = k + len;
    if (last_crlf > i)
        return last_crlf;
    if (e == t->n || e == i)
        return e;
    size_t before = tiktoken_back(t, i, e); /* leave the last space to the next word */
    return before > i ? before : e;
}

/* The end of the piece that starts at i. */
static size_t tiktoken_piece(const struct tiktoken_text *t, size_t i, enum tiktoken_pattern p)
{
    size_t e;
    if (p == TIKTOKEN_CL100K) {
        if ((e = tiktoken_contraction(t, i)) > i || (e = tiktoken_word(t, i, 0)) > i)
            return e;
    } else if ((e = tiktoken_word(t, i, 1)) > i || (e = tiktoken_word(t, i, 2)) > i) {
        return e;
    }
    if ((e = tiktoken_run(t, i, TIKTOKEN_NUMBER, 3)) > i)
        return e;
    unsigned tail = TIKTOKEN_CRLF | (p == TIKTOKEN_O200K ? TIKTOKEN_SLASH : 0);
    if ((e = tiktoken_punct(t, i, tail)) > i || (e = tiktoken_spaces(t, i)) > i)
        return e;
    size_t len;
    tiktoken_at(t, i, &len);
    return i + len; /* not reached: every character is in one of the above */
}

/* ---- byte-pair encoding ---- */

/* The tokens of one piece of at most TIKTOKEN_PIECE_MAX bytes: tiktoken's merge, the pair
 * of neighbouring parts with the lowest rank first, until no pair has a rank. */
static size_t tiktoken_bpe(const struct tiktoken *tk, const unsigned char *p, size_t n)
{
    size_t start[TIKTOKEN_PIECE_MAX + 1], parts = n;
    uint32_t pair[TIKTOKEN_PIECE_MAX];
    if (n <= 1 || tiktoken_rank(tk, p, n) != TIKTOKEN_NONE)
        return n == 0 ? 0 : 1;
    for (size_t i = 0; i <= n; i++)
        start[i] = i;
    for (size_t i = 0; i + 1 < parts; i++)
        pair[i] = tiktoken_rank(tk, p + i, 2);
    while (parts > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < parts; i++)
            best = pair[i] < pair[best] ? i : best;
        if (pair[best] == TIKTOKEN_NONE)
            break;
        /* parts best and best + 1 become one: start[best + 1] goes */
        memmove(&start[best + 1], &start[best + 2], (parts - best - 1) * sizeof(*start));
        if (best + 3 < parts) /* pair best + 1 (the part merged, with its next) goes */
            memmove(&pair[best + 1], &pair[best + 2], (parts - best - 3) * sizeof(*pair));
        parts--;
        if (best + 1 < parts)
            pair[best] = tiktoken_rank(tk, p + start[best], start[best + 2] - start[best]);
        if (best > 0)
            pair[best - 1] =
                tiktoken_rank(tk, p + start[best - 1], start[best + 1] - start[best - 1]);
    }
    return parts;
}

/* A piece in parts of at most TIKTOKEN_PIECE_MAX bytes, cut between characters. */
static size_t tiktoken_piece_tokens(const struct tiktoken *tk, const struct tiktoken_text *t,
                                    size_t i, size_t e)
{
    size_t tokens = 0;
    while (e - i > TIKTOKEN_PIECE_MAX) {
        size_t cut = i + TIKTOKEN_PIECE_MAX;
        while (cut > i + 1 && (t->s[cut] & 0xc0) == 0x80)
            cut--;
        tokens += tiktoken_bpe(tk, t->s + i, cut - i);
        i = cut;
    }
    return tokens + tiktoken_bpe(tk, t->s + i, e - i);
}

size_t tiktoken_count(const struct tiktoken *tk, const char *text, size_t len)
{
    /* the pieces are cut at the exact part's end, so no piece is read past it */
    struct tiktoken_text t = {(const unsigned char *)text,
                              len < TIKTOKEN_EXACT_MAX ? len : TIKTOKEN_EXACT_MAX};
    size_t tokens = 0, i = 0;
    while (i < t.n) {
        size_t e = tiktoken_piece(&t, i, tk->pattern);
        tokens += tiktoken_piece_tokens(tk, &t, i, e);
        i = e;
    }
    if (i < len) /* the rest at the rate of the part counted */
        tokens += (size_t)((double)(len - i) * (double)tokens / (double)i + 0.5);
    return tokens;
}
