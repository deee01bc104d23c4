/*
 * tx: the transforms that decide what the model sees (docs/design.md §7). Each is a pure function
 * over the message array of the upstream request; a profile lists them in order.
 *
 *   standard          only OpenAI's fields per message (role, content, name, tool_calls,
 *                     tool_call_id) and only OpenAI's top-level request fields
 *   interruptions     an interrupted reply as heard, as generated (original), or as heard
 *                     with a note (annotate)
 *   timestamps        each message's time before its text
 *   user_context      a system line with what is known about the user
 *   drop_sources      leave out messages by source (silence reminders, ...)
 *   merge_consecutive one message per run of same-role text messages
 *   trim              fit the token budget: system messages stay, the newest turns stay, the
 *                     window starts on a user message, a tool result keeps its call
 *   inject_memory     after the client's system messages: memproxy's own (runtime system
 *                     messages, the user's summary, facts), within the memory budget
 *
 * Messages come in the client's shape (voice fields in "metadata", "turn_id", "timestamp"
 * beside them) or memproxy's stored shape (those fields at the top level); both are read.
 *
 * Ownership: transforms never change a message object in place — a message they change is
 * replaced in the array by a new object — so the array may share its messages with the
 * request that is being recorded, and with the worker's memo of messages read before
 * (jmemo.h). With that memo, what a transform reads of a message the memo holds (its role,
 * tokens, whether it was interrupted) is noted there, and `standard`'s form of it kept: a
 * window's messages are read and rebuilt once, not on every request that resends them. The
 * result is the same as without. ctx fields are borrowed.
 */
#ifndef MEMPROXY_TX_H
#define MEMPROXY_TX_H

#include "base/jmemo.h"
#include "config/cfg.h"

#include <jansson.h>
#include <stddef.h>

/* A message's tokens: its text's (content, and its tool calls' names and arguments), counted
 * by the profile's tokenizer (base/tiktoken.h) or else estimated as bytes /
 * TX_CHARS_PER_TOKEN, plus TX_MESSAGE_TOKENS for the message's own framing. */
#define TX_CHARS_PER_TOKEN 4
#define TX_MESSAGE_TOKENS  4

/* A tokenizer counts at most this many bytes of text a request, newest messages first (about
 * 15 ms at its worst, text that is all long runs of random letters; under 0.5 ms for real
 * text); messages past it are estimated as characters / 4 and counted by a later request.
 * Messages the worker's memo holds are counted once, so a call's window costs only its new
 * messages. */
#define TX_EXACT_BUDGET (64u << 10)

struct tx_ctx {
    const struct cfg_profile *prof; /* the options: interruptions, budgets, formats, ... */
    json_t *body;                   /* the upstream request body (top-level fields), or NULL */
    json_t *inject;                 /* system messages memproxy adds ([{role, content}]), or NULL */
    const char *user_id;
    json_t *user_info;  /* what else is known about the user (an object: the session's labels
                           and metadata), or NULL */
    struct jmemo *memo; /* the worker's memo of messages, or NULL */
    /* what the pipeline did, for X-Memproxy-Context */
    size_t trimmed;     /* messages trim left out */
    size_t injected;    /* messages inject_memory added */
    size_t dropped;     /* messages drop_sources left out */
    size_t tokens;      /* the tokens of the messages trim kept and inject_memory added; 0 when
                           trim did not count (not in the profile, or no budget) */
    size_t exact_bytes; /* of text the tokenizer counted (TX_EXACT_BUDGET) */
};

/* user_context's line: the head, then "key: value" items ("id" first) while the line stays
 * within TX_USER_CONTEXT_MAX bytes; an item that would pass it ends the line with
 * TX_USER_CONTEXT_MORE. Labels and metadata are set over REST and may be large: the model
 * gets a line, not a document, and building it stays one pass. */
#define TX_USER_CONTEXT_HEAD "What is known about the user: "
#define TX_USER_CONTEXT_MAX  2048
#define TX_USER_CONTEXT_MORE "; (more left out)"

typedef void (*tx_fn)(struct tx_ctx *ctx, json_t *messages);

void tx_standard(struct tx_ctx *ctx, json_t *messages);
void tx_interruptions(struct tx_ctx *ctx, json_t *messages);
void tx_timestamps(struct tx_ctx *ctx, json_t *messages);
void tx_user_context(struct tx_ctx *ctx, json_t *messages);
void tx_drop_sources(struct tx_ctx *ctx, json_t *messages);
void tx_merge_consecutive(struct tx_ctx *ctx, json_t *messages);
void tx_trim(struct tx_ctx *ctx, json_t *messages);
void tx_inject_memory(struct tx_ctx *ctx, json_t *messages);

/* The transform with this name, or NULL. */
tx_fn tx_find(const char *name);

/* Every profile names known transforms: 0, or -1 with *err naming profile and transform. */
int tx_check_profiles(const struct cfg *cfg, char **err);

/* Run the profile's transforms over messages, in order. */
void tx_run(struct tx_ctx *ctx, json_t *messages);

/* The tokens of one message / of an array, by tokenizer tk (NULL: characters / 4). */
size_t tx_tokens(const struct tiktoken *tk, json_t *message);
size_t tx_tokens_all(const struct tiktoken *tk, json_t *messages);

#endif
