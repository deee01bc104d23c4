/*
 * inject: the system messages inject_memory adds to a session's upstream requests, read
 * when the working set loads the session (memory.c): its runtime system messages (set over
 * REST), then the user's summary and facts, quoted as the caller's words (base/msg.h), never
 * as instructions.
 */
#ifndef MEMPROXY_INJECT_H
#define MEMPROXY_INJECT_H

#include <jansson.h>
#include <stddef.h>

/* runtime: the session's runtime system messages (strings or {content} objects; NULL:
 * none); um: the user's memory as store_user_memory() gives it ({summary, facts}; NULL:
 * none). A new array, or NULL when there is nothing to inject. */
json_t *inject_from(json_t *runtime, json_t *um);

#endif
