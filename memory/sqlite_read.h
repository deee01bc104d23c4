/*
 * sqlite_read: the SQLite backend's readers. Each worker opens its own read-only connection
 * (WAL lets readers run beside the writer); the writer has one of its own on the write
 * connection, for what it reads inside its transaction (a stop's dump). The functions are the
 * reads of store_backend.h, in the shapes store.h describes.
 */
#ifndef MEMPROXY_SQLITE_READ_H
#define MEMPROXY_SQLITE_READ_H

#include "memory/sqlite_schema.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct recall_pick;

struct sqlite_reader *sqlite_read_open(struct sqlite_db *st, char **err);
void sqlite_read_close(struct sqlite_reader *r);
json_t *sqlite_read_turns(struct store_reader *base, const char *tenant, const char *session_id,
                          int64_t min_turn, size_t limit);
json_t *sqlite_read_turns_of(struct store_reader *base, const char *tenant, const char *session_id,
                             const int64_t *turn_ids, size_t n, size_t limit);
json_t *sqlite_read_session_get(struct store_reader *base, const char *tenant,
                                const char *session_id);
json_t *sqlite_read_user_memory(struct store_reader *base, const char *tenant, const char *user_id,
                                size_t max_facts);
json_t *sqlite_read_sessions(struct store_reader *base, const char *tenant, const char *user_id,
                             const char *status, int64_t before, size_t limit);
json_t *sqlite_read_deliveries(struct store_reader *base, const struct store_delivery_query *q);
json_t *sqlite_read_outbox_due(struct store_reader *base, int64_t now_ms, size_t limit);
int64_t sqlite_read_outbox_next(struct store_reader *base);
json_t *sqlite_read_idle_sessions(struct store_reader *base, int64_t before_ms, size_t limit);
json_t *sqlite_read_to_summarize(struct store_reader *base, int64_t now_ms, size_t limit);
int64_t sqlite_read_summary_next(struct store_reader *base);
json_t *sqlite_read_running_to_summarize(struct store_reader *base, const char *profile,
                                         long threshold, size_t limit);
json_t *sqlite_read_cache_get(struct store_reader *base, const char *key, int64_t now_ms);
json_t *sqlite_read_to_embed(struct store_reader *base, int64_t now_ms, size_t limit);
int64_t sqlite_read_embed_next(struct store_reader *base);
int sqlite_read_recall_embedded(struct store_reader *base, const char *tenant, const char *user_id,
                                const char *session_id);
void sqlite_read_recall(struct store_reader *base, const char *tenant, const char *user_id,
                        const char *session_id, size_t limit, struct recall_pick *p);

#endif
