/*
 * turnids: the platform's turn numbers where memory.c does not reconcile a window by them.
 *
 * Agora numbers each turn (a user message and the reply to it) and says which turn a request
 * is for with a top-level turn_id. In a window whose messages carry their own turn ids,
 * reconciliation identifies messages by them (docs/design.md §6). These are the other cases:
 * a window without turn ids from a client that still numbers its request, and stored history
 * mode (the client sends only its new messages), where the request's own numbers are kept and
 * a request sent again is recognized as a retry (its message is stored already under its
 * turn). Without numbers nothing can tell a retry from a caller saying the same words again,
 * so nothing here applies.
 *
 * Pure: JSON and a turnlist in, nothing stored. The turnlist is the session's (its entry's
 * lock held by the caller).
 */
#ifndef MEMPROXY_TURNIDS_H
#define MEMPROXY_TURNIDS_H

#include "memory/turnlist.h"

#include <jansson.h>
#include <stdint.h>

/* The position of the last message in messages whose role is "user", or -1. */
long turnids_last_user(json_t *messages);

/* Is t (a message in stored shape: reconcile_normalize) stored in l under turn: the same role
 * and text under that turn id? */
int turnids_stored(const struct turnlist *l, json_t *t, int64_t turn);

/* A window without turn ids whose request says its turn (turn >= 0): the newest user message
 * among inserts (reconciliation's new turns, in order) and those after it get that turn id,
 * and their turn_idx counted on from l's turns of it, as the reply gets it. */
void turnids_request_inserts(const struct turnlist *l, int64_t turn, json_t *inserts);

/* Stored mode: the turn messages (a request's) send again — their newest user message is
 * stored in l already under the turn it is numbered with (its own turn_id, else the request's
 * turn, < 0 for none) — or -1. */
int64_t turnids_resent(const struct turnlist *l, json_t *messages, int64_t turn);

/* The newest turn id in l older than turn, or -1. Stored mode: an assistant message without a
 * turn id, sent before the newest user message of a request sent again for turn
 * (turnids_resent), speaks of the reply before that turn, not of the one recorded for it. */
int64_t turnids_before(const struct turnlist *l, int64_t turn);

/* The position in l of the newest assistant message of turn, or -1. */
long turnids_reply(const struct turnlist *l, int64_t turn);

/* Whether the platform numbers the session's turns one by one, as far as l shows: its two
 * newest questions' turn ids are consecutive (with fewer than two, taken as so). Where it
 * skips numbers, "the turn before the request's" is no turn at all. */
int turnids_by_one(const struct turnlist *l);

#endif
