#include "jalloc.h"

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

#define JALLOC_HEADER  16 /* keeps the block 16-byte aligned, as malloc's */
#define JALLOC_STEP    16
#define JALLOC_CLASSES 16 /* blocks up to 256 bytes */
#define JALLOC_LARGE   UINT32_MAX

/* A large block's header: its class (JALLOC_LARGE) and the size it was made for. */
struct jalloc_big {
    uint32_t cls;
    uint32_t pad;
    size_t size;
};

_Static_assert(sizeof(struct jalloc_big) == JALLOC_HEADER, "a large block's header");

struct jalloc_cache {
    void *head[JALLOC_CLASSES]; /* freed blocks; the link is in the block's first bytes */
    uint32_t n[JALLOC_CLASSES];
    void *big[JALLOC_BIG_SLOTS]; /* freed large blocks, any size up to JALLOC_BIG_MAX */
    unsigned big_next;           /* the slot a free replaces when all are taken */
    int registered;              /* its thread's exit returns the lists to malloc */
};

static _Thread_local struct jalloc_cache jalloc_tls;
static pthread_key_t jalloc_key;
static int jalloc_on;

static uint32_t jalloc_cap(uint32_t c)
{
    return JALLOC_CLASS_BYTES / (JALLOC_HEADER + (c + 1) * JALLOC_STEP);
}

static struct jalloc_big *jalloc_big_header(void *p)
{
    return (struct jalloc_big *)((char *)p - JALLOC_HEADER);
}

static void jalloc_flush(void *arg)
{
    struct jalloc_cache *t = arg;
    for (unsigned i = 0; i < JALLOC_BIG_SLOTS; i++) {
        if (t->big[i] != NULL)
            free(jalloc_big_header(t->big[i]));
        t->big[i] = NULL;
    }
    for (uint32_t c = 0; c < JALLOC_CLASSES; c++) {
        while (t->head[c] != NULL) {
            void *p = t->head[c];
            t->head[c] = *(void **)p;
            free((char *)p - JALLOC_HEADER);
        }
        t->n[c] = 0;
    }
    t->registered = 0;
}

static void *jalloc_block(uint32_t cls, size_t size)
{
    struct jalloc_big *h = malloc(JALLOC_HEADER + size);
    if (h == NULL)
        return NULL;
    h->cls = cls;
    h->size = size;
    return (char *)h + JALLOC_HEADER;
}

/* A kept large block for size: one made for size up to a quarter more (so a small request
 * never holds a much larger block), or NULL. */
static void *jalloc_big_take(struct jalloc_cache *t, size_t size)
{
    for (unsigned i = 0; i < JALLOC_BIG_SLOTS; i++) {
        void *p = t->big[i];
        if (p == NULL)
            continue;
        size_t have = jalloc_big_header(p)->size;
        if (have >= size && have - size <= have / 4) {
            t->big[i] = NULL;
            return p;
        }
    }
    return NULL;
}

static void jalloc_register(struct jalloc_cache *t)
{
    if (!t->registered) {
        pthread_setspecific(jalloc_key, t);
        t->registered = 1;
    }
}

/* Keep a freed large block in a free slot, or in place of the oldest kept one. */
static void jalloc_big_keep(struct jalloc_cache *t, void *p)
{
    if (jalloc_big_header(p)->size > JALLOC_BIG_MAX) {
        free(jalloc_big_header(p));
        return;
    }
    jalloc_register(t);
    for (unsigned i = 0; i < JALLOC_BIG_SLOTS; i++) {
        if (t->big[i] == NULL) {
            t->big[i] = p;
            return;
        }
    }
    unsigned i = t->big_next++ % JALLOC_BIG_SLOTS;
    free(jalloc_big_header(t->big[i]));
    t->big[i] = p;
}

void *jalloc_malloc(size_t size)
{
    if (size > JALLOC_CLASSES * JALLOC_STEP) {
        if (size > SIZE_MAX - JALLOC_HEADER)
            return NULL;
        void *p = size <= JALLOC_BIG_MAX ? jalloc_big_take(&jalloc_tls, size) : NULL;
        return p != NULL ? p : jalloc_block(JALLOC_LARGE, size);
    }
    uint32_t c = size == 0 ? 0 : (uint32_t)((size - 1) / JALLOC_STEP);
    struct jalloc_cache *t = &jalloc_tls;
    void *p = t->head[c];
    if (p == NULL)
        return jalloc_block(c, (c + 1) * JALLOC_STEP);
    t->head[c] = *(void **)p;
    t->n[c]--;
    return p;
}

void jalloc_free(void *p)
{
    if (p == NULL)
        return;
    uint32_t c = *(uint32_t *)((char *)p - JALLOC_HEADER);
    struct jalloc_cache *t = &jalloc_tls;
    if (c == JALLOC_LARGE) {
        jalloc_big_keep(t, p);
        return;
    }
    if (t->n[c] >= jalloc_cap(c)) {
        free((char *)p - JALLOC_HEADER);
        return;
    }
    jalloc_register(t);
    *(void **)p = t->head[c];
    t->head[c] = p;
    t->n[c]++;
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

/* A small block that still fits its class stays where it is; one that outgrows it moves; a
 * large block is realloc()ed with its header (it stays large even when it shrinks). */
void *jalloc_realloc(void *p, size_t size)
{
    if (p == NULL)
        return jalloc_malloc(size);
    uint32_t c = *(uint32_t *)((char *)p - JALLOC_HEADER);
    if (c == JALLOC_LARGE) {
        if (size > SIZE_MAX - JALLOC_HEADER)
            return NULL;
        struct jalloc_big *h = realloc(jalloc_big_header(p), JALLOC_HEADER + size);
        if (h == NULL)
            return NULL;
        h->size = size;
        return (char *)h + JALLOC_HEADER;
    }
    size_t have = (size_t)(c + 1) * JALLOC_STEP;
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

unsigned jalloc_big_kept(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < JALLOC_BIG_SLOTS; i++)
        n += jalloc_tls.big[i] != NULL;
    return n;
}

int jalloc_active(void)
{
    return jalloc_on;
}
