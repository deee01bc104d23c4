/*
 * chatreq: parse and validate a client's chat completion request, and build the body sent
 * upstream.
 *
 * Validation is strict where a bad value would otherwise reach storage or crash a consumer
 * (body shape, messages, roles, types) and lenient elsewhere: unknown fields pass through to
 * the upstream, which knows its own parameters best.
 *
 * Nesting depth is checked while the body is read, so a hostile body never builds a deep
 * tree. With a memo (jmemo.h), messages read before are not read again (nor checked again:
 * the memo notes a message found valid): the request's messages are then shared with the
 * memo, and nothing may change them (transforms replace a message, they never change one).
 *
 * Ownership: chatreq_parse() fills a struct chatreq that owns its JSON; release it with
 * chatreq_clear(). chatreq_upstream() returns a new reference; the strings returned are the
 * caller's to free.
 */
#ifndef MEMPROXY_CHATREQ_H
#define MEMPROXY_CHATREQ_H

#include "proxy/http/apierr.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct jmemo;

struct chatreq_opts {
    size_t max_depth; /* objects and arrays nested at most this deep */
    size_t max_messages;
    struct jmemo *memo; /* the worker's memo of messages read before, or NULL */
    uint64_t memo_seed; /* whose messages (util_hash64 of the tenant): never shared across */
};

struct chatreq {
    json_t *body;        /* the request as parsed (an object) */
    json_t *messages;    /* borrowed from body */
    int stream;          /* "stream": true */
    int include_usage;   /* the client asked for the usage chunk itself */
    const char *profile; /* body "profile", or NULL; borrowed from body */
};

/* 0, or -1 with *err describing the problem (and *out left empty). */
int chatreq_parse(const char *buf, size_t len, const struct chatreq_opts *opt, struct chatreq *out,
                  struct apierr *err);

/*
 * The upstream request: a new object sharing the client's values, with memproxy's own fields
 * removed, "model" replaced when model is non-NULL and non-empty, and for streams
 * "stream_options.include_usage": true so usage is always recorded.
 */
json_t *chatreq_upstream(const struct chatreq *r, const char *model);
/* Lay a session's runtime params (set over REST, Agora's llm.params) over the upstream
 * body: the standard OpenAI fields among them replace the request's (model, temperature,
 * top_p, max_tokens, ...); the rest are the operator's own and are not sent. */
void chatreq_apply_params(json_t *up, json_t *params);
/* Its JSON text (caller frees); *len gets its length. With the worker's memo (or NULL), the
 * texts of messages it holds are copied, not written again (jtext_dump_memo). */
char *chatreq_dump(json_t *up, struct jmemo *memo, size_t *len);
/* Both in one: the upstream body of r as it came. */
char *chatreq_upstream_body(const struct chatreq *r, const char *model, size_t *len);

void chatreq_clear(struct chatreq *r);

#endif
