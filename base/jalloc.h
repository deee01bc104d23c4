/*
 * jalloc: the allocator of the libraries memproxy runs on every request (jansson, libcurl,
 * libevent) — malloc and free with a small per-thread cache of freed blocks.
 *
 * Why: a request builds and drops jansson trees of one shape again and again (a 32-message
 * window is ~70 objects, ~120 strings and their hash tables). glibc keeps only 7 freed blocks
 * per size in its per-thread cache; the rest go through its arena's bins and their lock, and
 * every allocation of 1 KiB or more consolidates them. Measured with callgrind on a recorded
 * 32-message request, malloc and free were a quarter of memproxy's instructions.
 *
 * How: each block carries a 16-byte header with its size class: 16-byte steps up to 256
 * bytes, then four steps per doubling up to 64 KiB (320, 384, 448, 512, 640, ... so a block is
 * at most a quarter larger than asked for). A freed block goes on the freeing thread's list
 * for its class, and the next allocation of that class on that thread takes it back: up to
 * JALLOC_CLASS_BYTES per small class (so at most 2 MiB per thread), up to JALLOC_BIG_BYTES
 * for the larger classes together. Past 64 KiB blocks go straight to malloc and back. A block
 * may be freed on another thread than the one that allocated it (the storage writer drops
 * turns the workers built). A thread's lists are returned to malloc when it exits.
 *
 * Why that much: a worker drops requests in groups. One group commit completes 5 to 6 requests
 * at once (more with more connections), and their trees, turns and transfers are freed in one
 * loop turn: with 32 KiB a class, ~700 strings and integers (32 bytes) and ~340 objects (80
 * bytes), the burst overflowed both classes, the blocks over went back to glibc and the next
 * requests took them from glibc again — 4.3 allocations per request in each class, and
 * glibc's _int_malloc/_int_free were 2-3% of memproxy's CPU under 16-connection load. The
 * lists fill only as far as the burst they absorb reaches.
 *
 * Why the larger classes: per request libcurl makes a 16 KiB receive buffer and 1.5 KiB of
 * transfer state, libevent 1 KiB buffer chains; with the header each is past glibc's
 * per-thread cache (1,032 bytes), so each went through glibc's bins, and every such
 * allocation consolidated glibc's fast bins first. Under load (16 requests in flight) that
 * was ~2% of memproxy's CPU.
 *
 * libcurl and libevent made the same pattern cost as much again: per proxied request about 60
 * allocations in libcurl (the request's headers, the response's, the transfer's state) and
 * 30 in libevent (the evhttp request, its header lists, buffer chains), ~20k instructions in
 * malloc and free out of 240k. The program hands them these functions at start
 * (curl_global_init_mem, event_set_mem_functions) when jalloc_active().
 *
 * jalloc_install() must run before the first jansson allocation and before any thread starts
 * (main's first line), and the libraries' hooks before their first allocation: a block from
 * plain malloc must never reach jalloc's free, nor a jalloc block plain free(). So memory a
 * library returns for its caller to free goes back through jalloc: jansson's (json_dumps)
 * through its free function (json_get_alloc_funcs); memproxy takes none from libcurl or
 * libevent (it percent-decodes ids itself, util_uridecode, rather than with
 * evhttp_uridecode). In a build with AddressSanitizer it installs nothing, so that every
 * object is checked.
 */
#ifndef MEMPROXY_JALLOC_H
#define MEMPROXY_JALLOC_H

#include <stddef.h>

#define JALLOC_CLASS_BYTES 131072
/* The larger classes: blocks up to JALLOC_BIG_MAX, JALLOC_BIG_BYTES of them kept per thread. */
#define JALLOC_BIG_MAX   (64 * 1024)
#define JALLOC_BIG_BYTES (2 * 1024 * 1024)

void jalloc_install(void);
/* malloc, free, calloc, realloc and strdup over the cache, for the libraries' hooks; only
 * while jalloc_active() (blocks carry jalloc's header). */
void *jalloc_malloc(size_t size);
void jalloc_free(void *p);
void *jalloc_calloc(size_t n, size_t size);
void *jalloc_realloc(void *p, size_t size);
char *jalloc_strdup(const char *s);
/* Bytes of blocks the calling thread keeps in the larger classes (for tests). */
size_t jalloc_big_kept(void);
/* Whether jalloc_install() installed the cache (0 under AddressSanitizer). */
int jalloc_active(void);

#endif
