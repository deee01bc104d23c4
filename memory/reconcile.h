/*
 * reconcile: match the window of messages a voice platform (or any client) sends against the
 * turns already stored for the session, and say what to write. Pure: no SQLite, no HTTP.
 *
 * The platform resends a window of the conversation on every request (Agora: the last
 * max_history items). The rules (docs/design.md §6):
 *   - replaying a request writes nothing; a window that slid forward deletes nothing;
 *   - with turn ids (Agora custom mode) a message is (turn_id, role, its index among that
 *     turn's messages of that role); the oldest turn of a window may be cut, so its messages
 *     are matched by content instead;
 *   - without turn ids the window is aligned against the stored tail by role and content
 *     (where the end of what is stored appears in the window, what follows is new), and each
 *     new user message opens a new turn. This needs the window to carry context, as voice
 *     platforms' windows do; a client that sends only its new messages is the stored
 *     history mode's case and must not be reconciled;
 *   - an assistant reply that comes back shortened (metadata.interrupted, or its text a strict
 *     prefix of what was recorded) updates its row: content = what was heard, original = what
 *     was generated, the interruption time kept;
 *   - system messages are not turns: the latest list is returned for the session.
 *
 * A message in stored shape ("turn") is a JSON object:
 *   role, content (text), turn_id (integer), turn_idx (index among the turn's messages of
 *   that role), source (string|null), interrupted (bool), interrupt_timestamp (ms|null),
 *   original (string|null), metadata (object), timestamp (ms), importance (real), and when
 *   present tool_calls, tool_call_id, name. Stored turns also carry seq.
 *
 * Ownership: every json_t returned is new (caller decrefs); inputs are only read.
 */
#ifndef MEMPROXY_RECONCILE_H
#define MEMPROXY_RECONCILE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* (Timestamps, turn ids and a content's text are read as base/msg.h reads them.) */

/*
 * One client message in stored shape: text content only (image and other non-text parts are
 * dropped and counted in metadata.dropped_parts), the voice fields lifted out of metadata,
 * timestamps in ms (now_ms when absent), importance by role. turn_id is -1 when absent and
 * turn_idx is not set. Returns NULL for a message that is not an object with a string role.
 */
json_t *reconcile_normalize(json_t *msg, int64_t now_ms);

struct reconcile_result {
    uint64_t window_hash; /* fingerprint of the window's turns; keep it for the next call */
    json_t *inserts;      /* new turns in order, with turn_id, turn_idx and seq assigned */
    json_t *updates;      /* [{seq, turn_id, turn_idx, role, content, original, interrupted,
                             interrupt_timestamp}]: the row by seq in this process, by
                             (turn_id, role, turn_idx) in a database other replicas number too */
    json_t *system;       /* the window's system messages [{role, content}], or NULL if none
                             (or the window is the last one again) */
    int64_t reply_turn;   /* the turn of the window's last user message, stored or new (the
                             turn its reply is of), or -1: none, or the window is the last one
                             again. On replicas a window may be recorded after the next one,
                             another replica's: its question is then not the newest stored. */
};

/*
 * A stored turn as matching reads it, its fields read once by reconcile_view_read(): a window is
 * matched against many stored turns, and looking their fields up for every comparison cost
 * more than the rest of the request. The working set keeps a view beside each of its turns
 * (turnlist.h), read when the turn is added, so a request reads none. The strings point into
 * t, which must outlive the view unchanged.
 */
struct reconcile_view {
    json_t *t;
    const char *role, *content;     /* "" when absent */
    const char *original;           /* NULL when not a string */
    int64_t turn_id, turn_idx, seq; /* -1 when absent */
    int interrupted;
    json_t *its;    /* interrupt_timestamp, or NULL */
    uint64_t chash; /* of content: most stored turns are told from a message without a strcmp */
};
void reconcile_view_read(struct reconcile_view *v, json_t *t);

/*
 * A client's window as matching reads it: each message's role, content as stored, turn id and
 * voice fields, and the window's fingerprint. With memo (the worker's, jmemo.h; NULL for
 * none) a message the memo holds is read once and its reading kept with it, for every later
 * request whose window has it again (on the memo's thread only). incoming must outlive the
 * window unchanged. reconcile_window_oldest(): the oldest turn id when every turn of the window
 * (its messages with a string role but system and developer) has one — turn-id mode, where
 * matching needs only the stored turns from that id on — else -1; reconcile_window_newest(): the
 * newest then, else -1. reconcile_window_turn_ids(): the window's distinct turn ids, ascending, in
 * a new array (free() it), *count of them.
 */
struct jmemo;
struct reconcile_window;
struct reconcile_window *reconcile_window_read(json_t *incoming, struct jmemo *memo);
int64_t reconcile_window_oldest(const struct reconcile_window *w);
int64_t reconcile_window_newest(const struct reconcile_window *w);
int64_t *reconcile_window_turn_ids(const struct reconcile_window *w, size_t *count);
void reconcile_window_free(struct reconcile_window *w);

/*
 * stored: the session's stored turns in seq order — in turn-id mode every stored turn whose
 * turn_id is at least the window's oldest (more are left out), otherwise the recent tail.
 * incoming: the messages as the client sent them. last_hash: the window_hash of the
 * session's previous request (0 if unknown); the same window again writes nothing, exactly,
 * even where content alone could not tell (a window that repeats a message word for word),
 * and out->system is then NULL. Always succeeds. reconcile_run_views() is the same over
 * views of the stored turns and the window read.
 */
void reconcile_run(json_t *stored, json_t *incoming, uint64_t last_hash, int64_t now_ms,
                   struct reconcile_result *out);
void reconcile_run_views(const struct reconcile_view *stored, size_t nstored,
                         const struct reconcile_window *window, uint64_t last_hash, int64_t now_ms,
                         struct reconcile_result *out);
void reconcile_result_clear(struct reconcile_result *r);

/*
 * Stored history mode, where no window is matched: is msg (a client's message) what was
 * heard of stored (a stored reply of its turn), a reply cut short — its text the start of the
 * reply's, or the same text flagged metadata.interrupted? Then the update a window bringing
 * it back would make (seq, content heard, original generated, interrupted, the first
 * interruption time; new), else NULL.
 */
json_t *reconcile_heard(json_t *stored, json_t *msg, int64_t now_ms);

/*
 * The turn to record for a reply memproxy streamed or received: source "llm", the given
 * turn id (the request's turn_id, or the last user message's) and its index, content as
 * generated. When interrupted (the client hung up), original is the same text and
 * interrupt_timestamp is now_ms.
 */
json_t *reconcile_reply_turn(const char *content, const char *source, int64_t turn_id,
                             int64_t turn_idx, int interrupted, int64_t now_ms);

#endif
