/* Unit tests: the SSE parser (proxy/sse.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "proxy/chat/sse.h"

#include <stdio.h>
#include <string.h>

#define MAX_EVENTS 64

struct seen {
    int n;
    char data[MAX_EVENTS][256];
    int has_data[MAX_EVENTS];
    char type[MAX_EVENTS][32];
    char raw[8192];
    size_t raw_len;
};

static int collect(void *arg, const struct sse_event *ev)
{
    struct seen *s = arg;
    assert_true(s->n < MAX_EVENTS);
    s->has_data[s->n] = ev->data != NULL;
    if (ev->data)
        snprintf(s->data[s->n], sizeof(s->data[0]), "%.*s", (int)ev->data_len, ev->data);
    if (ev->type)
        snprintf(s->type[s->n], sizeof(s->type[0]), "%.*s", (int)ev->type_len, ev->type);
    memcpy(s->raw + s->raw_len, ev->raw, ev->raw_len);
    s->raw_len += ev->raw_len;
    s->n++;
    return 0;
}

static void feed_all(const char *in, size_t step, struct seen *s)
{
    struct sse_parser *p = sse_parser_create(4096);
    size_t len = strlen(in);
    memset(s, 0, sizeof(*s));
    for (size_t off = 0; off < len; off += step) {
        size_t n = len - off < step ? len - off : step;
        assert_int_equal(sse_parser_feed(p, in + off, n, collect, s), 0);
    }
    sse_parser_destroy(p);
}

static const char *const openai_stream =
    "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n"
    ": keep-alive\n\n"
    "data: [DONE]\n\n";

static void test_events_and_raw_bytes(void **state)
{
    struct seen s;
    feed_all(openai_stream, 1 << 20, &s);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.data[0], "{\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}");
    assert_false(s.has_data[2]); /* a comment: forwarded, no data */
    assert_string_equal(s.data[3], "[DONE]");
    /* the raw spans, joined, are exactly the input: what the proxy forwards */
    assert_int_equal(s.raw_len, strlen(openai_stream));
    assert_memory_equal(s.raw, openai_stream, s.raw_len);
}

static void test_any_split_gives_same_events(void **state)
{
    struct seen whole, split;
    feed_all(openai_stream, 1 << 20, &whole);
    for (size_t step = 1; step < 40; step++) {
        feed_all(openai_stream, step, &split);
        assert_int_equal(split.n, whole.n);
        for (int i = 0; i < whole.n; i++)
            assert_string_equal(split.data[i], whole.data[i]);
        assert_memory_equal(split.raw, whole.raw, whole.raw_len);
    }
}

static void test_line_endings(void **state)
{
    struct seen s;
    const char *crlf = "data: a\r\n\r\ndata: b\r\rdata: c\n\n";
    for (size_t step = 1; step <= strlen(crlf); step++) {
        feed_all(crlf, step, &s);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.data[0], "a");
        assert_string_equal(s.data[1], "b");
        assert_string_equal(s.data[2], "c");
    }
}

static void test_multiline_data_and_fields(void **state)
{
    struct seen s;
    feed_all("event: delta\nid: 7\ndata:one\ndata:  two\ndata\nretry: 5\n\n", 3, &s);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.type[0], "delta");
    /* one leading space is stripped, a second one is kept; "data" alone adds an empty line */
    assert_string_equal(s.data[0], "one\n two\n");
}

static void test_incomplete_event_is_held(void **state)
{
    struct seen s = {0};
    struct sse_parser *p = sse_parser_create(4096);
    assert_int_equal(sse_parser_feed(p, "data: x\n", 8, collect, &s), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(sse_parser_pending(p), 8);
    assert_int_equal(sse_parser_feed(p, "\n", 1, collect, &s), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(sse_parser_pending(p), 0);
    sse_parser_destroy(p);
}

static void test_oversized_event_fails(void **state)
{
    struct seen s = {0};
    struct sse_parser *p = sse_parser_create(64);
    char big[200];
    memset(big, 'x', sizeof(big));
    memcpy(big, "data: ", 6);
    assert_int_equal(sse_parser_feed(p, big, 50, collect, &s), 0);
    assert_int_equal(sse_parser_feed(p, big + 50, 150, collect, &s), -1);
    sse_parser_destroy(p);
}

static int stop_cb(void *arg, const struct sse_event *ev)
{
    (*(int *)arg)++;
    return -1;
}

static void test_callback_can_stop(void **state)
{
    int calls = 0;
    struct sse_parser *p = sse_parser_create(4096);
    assert_int_equal(sse_parser_feed(p, openai_stream, strlen(openai_stream), stop_cb, &calls), -1);
    assert_int_equal(calls, 1);
    sse_parser_destroy(p);
}

static void test_done_detection(void **state)
{
    struct sse_event ev = {.data = "[DONE]", .data_len = 6};
    assert_true(sse_is_done(&ev));
    ev.data = "[DONE] ";
    ev.data_len = 7;
    assert_false(sse_is_done(&ev));
    ev.data = NULL;
    assert_false(sse_is_done(&ev));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_and_raw_bytes),
        cmocka_unit_test(test_any_split_gives_same_events),
        cmocka_unit_test(test_line_endings),
        cmocka_unit_test(test_multiline_data_and_fields),
        cmocka_unit_test(test_incomplete_event_is_held),
        cmocka_unit_test(test_oversized_event_fails),
        cmocka_unit_test(test_callback_can_stop),
        cmocka_unit_test(test_done_detection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
