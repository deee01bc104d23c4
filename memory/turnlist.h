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

/* The list becomes turns (a JSON array in seq order); the array itself is not kept. */
void turnlist_set(struct turnlist *l, json_t *turns);
void turnlist_append(struct turnlist *l, json_t *turn);
/* Turn i becomes t (i < size). */
void turnlist_replace(struct turnlist *l, size_t i, json_t *t);
/* Keep the newest keep turns: the oldest go first, without moving the rest. */
void turnlist_keep_last(struct turnlist *l, size_t keep);

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
/* How many turns of turn_id have this role: the turn_idx the next of them gets. */
int64_t turnlist_count(const struct turnlist *l, int64_t turn_id, const char *role);

/* A new array of every turn, in order. */
json_t *turnlist_array(const struct turnlist *l);
/* What a window is reconciled against (reconcile_run_views): turnlist_views(), the views of
 * every turn, in order, *n of them, where the list keeps them (borrowed: use them before the
 * list changes; NULL when it never held a turn); turnlist_views_from(), those of the turns
 * whose turn_id is at least oldest, in a new array (free() it; its turns are the list's). */
const struct reconcile_view *turnlist_views(const struct turnlist *l, size_t *n);
struct reconcile_view *turnlist_views_from(const struct turnlist *l, int64_t oldest, size_t *n);

#endif
