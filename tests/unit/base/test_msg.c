/* Unit tests: reading a client's message fields (base/msg.c): its text, turn id, timestamp. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/msg.h"

#include <stdio.h>
#include <string.h>

static json_t *parse(const char *s)
{
    json_t *j = json_loads(s, 0, NULL);
    assert_non_null(j);
    return j;
}

/* A string as is; text parts joined by a newline, the others counted as dropped. */
static void test_text_of_parts(void **state)
{
    int dropped = -1;
    json_t *c = parse("[{\"type\":\"text\",\"text\":\"hello\"},{\"type\":\"image_url\","
                      "\"image_url\":{\"url\":\"data:,\"}},{\"type\":\"text\",\"text\":\"world\"},"
                      "{\"type\":\"text\",\"text\":\"\"}]");
    json_t *t = msg_text(c, &dropped);
    assert_string_equal(json_string_value(t), "hello\nworld\n");
    assert_int_equal(dropped, 1);
    json_decref(t);
    json_decref(c);
    c = json_string("as is");
    t = msg_text(c, &dropped);
    assert_string_equal(json_string_value(t), "as is");
    assert_int_equal(dropped, 0);
    json_decref(t);
    json_decref(c);
    c = parse("[{\"text\":\"\"},{\"text\":\"a\"},{\"text\":\"\"},{\"text\":\"b\"}]");
    t = msg_text(c, &dropped); /* a newline only after some text, as stored texts were joined */
    assert_string_equal(json_string_value(t), "a\n\nb");
    json_decref(t);
    json_decref(c);
    for (int i = 0; i < 3; i++) { /* no text parts, not an array, no content */
        c = i == 0 ? parse("[{\"type\":\"input_audio\"}]") : i == 1 ? json_integer(5) : NULL;
        t = msg_text(c, &dropped);
        assert_string_equal(json_string_value(t), "");
        assert_int_equal(dropped, i == 0);
        json_decref(t);
        json_decref(c);
    }
}

/* As many parts as a body's cap on values allows: every part's text, in order. (Joined one
 * part at a time, each join copying what came before, 10,000 parts of 100 bytes held a
 * worker for 52 s.) */
static void test_text_of_many_parts(void **state)
{
    int dropped;
    json_t *c = json_array();
    char part[16];
    for (int i = 0; i < 50000; i++) {
        snprintf(part, sizeof(part), "%05d", i);
        json_array_append_new(c, json_pack("{s:s, s:s}", "type", "text", "text", part));
    }
    json_t *t = msg_text(c, &dropped);
    const char *s = json_string_value(t);
    assert_int_equal(json_string_length(t), 50000 * 6 - 1);
    for (int i = 0; i < 50000; i++) {
        snprintf(part, sizeof(part), "%05d", i);
        assert_memory_equal(s + 6 * i, part, 5);
        if (i > 0)
            assert_int_equal(s[6 * i - 1], '\n');
    }
    json_decref(t);
    json_decref(c);
}

static void test_turn_ids_and_timestamps(void **state)
{
    json_t *v[] = {json_integer(7),  json_string("7"), json_real(1.5),
                   json_integer(-3), json_string("x"), NULL};
    int64_t want[] = {7, 7, -1, -1, -1, -1};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(msg_turn_id(v[i]), want[i]);
        json_decref(v[i]);
    }
    json_t *secs = json_integer(1763800100), *ms = json_integer(1763800100123LL);
    assert_int_equal(msg_timestamp_ms(secs), 1763800100000LL);
    assert_int_equal(msg_timestamp_ms(ms), 1763800100123LL);
    json_decref(secs);
    json_decref(ms);
}

/* A message calls tools with a non-empty tool_calls array or the legacy function_call: it
 * says nothing, and an empty copy of a reply is not one of those. */
/* An audio reply by reference: a client's {audio: {id}} or a stored turn's metadata.audio,
 * on an assistant message without text only. */
static void test_audio_ref(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"{\"role\":\"assistant\",\"audio\":{\"id\":\"a1\"}}", "a1"},
        {"{\"role\":\"assistant\",\"content\":null,\"audio\":{\"id\":\"a1\"}}", "a1"},
        {"{\"role\":\"assistant\",\"content\":\"\",\"metadata\":{\"audio\":{\"id\":\"a2\"}}}",
         "a2"},
        {"{\"role\":\"assistant\",\"content\":\"Hi.\",\"metadata\":{\"audio\":{\"id\":\"a3\"}}}",
         NULL}, /* memproxy's record of the reply: its transcript is its text */
        {"{\"role\":\"user\",\"audio\":{\"id\":\"a4\"}}", NULL},
        {"{\"role\":\"assistant\",\"audio\":{\"id\":7}}", NULL},
        {"{\"role\":\"assistant\",\"content\":\"\"}", NULL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        json_t *m = json_loads(cases[i][0], 0, NULL);
        const char *id = msg_audio_ref(m);
        if (cases[i][1] == NULL)
            assert_null(id);
        else
            assert_string_equal(id, cases[i][1]);
        json_decref(m);
    }
}

static void test_calls_tools(void **state)
{
    (void)state;
    const char *yes[] = {
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}",
        "{\"role\":\"assistant\",\"content\":null,\"function_call\":{\"name\":\"f\","
        "\"arguments\":\"{}\"}}",
        /* a stored turn keeps function_call in its metadata */
        "{\"role\":\"assistant\",\"content\":\"\",\"metadata\":{\"function_call\":"
        "{\"name\":\"f\",\"arguments\":\"{}\"}}}"};
    const char *no[] = {"{\"role\":\"assistant\",\"content\":\"\"}",
                        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}",
                        "{\"role\":\"assistant\",\"content\":\"x\",\"function_call\":null}"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
        json_t *m = json_loads(yes[i], 0, NULL);
        assert_true(msg_calls_tools(m));
        json_decref(m);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
        json_t *m = json_loads(no[i], 0, NULL);
        assert_false(msg_calls_tools(m));
        json_decref(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_of_parts),
        cmocka_unit_test(test_text_of_many_parts),
        cmocka_unit_test(test_turn_ids_and_timestamps),
        cmocka_unit_test(test_calls_tools),
        cmocka_unit_test(test_audio_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
