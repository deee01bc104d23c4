/*
 * cache: the exact-match answer cache's key (docs/design.md §10). Pure.
 *
 * Only a turn that depends on no earlier context may be served from the cache: the messages
 * sent upstream must be system messages and then one user message with text content — no
 * earlier user, assistant or tool turn (a voice window, or stored history put before it, makes
 * the request ineligible) — and no tools or functions, n of 1, no logprobs. The key covers
 * everything the model is sent for it: tenant, profile, every field of the body that shapes the
 * answer (model, temperature, top_p, stop, response_format, seed, max_tokens, penalties,
 * logit_bias, and any field it does not know: only delivery fields — stream, stream_options,
 * user, metadata, store, service_tier — are left out), every system message exactly (the
 * profile's, the client's and the memory injected for the user, so one caller's memory never
 * answers another), and the user's text normalized (case, surrounding and repeated
 * whitespace).
 */
#ifndef MEMPROXY_CACHE_H
#define MEMPROXY_CACHE_H

#include <jansson.h>

#define CACHE_KEY_LEN 64 /* hex SHA-256 */

/* 0 with key (CACHE_KEY_LEN + 1 bytes) filled when body (the final upstream request) may be
 * cached; -1 when it depends on context. */
int cache_key(const char *tenant, const char *profile, json_t *body, char *key);

#endif
