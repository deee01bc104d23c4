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

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h> /* free(), abort(): used with the x* wrappers everywhere */
#include <time.h>

#define UTIL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
/* Grow the array p of *n elements of size bytes (doubling, from 64) until index i fits; the
 * new elements are zeroed. Returns the array, perhaps moved; p may be NULL with *n 0. */
void *xgrow(void *p, size_t *n, size_t i, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* a, the byte sep, b: a fresh string (the keys of maps by tenant and id; no printf). */
char *xjoin(const char *a, char sep, const char *b);
/* printf into a fresh string. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* pthread_create for a helper thread (the store's writer, its checkpointers, the read pool):
 * the thread runs with every signal blocked from its first instruction
 * (pthread_attr_setsigmask_np). SIGTERM and SIGINT belong to the main thread's sigwait() (the
 * server's drain); such a thread starts before the main thread blocks them, and the kernel
 * hands a process's signal to any thread that does not block it, where its default action
 * ends the process undrained (a test that stopped memproxy just after it began listening saw
 * it die of SIGTERM: the main thread blocks the signals before it enters sigwait()). 0, or an
 * error number as pthread_create's. */
int util_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

uint64_t util_now_us(void);
uint64_t util_now_ns(void);
/* A CLOCK_MONOTONIC time in ns (util_now_ns) as the timespec of the clock's timed waits
 * (pthread_cond_clockwait, sem_clockwait, clock_nanosleep with TIMER_ABSTIME). */
struct timespec util_timespec(uint64_t ns);
int64_t util_wall_ms(void);

/* A 64-bit hash of n bytes at p, from seed (chained calls hash a sequence: pass the last
 * result as the next seed). Eight bytes a step: a byte-at-a-time hash (FNV-1a) costs four
 * cycles a byte, ~20k cycles on a voice window's 5 KB of text. Not for adversaries: a client
 * that finds a collision can only confuse its own session's shortcuts, which a full compare
 * backs wherever a wrong answer would lose data. Little-endian machines and big-endian ones
 * give different values. */
uint64_t util_hash64(uint64_t seed, const void *p, size_t n);

/* Compare two byte strings in time that depends only on the lengths, not the contents. */
int util_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

/*
 * Ids (sessions, users, notices): 1..UTIL_MAX_ID bytes of well-formed UTF-8 (no overlong
 * forms, no surrogates, nothing above U+10FFFF) without control characters (C0 with NUL,
 * DEL, C1). An id is stored, read back as JSON, logged and put in URLs: one that is not
 * text would come back as null (jansson refuses it) and break every job that reads it.
 */
#define UTIL_MAX_ID 256
int util_id_valid(const char *s, size_t len);

/* The length of the well-formed UTF-8 sequence at s (at most n bytes), its code point in
 * *cp; 0 when the bytes there are not one. */
size_t util_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* The percent-decoding of [s, s + len) as a URL path segment: each %XX (two hex digits)
 * becomes its byte, anything else (a '+', a lone '%') stays. Malloc'd, NUL-terminated;
 * *out_len is its length (a %00 makes it longer than strlen). */
char *util_uridecode(const char *s, size_t len, size_t *out_len);

/* The path of an HTTP request target (up to '?' or '#': *len bytes at the result, inside
 * uri). A target may come in absolute form, "http://host:port/path?query" (RFC 9112 section
 * 3.2.2: what a client sends to a proxy, which a server must accept too); *authority is then
 * set to its "host:port" (which ends where the path, '?' or '#' begins), else to NULL. An
 * absolute target without a path gives an empty one. */
const char *util_target_path(const char *uri, size_t *len, const char **authority);

/* Copy len bytes of src (or what fits) into dst of cap > 0 bytes, NUL-terminated. */
void util_copy(char *dst, size_t cap, const char *src, size_t len);
/* Write v in decimal at p (up to 20 bytes, no NUL); returns the end. */
char *util_put_u64(char *p, uint64_t v);

/* The HTTP date (RFC 9110 IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") of t, seconds since the
 * epoch, in out (UTIL_HTTP_DATE bytes with its NUL), whatever the locale. A time before 1970
 * or past year 9999 gives the epoch's date (a clock that wrong is not worth a wrong format). */
#define UTIL_HTTP_DATE 30
void util_http_date(int64_t t, char out[UTIL_HTTP_DATE]);

/* Parse a decimal integer that must fill the whole string; 0 on success, -1 otherwise. */
int util_parse_ll(const char *s, long long *out);

#endif
