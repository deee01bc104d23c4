/*
 * chunkscan: the common stream chunk and response body, read without building a JSON tree.
 *
 * Every token of a streamed answer arrives as one chat.completion.chunk; memproxy reads each
 * to record what the model said, and building a jansson tree for it (~10 objects and strings)
 * was ~70% of the instructions a streamed request costs. Most chunks have one shape:
 *
 *   {"id":"…","object":"chat.completion.chunk","created":1,"model":"…",
 *    "choices":[{"index":0,"delta":{"content":"…"},"logprobs":null,"finish_reason":null}]}
 *
 * chunkscan_delta() reads exactly that family and says no to anything else, so the caller
 * parses those the general way: the answer for a chunk it accepts is the one the general
 * parse would give (tests/fuzz/fuzz_reply.c holds the two paths together).
 *
 * Accepted: one JSON object, whitespace around tokens, whose strings are read by jtext's own
 * rules (escapes, UTF-8; jtext_read_string); numbers are integers of at most 18 digits;
 * "choices" is an array of exactly one object; its "delta" is an object of "content" and
 * "role" (strings or null) and "refusal", "reasoning_content" and "reasoning" (null or empty:
 * a refusal's or a reasoning's text is recorded apart, by the general parse); its "index", if
 * present, is 0 (a request's other choices, n > 1, are not what was said); its
 * "logprobs" is null and "finish_reason" a string or null; "usage", if present, is null; no
 * "error"; any other member, at either level, is a string, an integer, true, false or null;
 * "model", "choices", "delta", "content" and "finish_reason" appear at most once. Anything else
 * (tool calls, usage, reals, nested values) is declined.
 *
 * chunkscan_message() reads the common non-streaming body (chat.completion) the same way: its
 * one choice holds "message" where a chunk holds "delta", and may also hold "annotations" as
 * an empty array; "usage" may be an object of integers and nulls, or of objects of those (the
 * token details); its span is the object's text, for the caller to parse (a few numbers).
 * A recorded reply read this way cost ~3,000 instructions instead of ~14,000.
 *
 * Ownership: the spans point into the caller's data, or into buf when a string held escapes
 * (valid until the next call with buf). buf belongs to the caller: zeroed to start, reused
 * from chunk to chunk, released with chunkscan_buf_free().
 */
#ifndef MEMPROXY_CHUNKSCAN_H
#define MEMPROXY_CHUNKSCAN_H

#include <stddef.h>

struct chunkscan_span {
    const char *s; /* NULL: absent or null */
    size_t len;
};

struct chunkscan {
    struct chunkscan_span model, content, finish_reason;
    struct chunkscan_span usage; /* chunkscan_message: the usage object's text, or NULL */
};

struct chunkscan_buf {
    char *tmp, *keep; /* escaped strings decoded: the current one, the ones kept */
    size_t tmp_cap, keep_cap;
};

/* 1 with *out filled when data is a chunk of the common shape, else 0. */
int chunkscan_delta(const char *data, size_t len, struct chunkscan_buf *buf, struct chunkscan *out);
/* 1 with *out filled when data is a response body of the common shape, else 0. */
int chunkscan_message(const char *data, size_t len, struct chunkscan_buf *buf,
                      struct chunkscan *out);
void chunkscan_buf_free(struct chunkscan_buf *buf);

#endif
