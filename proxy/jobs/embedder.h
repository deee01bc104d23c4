/*
 * embedder: the embeddings of stored turns, for retrieval (docs/design.md §10), made off the hot
 * path.
 *
 * Runs on the jobs loop (server.c) when a profile has retrieval: true. Turns are queued in the
 * database in the transaction that stores them (memory_rec_params.embed), so none is missed
 * across a crash. The embedder's task reads the due ones, asks their profile's primary
 * upstream for embeddings (POST /embeddings with retrieval_model, up to EMBEDDER_BATCH texts
 * of one profile per request, one request at a time, through the jobs loop's curl multi
 * handle: no voice request waits for it) and stores each as a float32 BLOB.
 *
 * An upstream that cannot be reached or answers non-2xx is tried again with backoff (1 s
 * doubling to 10 min, EMBEDDER_MAX_TRIES tries); an answer that is not the embeddings asked
 * for, or a turn whose profile no longer retrieves, is stored with its reason and leaves the
 * queue. Commits of retrieval profiles' replies wake the task; otherwise it looks when the next
 * retry is due, or every EMBEDDER_POLL_MS.
 */
#ifndef MEMPROXY_EMBEDDER_H
#define MEMPROXY_EMBEDDER_H

struct embedder;
struct worker;

/* NULL when no profile retrieves. */
struct embedder *embedder_create(struct worker *w);
void embedder_destroy(struct embedder *e);
/* Look for work now. Thread-safe; e may be NULL. */
void embedder_wake(struct embedder *e);

#endif
