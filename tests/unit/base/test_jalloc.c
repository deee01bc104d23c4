/* Unit tests: jansson's allocator with its per-thread cache (config/jalloc.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/jalloc.h"
#include "base/jtext.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static json_malloc_t jmalloc;
static json_free_t jfree;

/* Every size up to past the cached classes: aligned, writable to its end, distinct. */
static void test_sizes(void **state)
{
    void *p[600];
    for (size_t n = 0; n < 600; n++) {
        p[n] = jmalloc(n + 1);
        assert_non_null(p[n]);
        assert_int_equal((uintptr_t)p[n] % 16, 0);
        memset(p[n], (int)(n & 0xff), n + 1);
    }
    for (size_t n = 0; n < 600; n++) {
        const unsigned char *b = p[n];
        assert_int_equal(b[0], n & 0xff);
        assert_int_equal(b[n], n & 0xff);
        jfree(p[n]);
    }
    jfree(NULL);
}

/* A freed small block is what the next allocation of its class on that thread gets. */
static void test_reuse(void **state)
{
    if (!jalloc_active())
        skip(); /* AddressSanitizer build: plain malloc and free */
    void *a = jmalloc(40), *b = jmalloc(40);
    jfree(a);
    jfree(b);
    assert_ptr_equal(jmalloc(33), b); /* same 48-byte class, last in first out */
    assert_ptr_equal(jmalloc(48), a);
    void *c = jmalloc(40);
    assert_ptr_not_equal(c, a);
    jfree(a);
    jfree(b);
    jfree(c);
}

/* A thread keeps at most JALLOC_CLASS_BYTES per class: the first blocks freed are kept, the
 * rest go to malloc, and the kept ones come back last in, first out. */
static void test_cap(void **state)
{
    enum { KEPT = JALLOC_CLASS_BYTES / 32, N = KEPT + 1024 }; /* 16-byte blocks + their header */
    if (!jalloc_active())
        skip();
    void **p = malloc(N * sizeof(*p));
    for (size_t i = 0; i < N; i++)
        p[i] = jmalloc(16);
    for (size_t i = 0; i < N; i++)
        jfree(p[i]);
    void *q[KEPT];
    for (size_t i = 0; i < KEPT; i++) {
        q[i] = jmalloc(16);
        assert_ptr_equal(q[i], p[KEPT - 1 - i]);
    }
    for (size_t i = 0; i < KEPT; i++)
        jfree(q[i]);
    free(p);
}

/* Trees built on one thread and dropped on another (the storage writer's case), then
 * built again: the same content throughout. */
static void *drop(void *arg)
{
    json_decref(arg);
    return NULL;
}

static void test_trees_across_threads(void **state)
{
    const char *text = "{\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"},"
                       "{\"role\":\"assistant\",\"content\":\"hi\",\"turn_id\":3}],\"n\":1.5}";
    for (int round = 0; round < 50; round++) {
        json_t *j = jtext_load(text, strlen(text), 0, NULL);
        assert_non_null(j);
        char *out = jtext_dump(j, NULL);
        assert_string_equal(out, text);
        free(out);
        char *dumped = json_dumps(j, JSON_COMPACT);
        assert_string_equal(dumped, text);
        jfree(dumped);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, drop, j), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
    }
}

/* The hooks libcurl and libevent get: calloc zeroes and refuses an overflowing count; realloc
 * keeps a block that still fits its class, moves one that outgrows it (contents kept), and
 * resizes a large one in place or not, contents kept; strdup copies. */
static void test_library_hooks(void **state)
{
    if (!jalloc_active())
        skip();
    unsigned char *z = jalloc_calloc(10, 7);
    for (int i = 0; i < 70; i++)
        assert_int_equal(z[i], 0);
    assert_null(jalloc_calloc(SIZE_MAX / 2, 3));
    memset(z, 'z', 70);
    assert_ptr_equal(jalloc_realloc(z, 80), z); /* 70 and 80 are both in the 80-byte class */
    unsigned char *moved = jalloc_realloc(z, 200);
    assert_ptr_not_equal(moved, z);
    for (int i = 0; i < 70; i++)
        assert_int_equal(moved[i], 'z');
    unsigned char *large = jalloc_realloc(moved, 5000);
    for (int i = 0; i < 70; i++)
        assert_int_equal(large[i], 'z');
    memset(large, 'L', 5000);
    large = jalloc_realloc(large, 100000);
    assert_int_equal(large[4999], 'L');
    large = jalloc_realloc(large, 10); /* a large block stays large, and still usable */
    assert_int_equal(large[9], 'L');
    jalloc_free(large);
    char *d = jalloc_strdup("Authorization: Bearer x");
    assert_string_equal(d, "Authorization: Bearer x");
    jalloc_free(d);
    void *fresh = jalloc_realloc(NULL, 24);
    assert_non_null(fresh);
    jalloc_free(fresh);
    jalloc_free(NULL);
}

/* The class a size falls in, as jalloc.h describes it: 16-byte steps to 256, then four steps
 * per doubling. */
static size_t class_size(size_t n)
{
    if (n <= 256)
        return n == 0 ? 16 : (n + 15) / 16 * 16;
    size_t pow = 256;
    while (pow * 2 < n)
        pow *= 2;
    size_t step = pow / 4;
    return (n + step - 1) / step * step;
}

/* Every size is served from its class: a realloc up to the class's size keeps the block, one
 * past it moves the block (contents kept); past 64 KiB blocks are plain. */
static void test_classes(void **state)
{
    if (!jalloc_active())
        skip();
    static const size_t sizes[] = {1,    16,   17,   256,  257,   320,   321,   512,   513,
                                   1000, 1024, 1025, 1496, 16384, 16385, 20480, 65535, 65536};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i], cap = class_size(n);
        unsigned char *p = jalloc_malloc(n);
        memset(p, 0x5a, cap);
        assert_ptr_equal(jalloc_realloc(p, cap), p);
        unsigned char *q = jalloc_realloc(p, cap + 1);
        assert_ptr_not_equal(q, p);
        assert_int_equal(q[0], 0x5a);
        assert_int_equal(q[cap - 1], 0x5a);
        jalloc_free(q);
    }
    assert_int_equal(class_size(16385), 20480); /* the receive buffer: a quarter over at most */
    assert_int_equal(class_size(1496), 1536);
}

/* On a fresh thread (empty lists): a freed large block is kept for the next allocation of its
 * class, and only up to JALLOC_BIG_BYTES in all; what is over goes back to malloc. cmocka
 * asserts only on the test's thread, so the figures are handed back. */
static void *big_budget(void *arg)
{
    size_t *out = arg;
    enum { N = JALLOC_BIG_BYTES / JALLOC_BIG_MAX + 4 };
    void *p[N];
    out[0] = jalloc_big_kept();
    void *a = jalloc_malloc(16385);
    jalloc_free(a);
    out[1] = jalloc_big_kept();
    out[2] = jalloc_malloc(20000) == a; /* same class */
    out[3] = jalloc_big_kept();
    for (size_t i = 0; i < N; i++)
        p[i] = jalloc_malloc(JALLOC_BIG_MAX);
    for (size_t i = 0; i < N; i++)
        jalloc_free(p[i]);
    out[4] = jalloc_big_kept();
    void *huge = jalloc_malloc(JALLOC_BIG_MAX + 1); /* past the classes: never kept */
    jalloc_free(huge);
    out[5] = jalloc_big_kept();
    return NULL;
}

static void test_big(void **state)
{
    if (!jalloc_active())
        skip();
    void *b = jalloc_malloc(1024);
    jalloc_free(b);
    assert_ptr_not_equal(jalloc_malloc(300), b); /* another class */
    assert_ptr_equal(jalloc_malloc(1000), b);    /* 1000 and 1024 share the 1024 class */
    jalloc_free(b);
    pthread_t t;
    size_t kept[6];
    assert_int_equal(pthread_create(&t, NULL, big_budget, kept), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(kept[0], 0);
    assert_int_equal(kept[1], 20480);
    assert_int_equal(kept[2], 1);
    assert_int_equal(kept[3], 0);
    assert_int_equal(kept[4], JALLOC_BIG_BYTES); /* 32 of the 36 kept */
    assert_int_equal(kept[5], JALLOC_BIG_BYTES);
}

int main(void)
{
    jalloc_install();
    jalloc_install(); /* a second call changes nothing */
    json_get_alloc_funcs(&jmalloc, &jfree);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),         cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_cap),           cmocka_unit_test(test_trees_across_threads),
        cmocka_unit_test(test_library_hooks), cmocka_unit_test(test_classes),
        cmocka_unit_test(test_big),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
