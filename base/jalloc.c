#include "base/jalloc.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define JALLOC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JALLOC_SANITIZED 1
#endif
#endif
#ifndef JALLOC_SANITIZED
#define JALLOC_SANITIZED 0
#endif

#define JALLOC_HEADER 16 /* keeps the block 16-byte aligned, as malloc's */
#define JALLOC_STEP   16
#define JALLOC_SMALL  16 /* classes of 16, 32, ... 256 bytes */
#define JALLOC_BIG    32 /* classes of 320, 384, 448, 512, 640, ... 65536 bytes */
#define JALLOC_LARGE  UINT32_MAX

/* A small class keeps JALLOC_CLASS_BYTES of blocks (with their headers); the counts fit the
 * table's 16 bits (the 16-byte class's is the largest). */
#define JALLOC_SMALL_CAP(c) (JALLOC_CLASS_BYTES / (JALLOC_HEADER + ((c) + 1) * JALLOC_STEP))
_Static_assert(JALLOC_SMALL_CAP(0) <= UINT16_MAX, "JALLOC_CLASS_BYTES too large for the caps");
static const uint16_t jalloc_small_cap[JALLOC_SMALL] = {
    JALLOC_SMALL_CAP(0),  JALLOC_SMALL_CAP(1),  JALLOC_SMALL_CAP(2),  JALLOC_SMALL_CAP(3),
    JALLOC_SMALL_CAP(4),  JALLOC_SMALL_CAP(5),  JALLOC_SMALL_CAP(6),  JALLOC_SMALL_CAP(7),
    JALLOC_SMALL_CAP(8),  JALLOC_SMALL_CAP(9),  JALLOC_SMALL_CAP(10), JALLOC_SMALL_CAP(11),
    JALLOC_SMALL_CAP(12), JALLOC_SMALL_CAP(13), JALLOC_SMALL_CAP(14), JALLOC_SMALL_CAP(15),
};

struct jalloc_cache {
    void *head[JALLOC_SMALL + JALLOC_BIG]; /* freed blocks; the link is in their first bytes */
    uint32_t n[JALLOC_SMALL + JALLOC_BIG];
    size_t big_bytes; /* kept in the big classes, at most JALLOC_BIG_BYTES */
    int registered;   /* its thread's exit returns the lists to malloc */
};

static _Thread_local struct jalloc_cache jalloc_tls;
static pthread_key_t jalloc_key;
static int jalloc_on;

/* The class of a block for size bytes, 0 < size <= JALLOC_BIG_MAX (0 is served as 1): 16-byte
 * steps to 256, then four steps per doubling (so a big block is at most a quarter larger
 * than asked for; 1024 and 65536 are classes of their own). */
static uint32_t jalloc_class(size_t size)
{
    if (size <= JALLOC_SMALL * JALLOC_STEP)
        return size == 0 ? 0 : (uint32_t)((size - 1) / JALLOC_STEP);
    size_t x = size - 1;
    unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)x); /* 8..15 */
    return JALLOC_SMALL + (b - 8) * 4 + (uint32_t)(x >> (b - 2)) - 4;
}

static size_t jalloc_class_size(uint32_t c)
{
    if (c < JALLOC_SMALL)
        return (size_t)(c + 1) * JALLOC_STEP;
    uint32_t k = c - JALLOC_SMALL;
    return (size_t)(5 + k % 4) << (6 + k / 4);
}

static void *jalloc_header(void *p)
{
    return (char *)p - JALLOC_HEADER;
}

static void jalloc_flush(void *arg)
{
    struct jalloc_cache *t = arg;
    for (uint32_t c = 0; c < JALLOC_SMALL + JALLOC_BIG; c++) {
        while (t->head[c] != NULL) {
            void *p = t->head[c];
            t->head[c] = *(void **)p;
            free(jalloc_header(p));
        }
        t->n[c] = 0;
    }
    t->big_bytes = 0;
    t->registered = 0;
}

static void *jalloc_block(uint32_t cls, size_t size)
{
    uint32_t *h = malloc(JALLOC_HEADER + size);
    if (h == NULL)
        return NULL;
    *h = cls;
    return (char *)h + JALLOC_HEADER;
}

void *jalloc_malloc(size_t size)
{
    if (size > JALLOC_BIG_MAX)
        return size > SIZE_MAX - JALLOC_HEADER ? NULL : jalloc_block(JALLOC_LARGE, size);
    uint32_t c = jalloc_class(size);
    struct jalloc_cache *t = &jalloc_tls;
    void *p = t->head[c];
    if (p == NULL)
        return jalloc_block(c, jalloc_class_size(c));
    t->head[c] = *(void **)p;
    t->n[c]--;
    if (c >= JALLOC_SMALL)
        t->big_bytes -= jalloc_class_size(c);
    return p;
}

/* Whether t has room to keep a freed block of class c. */
static int jalloc_room(const struct jalloc_cache *t, uint32_t c)
{
    if (c < JALLOC_SMALL)
        return t->n[c] < jalloc_small_cap[c];
    return t->big_bytes + jalloc_class_size(c) <= JALLOC_BIG_BYTES;
}

void jalloc_free(void *p)
{
    if (p == NULL)
        return;
    uint32_t c = *(uint32_t *)jalloc_header(p);
    struct jalloc_cache *t = &jalloc_tls;
    if (c == JALLOC_LARGE || !jalloc_room(t, c)) {
        free(jalloc_header(p));
        return;
    }
    if (!t->registered) {
        pthread_setspecific(jalloc_key, t);
        t->registered = 1;
    }
    *(void **)p = t->head[c];
    t->head[c] = p;
    t->n[c]++;
    if (c >= JALLOC_SMALL)
        t->big_bytes += jalloc_class_size(c);
}

void *jalloc_calloc(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    void *p = jalloc_malloc(n * size);
    if (p != NULL)
        memset(p, 0, n * size);
    return p;
}

/* A block that still fits its class stays where it is; one that outgrows it moves; a block
 * past the classes is realloc()ed with its header (it stays so even when it shrinks). */
void *jalloc_realloc(void *p, size_t size)
{
    if (p == NULL)
        return jalloc_malloc(size);
    uint32_t c = *(uint32_t *)jalloc_header(p);
    if (c == JALLOC_LARGE) {
        if (size > SIZE_MAX - JALLOC_HEADER)
            return NULL;
        char *h = realloc(jalloc_header(p), JALLOC_HEADER + size);
        return h == NULL ? NULL : h + JALLOC_HEADER;
    }
    size_t have = jalloc_class_size(c);
    if (size <= have)
        return p;
    void *q = jalloc_malloc(size);
    if (q != NULL) {
        memcpy(q, p, have);
        jalloc_free(p);
    }
    return q;
}

char *jalloc_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = jalloc_malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

void jalloc_install(void)
{
    if (JALLOC_SANITIZED || jalloc_on || pthread_key_create(&jalloc_key, jalloc_flush) != 0)
        return;
    json_set_alloc_funcs(jalloc_malloc, jalloc_free);
    jalloc_on = 1;
}

size_t jalloc_big_kept(void)
{
    return jalloc_tls.big_bytes;
}

int jalloc_active(void)
{
    return jalloc_on;
}
