/*
 * msg: a chat message's shape, read the one way every floor reads it — the request path
 * (proxy/chat), reconciliation and recording (memory/), the transforms (transforms/).
 *
 * A message comes in the client's shape ({role, content, turn_id?, timestamp?, metadata:
 * {source?, interrupted?, interrupt_timestamp?, original?, ...}}) or in the stored shape of
 * memory/reconcile.h, where the voice fields sit at the top level. Both are read here:
 *   - timestamps: epoch seconds or milliseconds, numbers or numeric strings; values below
 *     MSG_MS_THRESHOLD are seconds (docs/design.md section 6);
 *   - turn ids: a non-negative integer or a numeric string;
 *   - text: a string content as is, an array's text parts joined by "\n";
 *   - system: "system" and "developer" are both the client's instructions, never turns;
 *   - voice fields: source, interrupted, interrupt_timestamp, original.
 *
 * Pure; JSON in, values out. Ownership: msg_text returns a new reference; the others borrow.
 */
#ifndef MEMPROXY_MSG_H
#define MEMPROXY_MSG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Epoch values below this are seconds, not milliseconds. */
#define MSG_MS_THRESHOLD 100000000000LL

/* Milliseconds from a client's timestamp (number or numeric string); -1 when unusable. */
int64_t msg_timestamp_ms(json_t *v);

/* A turn id from a number or a numeric string; -1 when absent or unusable. */
int64_t msg_turn_id(json_t *v);

/* A message content's text, as it is stored: a string as is; an array's text parts joined
 * by "\n", the other parts (images, audio) counted in *dropped; "" otherwise. New. */
json_t *msg_text(json_t *content, int *dropped);

/* m's role, "" when it has none. */
const char *msg_role(json_t *m);

/* Is a message of this role the client's instructions (system or developer)? NULL: no. */
int msg_role_is_system(const char *role);

/* Does m call tools (a non-empty tool_calls array, in either shape, or the function_call
 * object of OpenAI's older functions API, which a stored turn keeps in its metadata)? Such a
 * message says nothing, whatever its content. */
int msg_calls_tools(json_t *m);

/* The id of the audio reply m refers to, or NULL. An audio model's reply (gpt-4o-audio's
 * modalities) comes back from an OpenAI client as {role: assistant, audio: {id}} with no
 * text; a stored turn keeps that id in metadata.audio, as memproxy's record of the reply
 * itself does. Such a message is that reply whole, not an empty copy of it. Read in either
 * shape (msg_voice); only for an assistant message without text. */
const char *msg_audio_ref(json_t *m);
/* The id of m's audio, in either shape (a stored turn's metadata.audio, a message's audio),
 * whatever its text: memproxy's record of an audio reply has its transcript. NULL: none. */
const char *msg_audio_id(json_t *m);

/* The voice fields a platform puts in a message's metadata, in the order stored turns keep
 * them. */
extern const char *const msg_voice_fields[4];
#define MSG_VOICE_FIELDS 4

/* A voice field of m: in metadata (the client's shape) or at the top level (stored shape);
 * NULL when absent. */
json_t *msg_voice(json_t *m, const char *key);

/*
 * Remembered memory (a caller's summary and facts, their earlier turns) is the caller's own
 * words, put in front of the model in a later call. Injected as bare instructions, a caller
 * who said "ignore your instructions" once would instruct the model in every later call. So
 * it goes as quoted data: intro, a line saying it is data and not instructions, then the text
 * between MSG_MEMORY_OPEN and MSG_MEMORY_CLOSE (any "<<<" or ">>>" inside it broken up, so it
 * cannot close the quote early). A new string.
 */
#define MSG_MEMORY_OPEN  "<<<memory"
#define MSG_MEMORY_CLOSE "memory>>>"
char *msg_memory_quote(const char *intro, const char *data);
/* The key marking an injected message as remembered memory (not the operator's own system
 * messages): inject_memory gives such a message the profile's memory_role and drops the key. */
#define MSG_MEMORY_KEY "memproxy_memory"
json_t *msg_memory_message(const char *intro, const char *data);

#endif
