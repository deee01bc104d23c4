/*
 * pgsql_read: the PostgreSQL backend's readers. Each worker has a connection of its own; the
 * writer has one on its write connection, for what it reads inside its transaction (a stop's
 * dump). The functions are the reads of store_backend.h in the shapes store.h describes,
 * the same JSON as SQLite's.
 *
 * Queues (webhook deliveries, summaries, embeddings): reading what is due also takes it:
 * the rows are locked with SKIP LOCKED (two replicas never take one item), marked with this
 * replica's owner name, and their next try moved out by storage.lease, so another replica
 * takes an item over only when its owner has not reported by then (it died). A replica that
 * stops hands back what it holds (pgsql.c), so a restart does not wait for the lease.
 *
 * A read the server did not answer returns what "nothing there" returns and sets the
 * reader's failed flag (store_reader_failed()), so that the REST API answers 503 rather than
 * 404.
 */
#ifndef MEMPROXY_PGSQL_READ_H
#define MEMPROXY_PGSQL_READ_H

#include "memory/pgsql_schema.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct recall_pick;
struct pgsql_reader;

/* A reader on a connection of its own to st's database, made by its first read
 * (pgsql_conn_lazy), or (own 0) on st's, borrowed. st outlives it. */
struct pgsql_reader *pgsql_read_open(const struct pgsql_db *st, int own, char **err);
void pgsql_read_close(struct pgsql_reader *r);
struct store_reader *pgsql_read_base(struct pgsql_reader *r);

/* What the reads below make of their statements' rows, for the same statements run
 * elsewhere (pgsql_async.h): PG_R_SESSION's (NULL when none), PG_R_TURNS' (an array), and
 * PG_R_SUMMARY's with PG_R_FACTS' ({summary, facts}); results may be NULL (failed). */
json_t *pgsql_read_session_of_result(const PGresult *res);
json_t *pgsql_read_turns_of_result(const PGresult *res);
json_t *pgsql_read_memory_of_results(const PGresult *summary, const PGresult *facts);

json_t *pgsql_read_turns(struct store_reader *base, const char *tenant, const char *session_id,
                         int64_t min_turn, size_t limit);
json_t *pgsql_read_turns_of(struct store_reader *base, const char *tenant, const char *session_id,
                            const int64_t *turn_ids, size_t n, size_t limit);
int64_t pgsql_read_version(struct store_reader *base, const char *tenant, const char *session_id);
json_t *pgsql_read_session_get(struct store_reader *base, const char *tenant,
                               const char *session_id);
json_t *pgsql_read_user_memory(struct store_reader *base, const char *tenant, const char *user_id,
                               size_t max_facts);
json_t *pgsql_read_sessions(struct store_reader *base, const char *tenant, const char *user_id,
                            const char *status, int64_t before, size_t limit);
json_t *pgsql_read_deliveries(struct store_reader *base, const struct store_delivery_query *q);
json_t *pgsql_read_outbox_due(struct store_reader *base, int64_t now_ms, size_t limit);
int64_t pgsql_read_outbox_next(struct store_reader *base);
json_t *pgsql_read_idle_sessions(struct store_reader *base, int64_t before_ms, size_t limit);
json_t *pgsql_read_to_summarize(struct store_reader *base, int64_t now_ms, size_t limit);
int64_t pgsql_read_summary_next(struct store_reader *base);
json_t *pgsql_read_running_to_summarize(struct store_reader *base, const char *profile,
                                        long threshold, size_t limit);
json_t *pgsql_read_cache_get(struct store_reader *base, const char *key, int64_t now_ms);
json_t *pgsql_read_to_embed(struct store_reader *base, int64_t now_ms, size_t limit);
int64_t pgsql_read_embed_next(struct store_reader *base);
int pgsql_read_recall_embedded(struct store_reader *base, const char *tenant, const char *user_id,
                               const char *session_id);
void pgsql_read_recall(struct store_reader *base, const char *tenant, const char *user_id,
                       const char *session_id, size_t limit, struct recall_pick *p);

#endif
