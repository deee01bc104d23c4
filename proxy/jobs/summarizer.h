/*
 * summarizer: long-term memory made at stop (docs/design.md §10), off the hot path.
 *
 * Runs on the jobs loop (server.c) when a profile has summarize: true. Its timer (and a wake after
 * every stop) reads the stopped sessions still waiting for their summary, asks the session's
 * profile's primary upstream — through that worker's curl multi handle, so no request ever
 * waits for it — with memory/summary.h's request, and stores what comes back: the user's
 * summary (folded: it replaces the earlier one, its range widened), their facts (reinforced
 * when seen again, the others decaying) and the summary into the session's waiting webhook
 * dumps, which then go out. An upstream failure or an answer that is not the JSON asked for
 * stores nothing (it is logged) and lets the dumps go without a summary. After an upstream
 * failure (no answer, or not 2xx) a stopped session waits again — summary_retry later,
 * doubled per try, SUMMARIZER_MAX_TRIES tries in all; a model's malformed answer is final,
 * as is a running session's pass (the next threshold makes another). A session of a profile
 * without summarize, or without a user id, is only marked done.
 *
 * The queue is the database (sessions.summarized_ms), so a summary interrupted by a restart
 * is made after it.
 */
#ifndef MEMPROXY_SUMMARIZER_H
#define MEMPROXY_SUMMARIZER_H

struct summarizer;
struct worker;
struct cfg;

/* NULL when no profile summarizes. */
struct summarizer *summarizer_create(struct worker *w);
void summarizer_destroy(struct summarizer *s);
/* Look for work now. Thread-safe; s may be NULL. */
void summarizer_wake(struct summarizer *s);

#endif
