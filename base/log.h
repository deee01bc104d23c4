/*
 * log: one line per event on stderr, "ts level [worker] message".
 *
 * Each line is formatted into a stack buffer and written with one write(2), so lines from
 * different worker threads never interleave. Lines longer than LOG_LINE_MAX are cut. A
 * message's control bytes (newlines among them) are written as \xNN and its backslashes
 * doubled, so text from outside (an id, a receiver's answer) cannot forge a line.
 * The level is process-wide and set once at start (log_set_level) before threads exist.
 */
#ifndef MEMPROXY_LOG_H
#define MEMPROXY_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

#define LOG_LINE_MAX 2048

void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error"; -1 if unknown. */
int log_level_parse(const char *name, enum log_level *out);
/* Name shown in this thread's lines (e.g. "w0"), and the thread's name in the OS (its first
 * 15 bytes: top -H, ps -L); NULL for the main thread. */
void log_set_thread_name(const char *name);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For what cannot be carried on from (an allocation failing, a thread that cannot start, the
 * CSPRNG failing): one "fatal" line whatever the level, then abort() for a core dump. */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_enabled(LOG_DEBUG))                                                                \
            log_msg(LOG_DEBUG, __VA_ARGS__);                                                       \
    } while (0)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
