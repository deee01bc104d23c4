#include "base/util.h"

#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static void util_oom(size_t n)
{
    log_fatal("out of memory allocating %zu bytes", n);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        util_oom(n);
    return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (p == NULL)
        util_oom(nmemb * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        util_oom(n);
    return q;
}

void *xgrow(void *p, size_t *n, size_t i, size_t size)
{
    if (i < *n)
        return p;
    size_t m = *n ? *n : 64;
    while (m <= i)
        m *= 2;
    p = xrealloc(p, m * size);
    memset((char *)p + *n * size, 0, (m - *n) * size);
    *n = m;
    return p;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        util_oom(strlen(fmt));
    return s;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

int util_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    sigset_t all;
    sigfillset(&all);
    int rc = pthread_attr_init(&attr);
    if (rc != 0)
        return rc;
    rc = pthread_attr_setsigmask_np(&attr, &all);
    if (rc == 0)
        rc = pthread_create(t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return rc;
}

uint64_t util_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct timespec util_timespec(uint64_t ns)
{
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000u),
                             .tv_nsec = (long)(ns % 1000000000u)};
}

uint64_t util_now_us(void)
{
    return util_now_ns() / 1000u;
}

int64_t util_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *xjoin(const char *a, char sep, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = xmalloc(na + nb + 2);
    memcpy(s, a, na);
    s[na] = sep;
    memcpy(s + na + 1, b, nb + 1);
    return s;
}

const char *util_target_path(const char *uri, size_t *len, const char **authority)
{
    size_t scheme = 0;
    if (strncasecmp(uri, "http://", 7) == 0)
        scheme = 7;
    else if (strncasecmp(uri, "https://", 8) == 0)
        scheme = 8;
    *authority = NULL;
    if (scheme > 0) {
        *authority = uri + scheme;
        uri = *authority + strcspn(*authority, "/?#");
    }
    *len = strcspn(uri, "?#");
    return uri;
}

void util_copy(char *dst, size_t cap, const char *src, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

char *util_put_u64(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* v's last n decimal digits, zero-padded. */
static char *util_put_digits(char *p, int v, int n)
{
    for (int i = n - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
    return p + n;
}

void util_http_date(int64_t t, char out[UTIL_HTTP_DATE])
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t tt = (time_t)t;
    struct tm tm;
    if (t < 0 || gmtime_r(&tt, &tm) == NULL || tm.tm_year + 1900 > 9999) { /* see util.h */
        tt = 0;
        gmtime_r(&tt, &tm);
    }
    char *p = out;
    memcpy(p, days[tm.tm_wday % 7], 3);
    memcpy(p + 3, ", ", 2);
    p = util_put_digits(p + 5, tm.tm_mday, 2);
    *p++ = ' ';
    memcpy(p, months[tm.tm_mon % 12], 3);
    p[3] = ' ';
    p = util_put_digits(p + 4, tm.tm_year + 1900, 4);
    *p++ = ' ';
    p = util_put_digits(p, tm.tm_hour, 2);
    *p++ = ':';
    p = util_put_digits(p, tm.tm_min, 2);
    *p++ = ':';
    p = util_put_digits(p, tm.tm_sec, 2);
    memcpy(p, " GMT", 5); /* with its NUL: 29 + 1 bytes */
}

/* splitmix64's finalizer: every input bit reaches every output bit. */
static uint64_t util_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t util_hash64(uint64_t seed, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = seed ^ (0x9e3779b97f4a7c15ULL * (n + 1)), w;
    for (; n >= 8; b += 8, n -= 8) {
        memcpy(&w, b, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, b, n);
    return util_mix64(h ^ w);
}

int util_ct_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    const unsigned char *x = a, *y = b;
    unsigned char diff = (unsigned char)(alen != blen);
    size_t n = alen < blen ? alen : blen;
    for (size_t i = 0; i < n; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

size_t util_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000}; /* below: overlong */
    size_t len = s[0] < 0x80                    ? 1
                 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                 : (s[0] & 0xf0) == 0xe0        ? 3
                 : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                                : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t c = len == 1 ? s[0] : s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

int util_id_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    if (len == 0 || len > UTIL_MAX_ID)
        return 0;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t n = util_utf8_next(p + i, len - i, &c);
        if (n == 0 || c < 0x20 || (c >= 0x7f && c <= 0x9f))
            return 0;
        i += n;
    }
    return 1;
}

static int util_hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *util_uridecode(const char *s, size_t len, size_t *out_len)
{
    char *out = xmalloc(len + 1);
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        int hi = i + 2 < len && s[i] == '%' ? util_hexval(s[i + 1]) : -1;
        int lo = hi >= 0 ? util_hexval(s[i + 2]) : -1;
        if (lo >= 0) {
            out[j++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[j++] = s[i];
        }
    }
    out[j] = '\0';
    *out_len = j;
    return out;
}

int util_parse_ll(const char *s, long long *out)
{
    char *end = NULL;
    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}
