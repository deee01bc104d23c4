/*
 * jalloc: jansson's allocator in memproxy — malloc and free with a small per-thread cache of
 * freed blocks.
 *
 * Why: a request builds and drops jansson trees of one shape again and again (a 32-message
 * window is ~70 objects, ~120 strings and their hash tables). glibc keeps only 7 freed blocks
 * per size in its per-thread cache; the rest go through its arena's bins and their lock, and
 * every allocation of 1 KiB or more consolidates them. Measured with callgrind on a recorded
 * 32-message request, malloc and free were a quarter of memproxy's instructions.
 *
 * How: each block carries a 16-byte header with its size class (16-byte steps up to 256
 * bytes; larger blocks go straight to malloc). A freed small block goes on the freeing
 * thread's list for its class, up to JALLOC_CLASS_BYTES per class (so at most 512 KiB per
 * thread), and the next allocation of that class on that thread takes it back. A block may be
 * freed on another thread than the one that allocated it (the storage writer drops turns the
 * workers built). A thread's lists are returned to malloc when it exits.
 *
 * jalloc_install() must run before the first jansson allocation and before any thread starts
 * (main's first line): a block from plain malloc must never reach jalloc's free. Memory that
 * jansson returns for the caller to free (json_dumps) must go back through jansson's free
 * function (json_get_alloc_funcs), not free(). In a build with AddressSanitizer it installs
 * nothing, so that every jansson object is checked.
 */
#ifndef MEMPROXY_JALLOC_H
#define MEMPROXY_JALLOC_H

#include <stddef.h>

#define JALLOC_CLASS_BYTES 32768

void jalloc_install(void);
/* Whether jalloc_install() installed the cache (0 under AddressSanitizer). */
int jalloc_active(void);

#endif
