/*
 * lifecycle: how a session stops (docs/design.md §9). Every stop — the REST call, an Agora
 * notification, the idle timeout — goes through lifecycle_stop(), which asks the store to mark
 * the session STOPPED and, in the same transaction, to queue one dump per webhook that takes
 * the session's tenant; once committed the webhook deliverer is woken. When the session's
 * profile summarizes, the session is left waiting for its summary (proxy/summarizer.h), the
 * summarizer is woken too, and the dumps wait for the summary up to summary_wait.
 *
 * The idle sweeper runs on the jobs loop (server.c) when sessions.idle_timeout is set: every
 * lifecycle_touch_ms() it stops the RUNNING sessions whose last update is older than the
 * timeout plus that lag. A session's updated time is refreshed by the store at most every
 * lifecycle_touch_ms(), so a session is stopped between idle_timeout and 1.25 x idle_timeout
 * (plus one sweep) after its last request, and never while it is in use: the stop itself
 * re-checks the updated time inside its transaction.
 */
#ifndef MEMPROXY_LIFECYCLE_H
#define MEMPROXY_LIFECYCLE_H

#include "config/cfg.h"
#include "memory/memory.h"

#include <stdint.h>

struct worker;
struct lifecycle;

/* Stop tenant's session id, of the named profile (the caller has read the session);
 * idle_before > 0 stops it only when not updated since then. cb(arg, ok) on w's thread once
 * committed (ok 0: no such session). cb may be NULL. */
void lifecycle_stop(struct worker *w, const char *tenant, const char *id, const char *profile,
                    int64_t idle_before, memory_done_cb cb, void *arg);

/* How stale a session's updated time may be (memory_opts.touch_ms): a quarter of the idle
 * timeout, at most a minute. */
int64_t lifecycle_touch_ms(const struct cfg *cfg);

/* The idle sweeper on w (NULL when sessions.idle_timeout is 0). */
struct lifecycle *lifecycle_create(struct worker *w);
void lifecycle_destroy(struct lifecycle *lc);

#endif
