/*
 * reply: accumulates what the model said, from the stream's chunks or a whole response body.
 *
 * For each chat.completion.chunk the relay passes on, reply_add_chunk() collects the content
 * text (an audio reply's transcript included), the tool calls (merged by index, arguments
 * concatenated), a refusal, a reasoning model's thinking, the older functions API's
 * function_call (its pieces joined), an audio reply's id, the finish reason, the model and the
 * usage. It also classifies the chunk, so the proxy can hold back the usage-only chunk a client
 * did not ask for. reply_set_body() does the same for a non-streaming response.
 *
 * Caps: content, the refusal, the reasoning and each tool call's arguments stop growing at
 * REPLY_MAX_TEXT bytes (reply_truncated() then says so); the stream itself is still forwarded
 * whole.
 *
 * Ownership: the reply owns everything it returns; pointers stay valid until the next add or
 * reply_destroy(). Getters see queued chunks only after reply_flush().
 */
#ifndef MEMPROXY_REPLY_H
#define MEMPROXY_REPLY_H

#include <jansson.h>
#include <stddef.h>

#define REPLY_MAX_TEXT (1024 * 1024)

enum reply_chunk {
    REPLY_CHUNK,      /* an ordinary chunk */
    REPLY_USAGE_ONLY, /* choices empty, usage set: the include_usage chunk */
    REPLY_ERROR,      /* {"error": ...} inside the stream */
    REPLY_INVALID,    /* not a JSON object */
};

struct reply;

struct reply *reply_create(void);
void reply_destroy(struct reply *r);

enum reply_chunk reply_add_chunk(struct reply *r, const char *data, size_t len);
/* The same through a full parse of the chunk: reply_add_chunk() takes the common chunk's
 * shape without building a tree (proxy/chunkscan.h) and falls back to this; the fuzz target
 * holds the two to the same result. */
enum reply_chunk reply_add_chunk_tree(struct reply *r, const char *data, size_t len);

/*
 * The streaming path's split: reply_is_usage_only() decides from the raw bytes (cheaply;
 * a parse confirms only what looks like one) whether a chunk is the usage-only chunk, and
 * reply_queue_chunk() keeps the chunk for reply_flush() to parse later, once its bytes are on
 * their way to the client. At most REPLY_MAX_QUEUE bytes wait; past that the queue is parsed
 * at once.
 */
#define REPLY_MAX_QUEUE (256 * 1024)
int reply_is_usage_only(const char *data, size_t len);
void reply_queue_chunk(struct reply *r, const char *data, size_t len);
void reply_flush(struct reply *r);
/* A whole chat.completion body; 0, or -1 when it is not a JSON object. The common body's shape
 * is read without a tree (chunkscan_message); reply_set_body_tree() is the full parse, held
 * to the same result by the fuzz target. */
int reply_set_body(struct reply *r, const char *body, size_t len);
int reply_set_body_tree(struct reply *r, const char *body, size_t len);

/* A whole body that is an event stream, though the request asked for none (a server that
 * ignores "stream": false): its events' data taken as streamed chunks, so the reply is
 * recorded as the client got it. 0, or -1 when body is no event stream or an event passes
 * REPLY_MAX_EVENT (what was read before it stays). */
#define REPLY_MAX_EVENT (1024 * 1024)
int reply_set_events(struct reply *r, const char *body, size_t len);

const char *reply_content(const struct reply *r, size_t *len);
/* Whether the reply has said anything yet: text (an audio reply's transcript included), a
 * refusal, a tool call or a function call. A reasoning model's thinking is not that. */
int reply_said(const struct reply *r);
/* The refusal the model gave instead of content (OpenAI's structured outputs: message.refusal,
 * delta.refusal), "" when none; capped as content is. A voice platform speaks content only. */
const char *reply_refusal(const struct reply *r, size_t *len);
/* A reasoning model's thinking (delta.reasoning_content or delta.reasoning, as DeepSeek, vLLM,
 * Groq and OpenRouter stream it; Mistral's "thinking" content parts), "" when none; capped as
 * content is. Never spoken: a voice platform speaks content only. */
const char *reply_reasoning(const struct reply *r, size_t *len);
const char *reply_finish_reason(const struct reply *r); /* NULL until one arrives */
const char *reply_model(const struct reply *r);         /* NULL until one arrives */
/* borrowed; NULL when absent. Never changed once returned (a later usage replaces it whole),
 * so a caller may keep a reference past the reply's life. */
json_t *reply_usage(const struct reply *r);
/* Borrowed array; NULL when none. Not const: the deltas' names and arguments are written
 * into it here. */
json_t *reply_tool_calls(struct reply *r);
/* OpenAI's older functions API: the reply's function_call {name, arguments}, its streamed
 * pieces joined; NULL when none. Borrowed, until the next call or reply_destroy(). */
json_t *reply_function_call(struct reply *r);
/* An audio reply (gpt-4o-audio's modalities: message.audio, delta.audio): {id, expires_at}
 * (expires_at when given), NULL when none. Its transcript is taken as the content: what the
 * caller heard. Borrowed, until the next call or reply_destroy(). */
json_t *reply_audio(struct reply *r);
size_t reply_chunks(const struct reply *r); /* content-bearing chunks seen */
int reply_truncated(const struct reply *r);

/*
 * An answer memproxy gives itself (a cache hit), in the shape the upstream would have used: a
 * chat.completion body, or with stream the SSE text of a role+content chunk, a finish chunk,
 * a usage chunk when include_usage, and [DONE]. id names it (e.g. "chatcmpl-cache-…").
 * Caller frees; *len gets the length.
 */
char *reply_synthesize(const char *id, const char *content, const char *model, int stream,
                       int include_usage, size_t *len);

#endif
