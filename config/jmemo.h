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
 * Bounds: at most max_bytes in all, each entry counted as its text, its tree (estimated as
 * JMEMO_TREE_FACTOR times the text) and its bookkeeping; a text over max_bytes / 16 is not
 * kept. When full, the oldest entry goes first: a window's message is used for as many
 * requests as it stays in the window, and then not again.
 *
 * Not thread-safe: each worker owns one (nothing to lock on the request path). The trees
 * may be referenced from other threads (jansson's reference counts are atomic).
 *
 * Ownership: jmemo_create()/jmemo_destroy(); jmemo_get() returns a borrowed tree; jmemo_put()
 * takes a reference of its own.
 */
#ifndef MEMPROXY_JMEMO_H
#define MEMPROXY_JMEMO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define JMEMO_TREE_FACTOR 4

struct jmemo;

struct jmemo_stats {
    uint64_t hits, misses, evictions;
    size_t entries, bytes;
};

/* max_bytes 0: NULL (no memo; jtext reads everything). */
struct jmemo *jmemo_create(size_t max_bytes);
void jmemo_destroy(struct jmemo *m);

/* The tree kept for exactly these bytes, seed and flags, or NULL. Borrowed. */
json_t *jmemo_get(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len);
/* Keep v (a new reference) as the tree of these bytes, seed and flags; nothing when it is too
 * large. The caller has checked that v is what jtext reads from text under flags. */
void jmemo_put(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len,
               json_t *v);

void jmemo_stats(const struct jmemo *m, struct jmemo_stats *out);

#endif
