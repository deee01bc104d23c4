/*
 * util: the base every other module stands on.
 *
 * Allocation: the x* wrappers never return NULL. memproxy treats running out of memory as
 * fatal (log and abort) rather than threading ENOMEM through every path: a proxy that keeps
 * serving with a half-built request is worse than one that restarts. Callers own what they
 * get and free it with free().
 *
 * Clocks: util_now_us() is CLOCK_MONOTONIC (for latencies and timeouts); util_wall_ms() is
 * the wall clock in milliseconds since the epoch (for stored timestamps).
 */
#ifndef MEMPROXY_UTIL_H
#define MEMPROXY_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* free(), abort(): used with the x* wrappers everywhere */

#define UTIL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
/* Grow the array p of *n elements of size bytes (doubling, from 64) until index i fits; the
 * new elements are zeroed. Returns the array, perhaps moved; p may be NULL with *n 0. */
void *xgrow(void *p, size_t *n, size_t i, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a fresh string. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

uint64_t util_now_us(void);
uint64_t util_now_ns(void);
int64_t util_wall_ms(void);

/* Compare two byte strings in time that depends only on the lengths, not the contents. */
int util_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

/* Ids (sessions, users): 1..UTIL_MAX_ID bytes without control characters (NUL included). */
#define UTIL_MAX_ID 256
int util_id_valid(const char *s, size_t len);

/* The percent-decoding of [s, s + len) as a URL path segment: each %XX (two hex digits)
 * becomes its byte, anything else (a '+', a lone '%') stays. Malloc'd, NUL-terminated;
 * *out_len is its length (a %00 makes it longer than strlen). */
char *util_uridecode(const char *s, size_t len, size_t *out_len);

/* Parse a decimal integer that must fill the whole string; 0 on success, -1 otherwise. */
int util_parse_ll(const char *s, long long *out);

#endif
