/*
 * callsum: a running call's own summary (profiles[].summary_threshold) and the window it
 * stands in for. Pure: turns and messages in, answers out; the working set calls it under
 * the session's lock.
 *
 * A voice platform sends a window of the call's newest messages; what falls out of it the
 * model never sees again. The summarizer (proxy/jobs/summarizer.h) summarizes exactly those
 * turns: the client's window spans window_turns stored turns (its messages but system ones),
 * so a pass covers the turns up to the one the next window will no longer hold (callsum_next_span),
 * folding them into the call's summary so far (sessions.call_summary, up to
 * sessions.summarized_seq). The summary goes to the model only while none of its turns is in the
 * request — a client that resends the whole conversation gets no summary of what it sent — and in
 * stored-history mode it takes the place of the turns it covers.
 *
 * Ownership: inputs are borrowed; callsum_message returns a new message.
 */
#ifndef MEMPROXY_CALLSUM_H
#define MEMPROXY_CALLSUM_H

#include "memory/turnlist.h"

#include <jansson.h>
#include <stdint.h>

#define CALLSUM_INTRO                                                                              \
    "Summary of this call so far: its earlier turns, which are no longer among these messages."

/* The turns a client's window spans: its messages but system and developer ones. */
int64_t callsum_window_turns(json_t *messages);

/* The span expected of the next window (sessions.window_turns) after one of span turns that
 * followed one of last turns; -1 when last is not known (0): one window says nothing of how
 * the next will look. A window that grew is expected to grow as much again — a client still
 * filling its window, or one that sends the whole conversation — so nothing it will still
 * hold is summarized; a window that slid at a constant span is expected to keep it. */
int64_t callsum_next_span(int64_t last, int64_t span);

/* Are the summary's last turn (seq through) and the one after it, as stored in turns, among
 * the client's messages, one after the other (by role and text: what was heard or what was
 * generated)? 0 when turns no longer hold the turn through. */
int callsum_in_messages(const struct turnlist *turns, int64_t through, json_t *messages);

/* Leave the turns up to seq through out of history (stored turns in seq order). */
void callsum_drop_covered(json_t *history, int64_t through);

/* The system message carrying the summary text, marked as remembered memory (base/msg.h). */
json_t *callsum_message(const char *text);

#endif
