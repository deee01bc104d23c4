/* Unit tests: log lines (base/log.c) — one line per event, text from outside escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* What one log_msg() call writes to stderr. */
static void captured(char *out, size_t cap, const char *text)
{
    int p[2], saved = dup(STDERR_FILENO);
    assert_int_equal(pipe(p), 0);
    dup2(p[1], STDERR_FILENO);
    log_msg(LOG_WARN, "webhook answered: %s", text);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    ssize_t n = read(p[0], out, cap - 1);
    close(p[0]);
    out[n > 0 ? n : 0] = '\0';
}

/* A receiver's answer (or a client's text) cannot end the line and forge the next one. */
static void test_outside_text_cannot_forge_a_line(void **state)
{
    char line[LOG_LINE_MAX + 64];
    (void)state;
    captured(line, sizeof(line), "ok\n2026-01-01T00:00:00.000Z error forged\r\x1b[2J a\\b");
    assert_non_null(strstr(line, "warn webhook answered: ok\\x0a2026-01-01T00:00:00.000Z error"));
    assert_non_null(strstr(line, "forged\\x0d\\x1b[2J a\\\\b\n"));
    assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1); /* one line */
}

/* A message longer than a line is cut, still one line. */
static void test_long_messages_are_cut(void **state)
{
    static char big[3 * LOG_LINE_MAX], line[LOG_LINE_MAX + 64];
    (void)state;
    memset(big, '\n', sizeof(big) - 1); /* each escapes to 4 bytes */
    captured(line, sizeof(line), big);
    assert_true(strlen(line) <= LOG_LINE_MAX);
    assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outside_text_cannot_forge_a_line),
        cmocka_unit_test(test_long_messages_are_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
