/* Unit tests: accumulating a reply from stream chunks and bodies (proxy/reply.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proxy/chat/chunkscan.h"
#include "proxy/chat/reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum reply_chunk add(struct reply *r, const char *s)
{
    return reply_add_chunk(r, s, strlen(s));
}

static void test_stream_text_finish_usage(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    assert_int_equal(add(r, "{\"model\":\"gpt\",\"choices\":[{\"delta\":{\"role\":\"assistant\","
                            "\"content\":\"\"}}]}"),
                     REPLY_CHUNK);
    add(r, "{\"choices\":[{\"delta\":{\"content\":\"Hello\"}}],\"usage\":null}");
    add(r, "{\"choices\":[{\"delta\":{\"content\":\", world\"}}]}");
    add(r, "{\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}");
    assert_int_equal(add(r, "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                            "\"completion_tokens\":2,\"total_tokens\":5}}"),
                     REPLY_USAGE_ONLY);
    assert_string_equal(reply_content(r, &len), "Hello, world");
    assert_int_equal(len, 12);
    assert_string_equal(reply_finish_reason(r), "stop");
    assert_string_equal(reply_model(r), "gpt");
    assert_int_equal(json_integer_value(json_object_get(reply_usage(r), "total_tokens")), 5);
    assert_int_equal(reply_chunks(r), 2);
    reply_destroy(r);
}

static void test_tool_calls_merge_by_index(void **state)
{
    struct reply *r = reply_create();
    add(r,
        "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\","
        "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}");
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
           "{\"arguments\":\"{\\\"city\\\":\"}}]}}]}");
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\","
           "\"function\":{\"name\":\"t\",\"arguments\":\"{}\"}}]}}]}");
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
           "{\"arguments\":\"\\\"Oslo\\\"}\"}}]}}]}");
    add(r, "{\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}");
    json_t *calls = reply_tool_calls(r);
    assert_int_equal(json_array_size(calls), 2);
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "id")),
                        "call_1");
    assert_string_equal(json_string_value(json_object_get(fn, "name")), "get_weather");
    assert_string_equal(json_string_value(json_object_get(fn, "arguments")), "{\"city\":\"Oslo\"}");
    assert_string_equal(reply_finish_reason(r), "tool_calls");
    reply_destroy(r);
}

static json_t *call_fn(struct reply *r, size_t i)
{
    return json_object_get(json_array_get(reply_tool_calls(r), i), "function");
}

/* A tool call's arguments in as many parts as a long one streams in (5 bytes a chunk), its
 * name in two, a second call between them, the calls read midway and again at the end. */
static void test_tool_call_in_many_parts(void **state)
{
    struct reply *r = reply_create();
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":"
           "{\"name\":\"get_\",\"arguments\":\"\"}}]}}]}");
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
           "{\"name\":\"weather\"}}]}}]}");
    const char *part = "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
                       "{\"arguments\":\"abcd\\u00e9\"}}]}}]}"; /* 6 bytes: é is two */
    for (int i = 0; i < 20000; i++) {
        add(r, part);
        if (i == 9999) {
            assert_int_equal(json_string_length(json_object_get(call_fn(r, 0), "arguments")),
                             60000);
            add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":"
                   "{\"name\":\"t\",\"arguments\":\"{}\"}}]}}]}");
        }
    }
    json_t *fn = call_fn(r, 0);
    const char *args = json_string_value(json_object_get(fn, "arguments"));
    assert_int_equal(json_string_length(json_object_get(fn, "arguments")), 120000);
    for (size_t i = 0; i < 120000; i += 6)
        assert_memory_equal(args + i, "abcd\xc3\xa9", 6);
    assert_string_equal(json_string_value(json_object_get(fn, "name")), "get_weather");
    assert_string_equal(json_string_value(json_object_get(call_fn(r, 1), "arguments")), "{}");
    assert_false(reply_truncated(r));
    reply_destroy(r);
}

/* Arguments stop growing at REPLY_MAX_TEXT: the part that would pass it is left out whole,
 * and the parts after it too. */
static void test_tool_call_cap(void **state)
{
    struct reply *r = reply_create();
    size_t n = 100 * 1024;
    char *chunk = malloc(n + 128);
    int off = sprintf(chunk, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,"
                             "\"function\":{\"arguments\":\"");
    memset(chunk + off, 'x', n);
    strcpy(chunk + off + n, "\"}}]}}]}");
    for (int i = 0; i < 11; i++)
        add(r, chunk);
    assert_int_equal(json_string_length(json_object_get(call_fn(r, 0), "arguments")), 10 * n);
    assert_true(reply_truncated(r));
    /* a later short part does not land after the one left out */
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
           "{\"arguments\":\"}\"}}]}}]}");
    assert_int_equal(json_string_length(json_object_get(call_fn(r, 0), "arguments")), 10 * n);
    free(chunk);
    reply_destroy(r);
}

/* A whole body's calls replace the deltas' (and their parts): the body is what was said. */
static void test_body_calls_replace_deltas(void **state)
{
    struct reply *r = reply_create();
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
           "{\"name\":\"a\",\"arguments\":\"x\"}}]}}]}");
    const char *body = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"tool_calls\":[{\"id\":"
                       "\"c\",\"type\":\"function\",\"function\":{\"name\":\"b\",\"arguments\":"
                       "\"{}\"}}]}}]}";
    assert_int_equal(reply_set_body(r, body, strlen(body)), 0);
    assert_string_equal(json_string_value(json_object_get(call_fn(r, 0), "name")), "b");
    add(r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
           "{\"arguments\":\"!\"}}]}}]}");
    assert_string_equal(json_string_value(json_object_get(call_fn(r, 0), "arguments")), "{}!");
    reply_destroy(r);
}

static void test_odd_chunks(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    assert_int_equal(add(r, "not json"), REPLY_INVALID);
    assert_int_equal(add(r, "[1]"), REPLY_INVALID);
    assert_int_equal(add(r, "{\"error\":{\"message\":\"x\"}}"), REPLY_ERROR);
    assert_int_equal(add(r, "{\"choices\":\"x\"}"), REPLY_CHUNK);
    assert_int_equal(add(r, "{\"choices\":[{\"delta\":{\"content\":5,\"tool_calls\":"
                            "[{\"index\":99999}]}}]}"),
                     REPLY_CHUNK);
    assert_string_equal(reply_content(r, &len), "");
    assert_null(reply_finish_reason(r));
    reply_destroy(r);
}

static void test_body(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    const char *body = "{\"model\":\"m\",\"choices\":[{\"message\":{\"role\":\"assistant\","
                       "\"content\":\"Hi there\"},\"finish_reason\":\"stop\"}],"
                       "\"usage\":{\"total_tokens\":9}}";
    assert_int_equal(reply_set_body(r, body, strlen(body)), 0);
    assert_string_equal(reply_content(r, &len), "Hi there");
    assert_string_equal(reply_finish_reason(r), "stop");
    assert_int_equal(reply_set_body(r, "oops", 4), -1);
    reply_destroy(r);
}

/* A body that is an event stream though none was asked for: its events are the reply, the
 * last one without its blank line too; a body of neither kind is refused. */
static void test_body_of_events(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    const char *body =
        "\r\n: keep-alive\n\ndata: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}"
        "\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":"
        "\"stop\"}]}\n\ndata: [DONE]";
    assert_int_equal(reply_set_events(r, body, strlen(body)), 0);
    assert_string_equal(reply_content(r, &len), "Hi there");
    assert_string_equal(reply_finish_reason(r), "stop");
    assert_string_equal(reply_model(r), "m");
    assert_int_equal(reply_set_events(r, "{\"data:\": 1}", 12), -1);
    assert_int_equal(reply_set_events(r, "", 0), -1);
    reply_destroy(r);
}

/* Content as an array of parts, streamed and whole: the text parts are what was said (a
 * model's "thinking" is not); a whole message's parts are joined by a newline. */
static void test_content_parts(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    const char *d1 =
        "{\"choices\":[{\"delta\":{\"content\":[{\"type\":\"thinking\",\"thinking\":"
        "[{\"type\":\"text\",\"text\":\"hmm\"}]},{\"type\":\"text\",\"text\":\"Part\"}]}}]}";
    const char *d2 = "{\"choices\":[{\"delta\":{\"content\":[{\"type\":\"text\",\"text\":"
                     "\" one.\"}]},\"finish_reason\":\"stop\"}]}";
    reply_add_chunk(r, d1, strlen(d1));
    reply_add_chunk(r, d2, strlen(d2));
    assert_string_equal(reply_content(r, &len), "Part one.");
    assert_int_equal(reply_chunks(r), 2);
    reply_destroy(r);
    r = reply_create();
    const char *body = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":["
                       "{\"type\":\"text\",\"text\":\"Part one.\"},{\"type\":\"image_url\"},"
                       "{\"type\":\"text\",\"text\":\"Part two.\"}]},\"finish_reason\":\"stop\"}]}";
    assert_int_equal(reply_set_body(r, body, strlen(body)), 0);
    assert_string_equal(reply_content(r, &len), "Part one.\nPart two.");
    reply_destroy(r);
}

/* A request with n > 1: its choices' deltas come interleaved; the first choice is the reply
 * (as a whole body's first), the fast path and the tree alike. */
static void test_other_choices(void **state)
{
    struct reply *r = reply_create(), *tree = reply_create();
    size_t len;
    for (int i = 0; i < 4; i++) {
        char chunk[160];
        snprintf(chunk, sizeof(chunk),
                 "{\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":%d,\"delta\":"
                 "{\"content\":\"%s\"},\"logprobs\":null,\"finish_reason\":null}]}",
                 i % 2, i % 2 ? "No" : "Yes");
        reply_add_chunk(r, chunk, strlen(chunk));
        reply_add_chunk_tree(tree, chunk, strlen(chunk));
    }
    assert_string_equal(reply_content(r, &len), "YesYes");
    assert_string_equal(reply_content(tree, &len), "YesYes");
    reply_destroy(r);
    reply_destroy(tree);
}

static void test_content_cap(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    char *chunk = malloc(300 * 1024);
    strcpy(chunk, "{\"choices\":[{\"delta\":{\"content\":\"");
    size_t off = strlen(chunk);
    memset(chunk + off, 'a', 256 * 1024);
    strcpy(chunk + off + 256 * 1024, "\"}}]}");
    for (int i = 0; i < 5; i++)
        add(r, chunk);
    reply_content(r, &len);
    assert_int_equal(len, REPLY_MAX_TEXT);
    assert_true(reply_truncated(r));
    free(chunk);
    reply_destroy(r);
}

/* The cap falls inside a character: the content ends before it (still UTF-8, which a stored
 * turn's content must be), and a later short piece does not land after the gap. */
static void test_content_cap_on_a_character(void **state)
{
    struct reply *r = reply_create();
    size_t len, half = 256 * 1024;
    char *chunk = malloc(2 * half + 64);
    add(r, "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}"); /* the cut falls mid-é */
    strcpy(chunk, "{\"choices\":[{\"delta\":{\"content\":\"");
    size_t off = strlen(chunk);
    for (size_t i = 0; i < half; i++)
        memcpy(chunk + off + 2 * i, "\xc3\xa9", 2);
    strcpy(chunk + off + 2 * half, "\"}}]}");
    for (int i = 0; i < 3; i++)
        add(r, chunk);
    add(r, "{\"choices\":[{\"delta\":{\"content\":\"b\"}}]}");
    const char *s = reply_content(r, &len);
    assert_int_equal(len, REPLY_MAX_TEXT - 1);
    assert_true(reply_truncated(r));
    assert_int_equal(s[len - 1] & 0xff, 0xa9);
    json_t *text = json_stringn(s, len);
    assert_non_null(text); /* valid UTF-8 */
    json_decref(text);
    free(chunk);
    reply_destroy(r);
}

static void test_usage_only_check(void **state)
{
    const char *yes[] = {"{\"choices\":[],\"usage\":{\"total_tokens\":1}}",
                         "{\"id\":\"x\", \"choices\" : [ ] , \"usage\": {}}"};
    const char *no[] = {"{\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}",
                        "{\"choices\":[],\"usage\":null}",
                        "{\"choices\":[{\"delta\":{\"content\":\"say \\\"choices\\\":[] now\"}}]}",
                        "{\"choices\":[]",
                        "\"choices\"",
                        ""};
    for (size_t i = 0; i < 2; i++)
        assert_true(reply_is_usage_only(yes[i], strlen(yes[i])));
    for (size_t i = 0; i < 6; i++)
        assert_false(reply_is_usage_only(no[i], strlen(no[i])));
}

static void test_queue_then_flush(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    const char *a = "{\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}";
    const char *b = "{\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}";
    reply_queue_chunk(r, a, strlen(a));
    reply_queue_chunk(r, b, strlen(b));
    assert_string_equal(reply_content(r, &len), ""); /* parsed only on flush */
    reply_flush(r);
    assert_string_equal(reply_content(r, &len), "Hello");
    assert_string_equal(reply_finish_reason(r), "stop");
    /* the queue is bounded: enough chunks flush themselves */
    for (int i = 0; i < 20000; i++)
        reply_queue_chunk(r, a, strlen(a));
    reply_content(r, &len);
    assert_true(len > 5);
    reply_flush(r);
    reply_content(r, &len);
    assert_int_equal(len, 5 + 20000 * 3);
    reply_destroy(r);
}

/* The common chunk is read without a tree; anything outside its shape is declined (and the
 * general parse takes it), never read differently. */
static void test_chunkscan(void **state)
{
    struct chunkscan c;
    struct chunkscan_buf buf = {0};
    const char *ok =
        " {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":-17,"
        "\"model\":\"gpt-4o-mini\",\"system_fingerprint\":null,\"choices\":[{\"index\":0,"
        "\"delta\":{\"role\":\"assistant\",\"content\":\"Hi there\"},\"logprobs\":null,"
        "\"finish_reason\":\"stop\"}],\"usage\":null,\"x\":true}\r\n";
    assert_true(chunkscan_delta(ok, strlen(ok), &buf, &c));
    assert_int_equal(c.model.len, 11);
    assert_memory_equal(c.model.s, "gpt-4o-mini", 11);
    assert_int_equal(c.content.len, 8);
    assert_memory_equal(c.content.s, "Hi there", 8);
    assert_memory_equal(c.finish_reason.s, "stop", 4);
    const char *empty = "{\"choices\":[{\"delta\":{},\"finish_reason\":null}]}";
    assert_true(chunkscan_delta(empty, strlen(empty), &buf, &c));
    assert_null(c.content.s);
    assert_null(c.finish_reason.s);
    static const char *const declined[] = {
        "{\"choices\":[{\"delta\":{\"content\":\"a\\u0000b\"}}]}",           /* \u0000 */
        "{\"choices\":[{\"delta\":{\"content\":\"caf\xc3\"}}]}",             /* bad UTF-8 */
        "{\"choices\":[{\"delta\":{\"tool_calls\":[]}}]}",                   /* tool calls */
        "{\"choices\":[],\"usage\":{\"total_tokens\":3}}",                   /* usage */
        "{\"choices\":[{\"delta\":{}},{\"delta\":{}}]}",                     /* two choices */
        "{\"created\":1.5,\"choices\":[]}",                                  /* a real */
        "{\"created\":01}",                                                  /* a leading zero */
        "{\"choices\":[{\"delta\":{\"content\":\"a\",\"content\":\"b\"}}]}", /* twice */
        "{\"error\":{\"message\":\"x\"}}",                                   /* an error */
        "{\"model\":\"m\"} x",                                               /* trailing */
        "{\"model\":\"m\",}",                                                /* a comma */
        "[]",
        "",
    };
    for (size_t i = 0; i < sizeof(declined) / sizeof(declined[0]); i++)
        assert_false(chunkscan_delta(declined[i], strlen(declined[i]), &buf, &c));
    /* escapes and UTF-8 read as jtext reads them; a decoded string outlives the next one */
    const char *esc =
        "{\"model\":\"m\\u00e9\",\"choices\":[{\"delta\":{\"content\":"
        "\"caf\xc3\xa9\\n\\\"ok\\\" \\ud83d\\ude00\"},\"finish_reason\":\"st\\u006fp\"}],"
        "\"x\\u0079\":\"\\t\"}";
    assert_true(chunkscan_delta(esc, strlen(esc), &buf, &c));
    assert_int_equal(c.model.len, 3);
    assert_memory_equal(c.model.s, "m\xc3\xa9", 3);
    const char *want = "caf\xc3\xa9\n\"ok\" \xf0\x9f\x98\x80";
    assert_int_equal(c.content.len, strlen(want));
    assert_memory_equal(c.content.s, want, strlen(want));
    assert_int_equal(c.finish_reason.len, 4);
    assert_memory_equal(c.finish_reason.s, "stop", 4);
    chunkscan_buf_free(&buf);
}

/* A refusal (structured outputs) is kept apart from the content, from a stream's deltas and
 * from a body's message; the tree-less reader passes a null or empty refusal and declines a
 * text, so both paths keep it. */
static void test_refusal(void **state)
{
    struct reply *r = reply_create();
    struct chunkscan c;
    struct chunkscan_buf buf = {0};
    const char *first =
        "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
        "\"assistant\",\"content\":null,\"refusal\":\"\"},\"finish_reason\":null}]}";
    const char *part = "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"refusal\":"
                       "\"I can\\u2019t\"},\"finish_reason\":null}]}";
    const char *none = "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                       "\"x\",\"refusal\":null},\"finish_reason\":null}]}";
    assert_true(chunkscan_delta(first, strlen(first), &buf, &c)); /* an empty refusal */
    assert_false(chunkscan_delta(part, strlen(part), &buf, &c));
    assert_true(chunkscan_delta(none, strlen(none), &buf, &c));
    add(r, first);
    add(r, part);
    add(r, "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\" help.\"},"
           "\"finish_reason\":\"stop\"}]}");
    size_t len = 0;
    assert_string_equal(reply_refusal(r, &len), "I can\u2019t help.");
    assert_int_equal(len, strlen("I can\u2019t help."));
    assert_string_equal(reply_content(r, &len), "");
    reply_destroy(r);

    r = reply_create();
    const char *body = "{\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                       "\"assistant\",\"content\":null,\"refusal\":\"No.\"},"
                       "\"finish_reason\":\"stop\"}]}";
    assert_int_equal(reply_set_body(r, body, strlen(body)), 0);
    assert_string_equal(reply_refusal(r, &len), "No.");
    reply_destroy(r);
    chunkscan_buf_free(&buf);
}

/* A reasoning model's thinking is kept apart from the content: DeepSeek's and vLLM's
 * reasoning_content, OpenRouter's reasoning (the same text under both keys taken once), and
 * Mistral's thinking parts; the tree-less reader passes a null or empty one and declines text. */
static void test_reasoning(void **state)
{
    struct reply *r = reply_create();
    struct chunkscan c;
    struct chunkscan_buf buf = {0};
    const char *think = "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
                        "\"assistant\",\"content\":null,\"reasoning_content\":\"The user \"},"
                        "\"finish_reason\":null}]}";
    const char *both =
        "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":"
        "\"asks.\",\"reasoning\":\"asks.\"},\"finish_reason\":null}]}";
    const char *say = "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                      "\"Hi.\",\"reasoning_content\":null,\"reasoning\":\"\"},"
                      "\"finish_reason\":\"stop\"}]}";
    assert_false(chunkscan_delta(think, strlen(think), &buf, &c));
    assert_true(chunkscan_delta(say, strlen(say), &buf, &c)); /* no reasoning in it */
    add(r, think);
    add(r, both);
    add(r, say);
    size_t len = 0;
    assert_string_equal(reply_reasoning(r, &len), "The user asks.");
    assert_int_equal(len, strlen("The user asks."));
    assert_string_equal(reply_content(r, &len), "Hi.");
    reply_destroy(r);

    r = reply_create(); /* OpenRouter: reasoning alone */
    add(r, "{\"choices\":[{\"delta\":{\"content\":\"\",\"reasoning\":\"Hm.\"}}]}");
    assert_string_equal(reply_reasoning(r, &len), "Hm.");
    reply_destroy(r);

    r = reply_create(); /* Mistral: a thinking part beside the text part */
    add(r, "{\"choices\":[{\"delta\":{\"content\":[{\"type\":\"thinking\",\"thinking\":"
           "[{\"type\":\"text\",\"text\":\"Plan: \"},{\"type\":\"text\",\"text\":\"greet.\"}]},"
           "{\"type\":\"text\",\"text\":\"Hello.\"}]}}]}");
    assert_string_equal(reply_reasoning(r, &len), "Plan: greet.");
    assert_string_equal(reply_content(r, &len), "Hello.");
    reply_destroy(r);

    r = reply_create();
    const char *body = "{\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                       "\"assistant\",\"content\":\"Yes.\",\"reasoning_content\":\"Easy.\"},"
                       "\"finish_reason\":\"stop\"}]}";
    assert_int_equal(reply_set_body(r, body, strlen(body)), 0);
    assert_string_equal(reply_reasoning(r, &len), "Easy.");
    assert_string_equal(reply_content(r, &len), "Yes.");
    reply_destroy(r);

    r = reply_create();
    assert_string_equal(reply_reasoning(r, &len), "");
    assert_int_equal(len, 0);
    reply_destroy(r);
    chunkscan_buf_free(&buf);
}

/* OpenAI's older functions API: a streamed function_call's pieces are joined, a body's taken
 * whole; a reply without one has none. */
static void test_function_call(void **state)
{
    struct reply *r = reply_create();
    assert_null(reply_function_call(r));
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,"
           "\"function_call\":{\"name\":\"weather\",\"arguments\":\"\"}}}]}");
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{\"function_call\":{\"arguments\":"
           "\"{\\\"city\\\"\"}}}]}");
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{\"function_call\":{\"arguments\":"
           "\":\\\"Oslo\\\"}\"}}}]}");
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"function_call\"}]}");
    json_t *fc = reply_function_call(r);
    assert_string_equal(json_string_value(json_object_get(fc, "name")), "weather");
    assert_string_equal(json_string_value(json_object_get(fc, "arguments")), "{\"city\":\"Oslo\"}");
    assert_string_equal(reply_finish_reason(r), "function_call");
    reply_destroy(r);

    r = reply_create();
    const char *body = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                       "\"content\":null,\"function_call\":{\"name\":\"f\",\"arguments\":"
                       "\"{}\"}},\"finish_reason\":\"function_call\"}]}";
    assert_int_equal(reply_set_body(r, body, strlen(body)), 0);
    fc = reply_function_call(r);
    assert_string_equal(json_string_value(json_object_get(fc, "name")), "f");
    assert_string_equal(json_string_value(json_object_get(fc, "arguments")), "{}");
    reply_destroy(r);
}

/* An audio reply (gpt-4o-audio): the transcript's pieces are the content, the audio's data is
 * not kept, the id and expiry are; a whole message's the same. */
static void test_audio(void **state)
{
    struct reply *r = reply_create();
    size_t len;
    assert_null(reply_audio(r));
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,"
           "\"audio\":{\"id\":\"audio_1\",\"transcript\":\"It is \"}}}]}");
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{\"audio\":{\"data\":\"UklGRg==\"}}}]}");
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{\"audio\":{\"transcript\":\"sunny.\"}}}]}");
    add(r, "{\"choices\":[{\"index\":0,\"delta\":{\"audio\":{\"expires_at\":1900000000}}}]}");
    assert_string_equal(reply_content(r, &len), "It is sunny.");
    assert_int_equal(reply_chunks(r), 2);
    json_t *want = json_pack("{s:s, s:i}", "id", "audio_1", "expires_at", 1900000000);
    assert_true(json_equal(reply_audio(r), want));
    json_decref(want);
    reply_destroy(r);

    r = reply_create();
    const char *body = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                       "\"content\":null,\"refusal\":null,\"audio\":{\"id\":\"audio_2\","
                       "\"data\":\"UklGRg==\",\"expires_at\":5,\"transcript\":\"Hi.\"}},"
                       "\"finish_reason\":\"stop\"}]}";
    assert_int_equal(reply_set_body(r, body, strlen(body)), 0);
    assert_string_equal(reply_content(r, &len), "Hi.");
    want = json_pack("{s:s, s:i}", "id", "audio_2", "expires_at", 5);
    assert_true(json_equal(reply_audio(r), want));
    json_decref(want);
    reply_destroy(r);
}

/* A whole body as OpenAI sends it is read without a tree, usage and its token details
 * included; the same things as in a chunk, and tool calls, are declined. */
static void test_chunkscan_message(void **state)
{
    struct chunkscan c;
    struct chunkscan_buf buf = {0};
    const char *ok =
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1741569952,"
        "\"model\":\"gpt-4.1\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
        "\"content\":\"Hello!\",\"refusal\":null,\"annotations\":[]},\"logprobs\":null,"
        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":10,"
        "\"total_tokens\":29,\"prompt_tokens_details\":{\"cached_tokens\":0,\"audio_tokens\":0},"
        "\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":null}},"
        "\"service_tier\":\"default\"}";
    assert_true(chunkscan_message(ok, strlen(ok), &buf, &c));
    assert_memory_equal(c.content.s, "Hello!", 6);
    assert_memory_equal(c.model.s, "gpt-4.1", 7);
    assert_memory_equal(c.finish_reason.s, "stop", 4);
    const char *usage = strstr(ok, "{\"prompt_tokens\"");
    assert_ptr_equal(c.usage.s, usage);
    assert_int_equal(c.usage.len, strlen(usage) - strlen(",\"service_tier\":\"default\"}"));
    assert_false(chunkscan_delta(ok, strlen(ok), &buf, &c)); /* a body is no chunk */

    struct reply *r = reply_create();
    assert_int_equal(reply_set_body(r, ok, strlen(ok)), 0);
    json_t *details = json_object_get(reply_usage(r), "prompt_tokens_details");
    assert_int_equal(json_integer_value(json_object_get(details, "cached_tokens")), 0);
    assert_int_equal(json_integer_value(json_object_get(reply_usage(r), "total_tokens")), 29);
    assert_int_equal(reply_chunks(r), 1);
    reply_destroy(r);

    static const char *const declined[] = {
        "{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}", /* a chunk */
        "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\"}]}}]}",
        "{\"choices\":[{\"message\":{\"annotations\":[{\"type\":\"url\"}]}}]}",
        "{\"choices\":[],\"usage\":{\"a\":{\"b\":{\"c\":1}}}}", /* too deep */
        "{\"choices\":[],\"usage\":{\"cost\":0.5}}",            /* a real */
        "{\"choices\":[],\"usage\":{\"a\":1},\"usage\":null}",  /* twice */
        "{\"choices\":[],\"usage\":[1]}",
    };
    for (size_t i = 0; i < sizeof(declined) / sizeof(declined[0]); i++)
        assert_false(chunkscan_message(declined[i], strlen(declined[i]), &buf, &c));
    chunkscan_buf_free(&buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_text_finish_usage),
        cmocka_unit_test(test_tool_calls_merge_by_index),
        cmocka_unit_test(test_tool_call_in_many_parts),
        cmocka_unit_test(test_tool_call_cap),
        cmocka_unit_test(test_body_calls_replace_deltas),
        cmocka_unit_test(test_odd_chunks),
        cmocka_unit_test(test_body),
        cmocka_unit_test(test_body_of_events),
        cmocka_unit_test(test_content_parts),
        cmocka_unit_test(test_other_choices),
        cmocka_unit_test(test_content_cap),
        cmocka_unit_test(test_content_cap_on_a_character),
        cmocka_unit_test(test_usage_only_check),
        cmocka_unit_test(test_queue_then_flush),
        cmocka_unit_test(test_chunkscan),
        cmocka_unit_test(test_chunkscan_message),
        cmocka_unit_test(test_refusal),
        cmocka_unit_test(test_reasoning),
        cmocka_unit_test(test_function_call),
        cmocka_unit_test(test_audio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
