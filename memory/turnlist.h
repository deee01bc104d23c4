/*
 * turnlist: a session's recent stored turns in seq order, each with what reconciliation reads
 * of it (struct reconcile_view: role, content, seq, turn id, ...) read once, when it is added, and
 * kept beside it in one array.
 *
 * Why: every recorded request asks the same things of its session's turns — which of them a
 * window of turn ids reaches back to (turn id at least the window's oldest), their fields to
 * match the window against, how many of a turn's messages of one role there are (the next
 * one's turn_idx), which one has a given seq (an interruption coming back). Asked of the turn
 * objects, each answer was a field lookup or a walk over a turn's fields per stored turn: in
 * a long call (memory.session_turns, 256 by default) hundreds a request, and with many
 * sessions they missed the caches — more than the rest of reconciling a window together.
 * Asked of this array, it is a scan of a few kilobytes, and a turn is read when it is made,
 * while it is still in the cache.
 *
 * The turns are JSON objects in reconcile.h's stored shape, and must not change once in the
 * list (turns are replaced, never changed: memory.h). Not thread-safe: the working-set
 * entry's lock covers its list.
 *
 * Ownership: turnlist_create() / turnlist_destroy(). The list holds a reference to each of
 * its turns; turnlist_get() and the views borrow them (valid while the list is unchanged);
 * the arrays returned are new.
 */
#ifndef MEMPROXY_TURNLIST_H
#define MEMPROXY_TURNLIST_H

#include "memory/reconcile.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct turnlist;

struct turnlist *turnlist_create(void);
void turnlist_destroy(struct turnlist *l);

/* The list becomes turns (a JSON array in seq order); the array itself is not kept. more:
 * the session has older turns than these (they were read up to a limit), so the first turn
 * may have begun before them. */
void turnlist_set(struct turnlist *l, json_t *turns, int more);
void turnlist_append(struct turnlist *l, json_t *turn);
/* Turn i becomes t (i < size). */
void turnlist_replace(struct turnlist *l, size_t i, json_t *t);
/* Keep the newest keep turns: the oldest go first, without moving the rest. */
void turnlist_keep_last(struct turnlist *l, size_t keep);
/* Whether the list holds every message of the turns from turn id oldest on, as far as it
 * knows: its first turn is older, or is that one and was not cut (by turnlist_keep_last, or
 * by the limit turnlist_set was told of). A turn of more messages than the list keeps loses
 * its oldest from the list, not from the database: what matches a window against it must
 * read them (memory.c, memory_stored_for). */
int turnlist_holds_from(const struct turnlist *l, int64_t oldest);

size_t turnlist_size(const struct turnlist *l);
/* About the heap the turns hold (base/jsize.h), kept as they come and go. */
size_t turnlist_bytes(const struct turnlist *l);
/* How many of the newest turns fit in max bytes: at least one (the newest always stays). */
size_t turnlist_keep_bytes(const struct turnlist *l, size_t max);
/* Turn i (borrowed), or NULL past the end. */
json_t *turnlist_get(const struct turnlist *l, size_t i);
/* Turn i's turn_id (-1 when it has none, or past the end). */
int64_t turnlist_turn_id(const struct turnlist *l, size_t i);
/* Whether turn i's role is role. */
int turnlist_role_is(const struct turnlist *l, size_t i, const char *role);
/* The position of the turn with this seq (the newest are looked at first), or -1. */
long turnlist_find_seq(const struct turnlist *l, int64_t seq);
/* The turn_idx the next message of turn_id with this role gets: one past the highest of those
 * l holds, 0 when it holds none. Not their count: l keeps only the newest turns, and a turn
 * with more messages than that loses its oldest from l, not from the database; an index
 * counted from l would be one the turn has stored already, and the store would drop the
 * insert as a repeat (tests/integration/test_recording.py LongTurns). */
int64_t turnlist_next_idx(const struct turnlist *l, int64_t turn_id, const char *role);

/* A new array of every turn, in order. */
json_t *turnlist_array(const struct turnlist *l);
/* What a window is reconciled against (reconcile_run_views): turnlist_views(), the views of
 * every turn, in order, *n of them, where the list keeps them (borrowed: use them before the
 * list changes; NULL when it never held a turn); turnlist_views_from(), those of the turns
 * whose turn_id is at least oldest, in a new array (free() it; its turns are the list's). */
const struct reconcile_view *turnlist_views(const struct turnlist *l, size_t *n);
struct reconcile_view *turnlist_views_from(const struct turnlist *l, int64_t oldest, size_t *n);

#endif
