/*
 * sse: incremental parser for text/event-stream, as OpenAI-compatible servers send it.
 *
 * Bytes go in as they arrive from the network, in pieces of any size; each complete event
 * comes out through a callback with both its raw bytes (so the proxy forwards exactly what
 * upstream sent) and its parsed fields. Line endings may be \n, \r\n or \r. A single-line
 * event's data points into the input (no copy); only multi-line data is joined in a scratch
 * buffer.
 *
 * Caps: an event larger than max_event bytes makes feed() fail; the parser never holds more
 * than max_event plus one input piece.
 *
 * Ownership: the parser owns its buffers. Pointers in a struct sse_event are valid only during
 * the callback.
 */
#ifndef MEMPROXY_SSE_H
#define MEMPROXY_SSE_H

#include <stddef.h>

struct sse_event {
    const char *raw; /* the event as received, blank-line terminator included */
    size_t raw_len;
    const char *data; /* data lines joined with \n; NULL when the event has no data field */
    size_t data_len;
    const char *type; /* the "event:" field; NULL when absent */
    size_t type_len;
};

/* Return 0 to go on, -1 to stop parsing (feed() then returns -1). */
typedef int (*sse_event_cb)(void *arg, const struct sse_event *ev);

struct sse_parser;

struct sse_parser *sse_parser_create(size_t max_event);
void sse_parser_destroy(struct sse_parser *p);

/* Feed bytes; complete events are passed to cb. 0, or -1 (event too large, or cb stopped). */
int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len, sse_event_cb cb, void *arg);

/* Bytes of an incomplete event held back; at end of stream these are discarded (per spec). */
size_t sse_parser_pending(const struct sse_parser *p);

/* Is this data the "[DONE]" sentinel? */
int sse_is_done(const struct sse_event *ev);

#endif
