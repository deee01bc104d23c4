/*
 * entry: a working-set entry (workset.h) filled from what the store holds of its session: the
 * recent turns, the row's fields the requests use (user, profile, system messages, the
 * window's fingerprint and span, the call's own summary, runtime params) and the system
 * messages inject_memory adds (inject.h). Read in place (entry_read: SQLite, where a read is
 * a page-cache lookup) or from what an asynchronous read brought (entry_fill: PostgreSQL,
 * memory.c's memory_rec_prepare). e->mu is held by the caller throughout.
 */
#ifndef MEMPROXY_ENTRY_H
#define MEMPROXY_ENTRY_H

#include "memory/store.h"
#include "memory/workset.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Fill e from l (its turns and row; user: whose memory l holds, NULL: the session's).
 * session_turns: how many turns were asked for (fewer means e holds the whole session). */
void entry_fill(struct workset_entry *e, struct workset *ws, const struct store_loaded *l,
                size_t session_turns);
/* Read e's session through sr and fill e: its version first (a shared store), so that a
 * write after the read shows as a newer version. */
void entry_read(struct workset_entry *e, struct store *st, struct workset *ws,
                struct store_reader *sr, const char *tenant, const char *sid, const char *user,
                size_t session_turns, size_t max_facts);
/* A client's system messages [{role, content}] (NULL: none), hashed so that an unchanged
 * list is not written again: their roles and texts in order. */
uint64_t entry_system_hash(json_t *system);

#endif
