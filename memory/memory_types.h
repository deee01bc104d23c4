/*
 * memory_types: the structs behind memory.h's handles, for memory.c and prepare.c only (two
 * halves of one module: prepare.c makes a recorded request's session entry current before
 * it is used). Nothing outside memory/ includes this.
 */
#ifndef MEMPROXY_MEMORY_TYPES_H
#define MEMPROXY_MEMORY_TYPES_H

#include "memory/store.h"
#include "memory/workset.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Facts about a user considered for injection (the most confident first). */
#define MEMORY_MAX_FACTS 50

struct jmemo;

struct memory {
    struct store *st;
    struct workset *ws;
    size_t session_turns; /* read when a session is loaded (the working set keeps as many) */
    atomic_uint_fast64_t reach_back; /* turns read by memory_stored_for (memory_stats) */
};

struct memory_reader {
    struct memory *m;
    struct store_reader *sr;
    struct store_async *as; /* a shared store's reads from this reader's loop, or NULL */
};

struct memory_rec {
    struct memory_reader *rd;
    char *tenant, *sid, *user, *profile;
    json_t *messages;
    struct jmemo *memo; /* the worker's, or NULL */
    int64_t turn_id;
    struct workset_entry *e; /* referenced once the request is recorded */
    int requested, replied;
    int retry;            /* the window brought nothing new after a recorded reply: a retry, whose
                             reply replaces that one */
    int append;           /* stored history mode: the messages are new, not a window */
    int embed;            /* retrieval: its turns wait for their embedding */
    int track_window;     /* summary_threshold: the window's span is written (callsum.h) */
    int64_t window_turns; /* stored mode: the span memory_rec_window() was told, or -1 */
    int reload;           /* the entry must be read again before use */
    int prepared;         /* memory_rec_prepare() made the entry current: no read in place */
    /* the question's embedding, made for its recall (memory_rec_question), until a batch
     * takes it */
    char *q_model, *q_text;
    float *q_vec;
    size_t q_dim;
};

/* The session's entry, referenced until memory_rec_free (memory.c). */
struct workset_entry *memory_rec_entry(struct memory_rec *rec);

#endif
