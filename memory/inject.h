/*
 * inject: the system messages inject_memory adds to a session's upstream requests, read
 * when the working set loads the session (memory.c): its runtime system messages (set over
 * REST), then the user's summary and facts, quoted as the caller's words (base/msg.h), never
 * as instructions.
 */
#ifndef MEMPROXY_INJECT_H
#define MEMPROXY_INJECT_H

#include "memory/store.h"

#include <jansson.h>
#include <stddef.h>

/* runtime: the session's runtime system messages (strings or {content} objects; NULL:
 * none); user: whose memory (NULL: none), at most max_facts facts, the most confident first.
 * A new array, or NULL when there is nothing to inject. */
json_t *inject_build(struct store_reader *sr, const char *tenant, json_t *runtime, const char *user,
                     size_t max_facts);

#endif
