/*
 * jmemo: the trees of JSON texts read before, by their exact bytes, so that jtext gives back
 * the same tree instead of reading the text again.
 *
 * Why: a voice platform resends its whole window on every turn (Agora: the last max_history
 * items, 32 by default), so each request's messages are, byte for byte, the previous
 * request's plus one or two. Reading them again into jansson trees (an object, a hash table
 * and a string per field) and freeing them after was most of a window's cost in memproxy.
 *
 * What is kept: objects read at one depth (jtext_load_memo: the messages of a chat request,
 * and its tool definitions), under the bytes they were read from, the reader's flags and a
 * seed the caller picks (memproxy: its tenant's name, so one tenant's requests never find
 * another's messages, nor learn by timing that they were there). A tree is handed out as a
 * new reference to the kept one: callers must never change it, which memproxy's request path
 * promises anyway (transforms replace a message, they never change one; see tx.h).
 *
 * Bounds: at most max_bytes in all, each entry counted as its text, its tree (jsize.h's
 * estimate of the tree read; JMEMO_TREE_FACTOR times the text for a tree only held) and its
 * bookkeeping; an entry over max_bytes / 16 is not kept. When full, the oldest entry goes first: a
 * window's message is used for as many requests as it stays in the window, and then not again.
 *
 * What is known of a kept tree is kept with it, since it is the same for every request that
 * has the tree: its compact text once written (jtext_dump_memo: the upstream body is mostly
 * the client's messages again), one tree derived from it by a pure function (memproxy: its
 * OpenAI-only form, tx's standard) and that tree's text, and a note of 64 bits about each
 * (below), and one attachment of the caller's (below). Each goes with its entry, and counts
 * against the same budget. These are found by
 * the tree's address, which is safe because the memo holds a reference to every tree it
 * answers for: no other tree can have that address while the answer is kept.
 *
 * Not thread-safe: each worker owns one (nothing to lock on the request path). The trees
 * may be referenced from other threads (jansson's reference counts are atomic).
 *
 * Ownership: jmemo_create()/jmemo_destroy(); jmemo_get() and jmemo_derived() return borrowed
 * trees; jmemo_put(), jmemo_hold() and jmemo_set_derived() take references of their own.
 * jmemo_hold(), jmemo_find(), jmemo_stats() and jmemo_destroy() take m NULL as an empty memo;
 * jmemo_set_aux() takes ownership of what it is given.
 */
#ifndef MEMPROXY_JMEMO_H
#define MEMPROXY_JMEMO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define JMEMO_TREE_FACTOR 4

struct jmemo;
struct jmemo_tree; /* what the memo knows of one tree it holds */

struct jmemo_stats {
    uint64_t hits, misses, evictions;
    size_t entries, bytes;
};

/* max_bytes 0: NULL (no memo; jtext reads everything). */
struct jmemo *jmemo_create(size_t max_bytes);
void jmemo_destroy(struct jmemo *m);

/* A kept text's key: how a reader names the text it found or put between two calls. Not a
 * pointer, so an evicted entry leaves no dangling one: its key then finds nothing. len 0: no
 * text. */
struct jmemo_key {
    uint64_t hash;
    size_t len;
};

/* The tree kept for exactly these bytes, seed and flags, or NULL. Borrowed. Its key in *key
 * when found (key may be NULL). */
json_t *jmemo_get(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len,
                  struct jmemo_key *key);
/* Keep v (a new reference) as the tree of these bytes, seed and flags, nested nest deep (as
 * jtext counts: the object itself is 1); nothing when it is too large. The caller has checked
 * that v is what jtext reads from text under flags. *key: the kept text's key, len 0 when it
 * was not kept. */
void jmemo_put(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len,
               json_t *v, size_t nest, struct jmemo_key *key);

/*
 * Successors. A window comes back as the same messages in the same order, so what followed a
 * message last time is what most likely follows it now. jmemo_next() tries that first: when
 * the bytes at text start with the text kept as prev's successor (for the same seed and
 * flags), that is the object there, since the reader reads an object's bytes only up to its
 * closing bracket. One comparison of the bytes, against finding where the object ends
 * (jtext's scan) and hashing it, for each message of a resent window.
 *
 * jmemo_next(): the successor's tree (borrowed) and its key in *key, or NULL when prev has
 * none kept, the bytes (avail of them) do not start with it, or it is nested deeper than
 * max_nest (the reader's caps where text starts: it must then be read, and refused).
 * jmemo_set_next(): next is what followed prev this time. Both do nothing for a stale key.
 */
json_t *jmemo_next(struct jmemo *m, const struct jmemo_key *prev, uint64_t seed, size_t flags,
                   const char *text, size_t avail, size_t max_nest, struct jmemo_key *key);
void jmemo_set_next(struct jmemo *m, const struct jmemo_key *prev, uint64_t seed, size_t flags,
                    const struct jmemo_key *next);

/* Hold v (a new reference) by its address only, never found by its text: for long-lived
 * trees that were not read by jtext (memproxy: the working set's stored turns, sent as
 * history), so that what is learned of them is kept like a kept tree's. v must never change.
 * size is the caller's estimate of v's compact text, counted (as a kept text and its tree
 * are) until the text is known; over the largest text kept, v is not held. Nothing when the
 * memo holds v already. */
void jmemo_hold(struct jmemo *m, json_t *v, size_t size);

/* What the memo knows of tree v (a kept tree or one derived from it), or NULL when v is not
 * the memo's. Good until the next jmemo_put(), jmemo_hold() or jmemo_set_*() on m (they may
 * evict). The
 * functions below take t NULL as a tree nothing is known of. */
struct jmemo_tree *jmemo_find(struct jmemo *m, const json_t *v);

/* t's derived tree (borrowed), when t is a kept tree and one was set; else NULL. */
json_t *jmemo_derived(const struct jmemo_tree *t);
/* Keep d (a new reference) as what the caller's pure function makes of kept tree t; d must
 * be a new tree, and nothing ever changes it. Nothing when t is derived or has one. */
void jmemo_set_derived(struct jmemo *m, struct jmemo_tree *t, json_t *d);

/* t's compact text (jtext_dump's; borrowed, good as t is), or NULL when not known. */
const char *jmemo_text(const struct jmemo_tree *t, size_t *len);
/* Keep text as t's compact text; nothing when it is known already or longer than the
 * largest text kept. */
void jmemo_set_text(struct jmemo *m, struct jmemo_tree *t, const char *text, size_t len);

/* t's note (zero at first), or NULL. Facts about the tree itself only, never about a
 * request, so that any request that has the tree may trust them. Whose bits are whose: */
#define JMEMO_NOTE_CHECKED  ((uint64_t)1) /* chatreq: a valid chat message */
#define JMEMO_NOTE_TX_SHIFT 1             /* tx: its facts of a message (tx.c), bits 1-63 */
uint64_t *jmemo_note(struct jmemo_tree *t);

/* t's attachment (borrowed), or NULL: what one caller read of the tree, in its own form, kept
 * with it like its note and for the same reason (memproxy: reconciliation's reading of a
 * window message, memory/reconcile.c). Good until the next call that may evict (above). */
void *jmemo_aux(const struct jmemo_tree *t);
/* Attach aux to t (costing cost bytes); aux_free(aux) when t's entry goes. When t is NULL or
 * has an attachment already, aux_free(aux) at once. May evict t's entry itself: read aux
 * before, not after. */
void jmemo_set_aux(struct jmemo *m, struct jmemo_tree *t, void *aux, size_t cost,
                   void (*aux_free)(void *));

void jmemo_stats(const struct jmemo *m, struct jmemo_stats *out);

#endif
