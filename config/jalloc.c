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

struct jalloc_cache {
    void *head[JALLOC_CLASSES]; /* freed blocks; the link is in the block's first bytes */
    uint32_t n[JALLOC_CLASSES];
    int registered; /* its thread's exit returns the lists to malloc */
};

static _Thread_local struct jalloc_cache jalloc_tls;
static pthread_key_t jalloc_key;
static int jalloc_on;

static uint32_t jalloc_cap(uint32_t c)
{
    return JALLOC_CLASS_BYTES / (JALLOC_HEADER + (c + 1) * JALLOC_STEP);
}

static void jalloc_flush(void *arg)
{
    struct jalloc_cache *t = arg;
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
    uint32_t *h = malloc(JALLOC_HEADER + size);
    if (h == NULL)
        return NULL;
    *h = cls;
    return (char *)h + JALLOC_HEADER;
}

void *jalloc_malloc(size_t size)
{
    if (size > JALLOC_CLASSES * JALLOC_STEP)
        return size > SIZE_MAX - JALLOC_HEADER ? NULL : jalloc_block(JALLOC_LARGE, size);
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
    if (c == JALLOC_LARGE || t->n[c] >= jalloc_cap(c)) {
        free((char *)p - JALLOC_HEADER);
        return;
    }
    if (!t->registered) {
        pthread_setspecific(jalloc_key, t);
        t->registered = 1;
    }
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
        char *h = realloc((char *)p - JALLOC_HEADER, JALLOC_HEADER + size);
        return h == NULL ? NULL : h + JALLOC_HEADER;
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

int jalloc_active(void)
{
    return jalloc_on;
}
