/*
 * memory_types: the structs behind memory.h's handles, for memory.c, memory_reads.c,
 * memory_changes.c and prepare.c only (parts of one module: prepare.c makes a recorded
 * request's session entry current before it is used; memory_reads.c passes readers' questions
 * to the store; memory_changes.c queues the writes that are not a request's). Nothing outside
 * memory/ includes this.
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
/* A turn-id window that reaches back past the working set is matched against the stored
 * turns of its own turn ids, read from the database (at most this many). It used to read
 * every stored turn from the window's oldest id on: a client whose turn ids went back (an
 * agent restarted under the same session id) had every request read its whole session on
 * the worker's loop, ~22 ms for 2,000 turns. With a shared store they are read off the loop
 * (memory_rec_prepare). */
#define MEMORY_MAX_READ 100000

struct jmemo;

struct memory {
    struct store *st;
    struct workset *ws;
    size_t session_turns;    /* read when a session is loaded (the working set keeps as many) */
    int64_t replica_wait_us; /* memory_opts.replica_wait_ms */
    atomic_uint_fast64_t reach_back; /* turns read by memory_stored_for (memory_stats) */
};

struct memory_reader {
    struct memory *m;
    struct store_reader *sr;
    struct store_async *as;  /* a shared store's reads from this reader's loop, or NULL */
    struct readpool *pool;   /* with as: where the reads without a channel of their own go */
    struct event_base *base; /* with as: the loop they answer on */
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
    int64_t reply_turn;   /* the turn its reply is of, fixed when the request was recorded (a
                             later request of the session may be recorded before the reply) */
    int64_t asked_turn;   /* a window's: the turn of its question, as reconciled, or -1 */
    int append;           /* stored history mode: the messages are new, not a window */
    int embed;            /* retrieval: its turns wait for their embedding */
    int track_window;     /* summary_threshold: the window's span is written (callsum.h) */
    int64_t window_turns; /* stored mode: the span memory_rec_window() was told, or -1 */
    int reload;           /* the entry must be read again before use */
    int heard_unplaced;   /* stored mode on replicas: the entry still lacked the turn a heard
                             part of no turn id speaks of when memory_prep_behind gave up
                             waiting for it; the heard part is then not recorded */
    int prepared;         /* memory_rec_prepare() made the entry current: no read in place */
    int reached;          /* memory_rec_prepare() read what a turn-id window reaches back to */
    json_t *reach;        /* ... those turns (memory_stored_for takes them), or NULL */
    json_t *heard;        /* stored mode: the updates of replies the request says were cut short, as
                             memory_rec_context found them (the client's copies may then leave the
                             request, upbody.c), or NULL */
    /* the question's embedding, made for its recall (memory_rec_question), until a batch
     * takes it */
    char *q_model, *q_text;
    float *q_vec;
    size_t q_dim;
};

/* The session's entry, referenced until memory_rec_free (memory.c). */
struct workset_entry *memory_rec_entry(struct memory_rec *rec);

/* A submitted batch's report: the entry it is in flight for (a request's or reply's write),
 * or the key of a session to read again (a REST change), and who waits for it. The working
 * set learns of it on the writer thread (memory_settled), then the caller, if any, on its
 * base's thread. */
struct memory_report {
    struct memory *m;
    struct workset_entry *e;
    struct store_batch *b; /* its batch, until the writer reports it (its version) */
    char *key;
    char *tenant; /* every session of this tenant is read again (a user's data changed) */
    struct event_base *base;
    memory_done_cb cb;
    void *arg;
};

/* The working set's key of a session: tenant, 0x1f, id. Owned by the caller. */
char *memory_key(const char *tenant, const char *id);

/* Queue b; r reports it (r->cb on r->base's thread, which also frees b; without a cb the
 * writer frees b and memory_settled frees r). Takes both. */
void memory_send(struct memory *m, struct store_batch *b, struct memory_report *r);

#endif
