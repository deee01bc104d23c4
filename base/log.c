#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level log_level = LOG_INFO;
static _Thread_local const char *log_thread_name;

void log_set_level(enum log_level level)
{
    log_level = level;
}

int log_level_parse(const char *name, enum log_level *out)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

void log_set_thread_name(const char *name)
{
    char comm[16]; /* the kernel's limit, with its NUL */
    log_thread_name = name;
    if (name == NULL)
        return;
    snprintf(comm, sizeof(comm), "%s", name);
    pthread_setname_np(pthread_self(), comm); /* what top -H, ps -L and perf show */
}

int log_enabled(enum log_level level)
{
    return level >= log_level;
}

/* The message's text with control bytes written as \xNN (a backslash as \\): what a client
 * or a webhook receiver sent can neither end a line nor forge the next one, nor move a
 * terminal's cursor. Into out (cap bytes, at least 5); the bytes written. */
static size_t log_escape(const char *in, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c >= 0x20 && c != 0x7f && c != '\\') {
            out[o++] = (char)c;
        } else if (c == '\\') {
            out[o++] = '\\';
            out[o++] = '\\';
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    return o;
}

/* One line at level (LOG_ERROR + 1: fatal), written whatever the level set. fmt is checked
 * where log_msg() and log_fatal() are called (their format attributes). */
__attribute__((format(printf, 2, 0))) static void log_vline(int level, const char *fmt, va_list ap)
{
    static const char *const tags[] = {"debug", "info", "warn", "error", "fatal"};
    char line[LOG_LINE_MAX], msg[LOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s%s%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, tags[level], log_thread_name ? "[" : "",
                     log_thread_name ? log_thread_name : "", log_thread_name ? "] " : "");
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t mlen = m < 0 ? 0 : (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1;
    n += (int)log_escape(msg, mlen, line + n, sizeof(line) - (size_t)n - 1);
    line[n++] = '\n';
    ssize_t rc = write(STDERR_FILENO, line, (size_t)n);
    (void)rc;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    if (!log_enabled(level))
        return;
    va_start(ap, fmt);
    log_vline((int)level, fmt, ap);
    va_end(ap);
}

void log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vline(LOG_ERROR + 1, fmt, ap);
    va_end(ap);
    abort();
}
