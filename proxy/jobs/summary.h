/*
 * summary: what memproxy asks the summarizer model, and how it reads the answer (docs/design.md
 * §10). Pure: no I/O, unit-tested, and the answer parser (model output is outside input) has a fuzz
 * target.
 *
 * The request is an OpenAI chat body: the profile's prompt as the system message, then one
 * user message holding the earlier summary and facts of the caller (to be folded in) and the
 * session as it was said and heard — "USER: ..." / "ASSISTANT: ..." lines from the stored
 * turns, where an interrupted reply's content is what the caller heard (its unspoken rest is
 * in "original" and never sent). Injected memory is never stored, so it is never summarized
 * again. Only the newest SUMMARY_MAX_TRANSCRIPT bytes of the conversation are sent.
 *
 * The answer must be one JSON object {"summary": text, "facts": [{category, key, value,
 * confidence}]} (a ```json fence around it is tolerated); anything else is refused whole.
 */
#ifndef MEMPROXY_SUMMARY_H
#define MEMPROXY_SUMMARY_H

#include "config/cfg.h"

#include <jansson.h>
#include <stddef.h>

#define SUMMARY_MAX_TRANSCRIPT (48 * 1024)
#define SUMMARY_MAX_ANSWER     (64 * 1024)

#define SUMMARY_DEFAULT_PROMPT                                                                     \
    "You keep the memory of a voice assistant about one caller. From the conversation below "      \
    "(only what was actually said and heard), and the earlier summary and facts if given, write "  \
    "one short summary of everything known about the caller and their requests, and list "         \
    "durable facts about them. Answer with JSON only: {\"summary\": \"...\", \"facts\": "          \
    "[{\"category\": \"...\", \"key\": \"...\", \"value\": \"...\", \"confidence\": 0.0-1.0}]}"

/* A running call's summary (profiles[].summary_threshold): of the turns its client's window no
 * longer holds, folded into the summary so far; the user's memory is made at stop. */
#define SUMMARY_CALL_PROMPT                                                                        \
    "You keep a running summary of a voice call that is still going on. The earlier part of the "  \
    "conversation below (only what was actually said and heard) is no longer in front of the "     \
    "assistant. Fold it into the earlier summary if given, keeping what the assistant needs to "   \
    "carry on: the caller's requests, what was agreed or answered, open questions. Answer with "   \
    "JSON only: {\"summary\": \"...\"}"

/* The chat body for model (new JSON). turns: stored turns in order; previous: the user's
 * current summary text or NULL; facts: their facts (store.h's shape) or NULL; skip: turn
 * sources left out (profiles[].summary_skip_sources), or NULL. */
json_t *summary_request(const char *model, const char *prompt, json_t *turns, const char *previous,
                        json_t *facts, const struct cfg_strlist *skip);

/* The answer text as {summary: {text}, facts: [...]} (store.h's user-memory shape), or NULL
 * with the reason in *err (caller frees). The JSON may be fenced (```json ... ```) and come
 * after a reasoning model's <think>...</think>. */
json_t *summary_parse(const char *text, size_t len, char **err);

#endif
