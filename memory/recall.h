/*
 * recall: tri-hybrid retrieval over a caller's earlier turns (docs/design.md §10). Pure: no I/O.
 *
 * A lookup starts from candidates the store reads (the caller's latest turns, newest first,
 * each with its embedding when one was made) and picks three legs, merged by message:
 *   recency    the newest `recent` candidates that are not in the request already;
 *   salience   candidates whose importance is at least `importance` (the newest
 *              RECALL_MAX_SALIENT);
 *   relevance  up to `relevant` candidates whose cosine similarity to the question's
 *              embedding is at least `similarity` (skipped when the question has none: the
 *              upstream's embedding did not come within the time budget).
 * The chosen turns become one system message, oldest first, within a token budget; when they
 * do not all fit, relevance goes first, then salience, then recency (newest first).
 *
 * Embeddings travel as OpenAI's /v1/embeddings shapes and are stored as float32 BLOBs in the
 * machine's byte order (memproxy reads back only what it wrote).
 *
 * Ownership: a pick copies what it keeps; recall_pick_message() returns new JSON.
 */
#ifndef MEMPROXY_RECALL_H
#define MEMPROXY_RECALL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct tiktoken;

#define RECALL_MAX_DIM     4096 /* floats per embedding accepted from an upstream */
#define RECALL_MAX_INPUTS  128  /* texts per embeddings request */
#define RECALL_MAX_TEXT    8000 /* bytes of one text sent to be embedded (cut at a character) */
#define RECALL_MAX_SALIENT 64   /* salient turns kept from one pass (the newest) */

/* The /v1/embeddings request for texts (each cut to RECALL_MAX_TEXT). New JSON. */
json_t *recall_embed_request(const char *model, const char *const *texts, size_t n);

/*
 * Read an /v1/embeddings answer that must hold n vectors of one dimension ({data: [{index,
 * embedding}]}, the embedding an array of numbers or base64 float32). 0 with *vecs (n * *dim
 * floats, row i for input i; caller frees) or -1 with the reason in *err (caller frees).
 */
int recall_parse_embeddings(const char *body, size_t len, size_t n, float **vecs, size_t *dim,
                            char **err);

/* Cosine similarity; 0 when either vector is zero. */
double recall_cosine(const float *a, const float *b, size_t dim);

/* The text of the last message of messages when it is a user's (text parts joined), or NULL.
 * New. */
char *recall_query_text(json_t *messages);

struct recall_opts {
    size_t recent;                    /* recency leg: this many newest candidates */
    double importance;                /* salience leg: importance at least this */
    double similarity;                /* relevance leg: cosine at least this */
    size_t relevant;                  /* relevance leg: at most this many, the most similar */
    size_t budget_tokens;             /* the message's size: counted by tokenizer, or else about 4
                                         characters a token */
    const struct tiktoken *tokenizer; /* borrowed, or NULL */
};

/*
 * One lookup's choice, made in one pass: candidates are offered newest first and only those a
 * leg wants are kept (at most recent + relevant + RECALL_MAX_SALIENT turns, whatever the
 * number offered), so a lookup's memory does not grow with the scan.
 */
struct recall_pick;

/* window: the messages the request sends already (a candidate whose text equals one of theirs
 * is skipped); query: the question's embedding (dim floats), or NULL. Both are borrowed until
 * recall_pick_free(). */
struct recall_pick *recall_pick_new(const struct recall_opts *o, const float *query, size_t dim,
                                    json_t *window);
/* Offer a candidate; vec/vec_bytes: its float32 embedding, or NULL. Strings are copied when
 * kept. */
void recall_pick_offer(struct recall_pick *p, int64_t sid, int64_t seq, const char *role,
                       const char *content, int64_t ts_ms, double importance, const void *vec,
                       size_t vec_bytes);

struct recall_stats {
    size_t recent, salient, relevant; /* chosen per leg (one turn may count in several) */
    size_t injected;                  /* turns in the message */
    int embedded;                     /* some candidate had an embedding to compare */
};

/* The system message of the chosen turns, or NULL when none is (or none fits). st may be
 * NULL. */
json_t *recall_pick_message(struct recall_pick *p, struct recall_stats *st);
void recall_pick_free(struct recall_pick *p);

#endif
