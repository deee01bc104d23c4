/*
 * Fuzz the reply accumulator with upstream stream chunks and response bodies: the input is
 * split at newlines into chunks (parsed at once or queued), then read once more as a whole
 * body. Each chunk also goes to a second reply through the full parse only
 * (reply_add_chunk_tree): the common chunk's shortcut (proxy/chunkscan.h) must leave both
 * replies the same and classify the chunk the same. The whole input, read as a body, goes the
 * same two ways (reply_set_body, reply_set_body_tree), and once more as an event stream
 * (reply_set_events).
 */
#include "fuzz.h"
#include "proxy/chat/reply.h"

#include <stdlib.h>
#include <string.h>

static int same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int same_json(json_t *a, json_t *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && json_equal(a, b));
}

static void same_replies(struct reply *a, struct reply *b)
{
    size_t la = 0, lb = 0, ra = 0, rb = 0, ta = 0, tb = 0;
    const char *ca = reply_content(a, &la), *cb = reply_content(b, &lb);
    const char *fa = reply_refusal(a, &ra), *fb = reply_refusal(b, &rb);
    const char *xa = reply_reasoning(a, &ta), *xb = reply_reasoning(b, &tb);
    if (la != lb || memcmp(ca, cb, la) != 0 || ra != rb || memcmp(fa, fb, ra) != 0 || ta != tb ||
        memcmp(xa, xb, ta) != 0 || reply_chunks(a) != reply_chunks(b) ||
        reply_truncated(a) != reply_truncated(b) || !same_str(reply_model(a), reply_model(b)) ||
        !same_str(reply_finish_reason(a), reply_finish_reason(b)) ||
        !same_json(reply_usage(a), reply_usage(b)) ||
        !same_json(reply_tool_calls(a), reply_tool_calls(b)) ||
        !same_json(reply_function_call(a), reply_function_call(b)) ||
        !same_json(reply_audio(a), reply_audio(b)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct reply *r = reply_create(), *whole = reply_create(), *tree = reply_create();
    const char *s = (const char *)data, *end = s + size;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (n % 2)
            reply_add_chunk(r, s, n);
        else
            reply_queue_chunk(r, s, n);
        if (reply_add_chunk(whole, s, n) != reply_add_chunk_tree(tree, s, n))
            abort();
        same_replies(whole, tree);
        reply_is_usage_only(s, n);
        s += n + 1;
    }
    reply_flush(r); /* r took the chunks in another order (queued ones last): not compared */
    size_t len = 0;
    const char *text = reply_content(r, &len);
    if (strlen(text) > len) /* content is NUL-terminated at its length */
        __builtin_trap();
    reply_set_body(r, (const char *)data, size);
    struct reply *body = reply_create(), *body_tree = reply_create();
    if (reply_set_body(body, (const char *)data, size) !=
        reply_set_body_tree(body_tree, (const char *)data, size))
        abort();
    same_replies(body, body_tree);
    /* the whole input as an event stream (a server that streamed though asked not to) */
    struct reply *events = reply_create();
    reply_set_events(events, (const char *)data, size);
    if (strlen(reply_content(events, &len)) > len)
        __builtin_trap();
    reply_destroy(events);
    reply_destroy(body);
    reply_destroy(body_tree);
    reply_destroy(r);
    reply_destroy(whole);
    reply_destroy(tree);
    return 0;
}
