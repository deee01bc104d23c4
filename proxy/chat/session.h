/*
 * session: which session and which user a chat request belongs to (docs/design.md §5), and the
 * routing fields to take out of the body before it goes upstream.
 *
 * Session id, first found wins: the X-Session-Id header; ?session_id= in the query; the
 * body's top-level session_id (Agora copies llm.params keys there); Vapi's call.id;
 * ElevenLabs' elevenlabs_extra_body.conversation_id; the configured sessions.id_fields in
 * order (names or JSON Pointers such as /elevenlabs_extra_body/conversation_id); then the
 * first group of sessions.id_pattern in the first system message (a phone call's prompt
 * with {{system__conversation_id}} put in it). User id: the X-User-Id header; body user_id;
 * OpenAI's user; user_uid (Agora's samples); sessions.user_fields; ElevenLabs'
 * elevenlabs_extra_body.user_id; Vapi's customer.number (or call.customer.number); the
 * metadata.user of the latest user message.
 *
 * Ids are 1..SESSION_MAX_ID bytes of UTF-8 text without control characters (util_id_valid);
 * integers in the body are taken as their decimal text. A present but unusable id is a 400, never a
 * silent fallback to the next source: a request recorded under the wrong session is worse than a
 * refused one.
 *
 * Pure: no evhttp, so unit tests and the fuzz target call it directly.
 */
#ifndef MEMPROXY_SESSION_H
#define MEMPROXY_SESSION_H

#include "base/util.h"
#include "config/cfg.h"
#include "proxy/http/apierr.h"

#include <jansson.h>
#include <regex.h>

#define SESSION_MAX_ID UTIL_MAX_ID

struct session_input {
    const char *h_session;                 /* X-Session-Id, or NULL */
    const char *h_user;                    /* X-User-Id, or NULL */
    const char *query;                     /* the request URI's query string (after '?'), or NULL */
    json_t *body;                          /* the parsed request (an object) */
    const struct cfg_strlist *id_fields;   /* sessions.id_fields: names or JSON Pointers */
    const struct cfg_strlist *user_fields; /* sessions.user_fields: the same, for the user */
    const regex_t *id_pattern;             /* sessions.id_pattern, or NULL */
};

struct session_ids {
    char *session_id; /* NULL: the request names no session */
    char *user_id;    /* NULL: no user */
};

/* Is s[0..len) a usable id: 1..SESSION_MAX_ID bytes, no control character (NUL included)? */
int session_id_valid(const char *s, size_t len);

/* 0 with ids filled (caller clears), or -1 with *e set. */
int session_resolve(const struct session_input *in, struct session_ids *ids, struct apierr *e);
void session_ids_clear(struct session_ids *ids);

/* Remove the body fields session_resolve() reads: they route the request inside memproxy
 * and an upstream may reject them. OpenAI's "user" stays: it is the upstream's own field.
 * (chatreq drops "profile".) */
void session_strip(json_t *body, const struct cfg_strlist *id_fields);

#endif
