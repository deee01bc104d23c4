#include "memory/sqlite_schema.h"

#include "base/log.h"
#include "base/util.h"

#include <stdlib.h>

/* A user id that is not text, as text: the same in every table (its first 124 bytes in hex). */
#define SQLITE_BAD_USER "('invalid-' || lower(hex(substr(CAST(user_id AS BLOB), 1, 124))))"

static const char *const store_migrations[STORE_SCHEMA_VERSION] = {
    /* 1: sessions and their turns */
    "CREATE TABLE sessions ("
    "  sid INTEGER PRIMARY KEY,"
    "  tenant TEXT NOT NULL, id TEXT NOT NULL,"
    "  user_id TEXT, profile TEXT NOT NULL DEFAULT 'default',"
    "  status TEXT NOT NULL DEFAULT 'RUNNING',"
    "  labels TEXT NOT NULL DEFAULT '{}', metadata TEXT NOT NULL DEFAULT '{}',"
    "  system_messages TEXT, window_hash INTEGER,"
    "  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, stopped_ms INTEGER,"
    "  UNIQUE (tenant, id));"
    "CREATE INDEX sessions_user ON sessions(tenant, user_id);"
    "CREATE TABLE messages ("
    "  sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL, turn_id INTEGER NOT NULL, turn_idx INTEGER NOT NULL,"
    "  role TEXT NOT NULL, content TEXT NOT NULL, source TEXT,"
    "  interrupted INTEGER NOT NULL DEFAULT 0, interrupt_ms INTEGER, original TEXT,"
    "  metadata TEXT NOT NULL DEFAULT '{}', tool_calls TEXT, tool_call_id TEXT, name TEXT,"
    "  timestamp_ms INTEGER NOT NULL, importance REAL NOT NULL,"
    "  model TEXT, usage TEXT, finish_reason TEXT, ttft_us INTEGER, latency_us INTEGER,"
    "  PRIMARY KEY (sid, seq),"
    "  UNIQUE (sid, turn_id, role, turn_idx)) WITHOUT ROWID;",
    /* 2: retention finds idle sessions without a scan */
    "CREATE INDEX sessions_updated ON sessions(updated_ms);",
    /* 3: what inject_memory adds: a session's runtime system messages (set over REST), a
     * user's long-term summary and facts */
    "ALTER TABLE sessions ADD COLUMN runtime_system TEXT;"
    "CREATE TABLE user_summaries ("
    "  tenant TEXT NOT NULL, user_id TEXT NOT NULL, summary TEXT NOT NULL,"
    "  from_ms INTEGER, to_ms INTEGER, updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant, user_id));"
    "CREATE TABLE user_facts ("
    "  tenant TEXT NOT NULL, user_id TEXT NOT NULL, category TEXT NOT NULL, key TEXT NOT NULL,"
    "  value TEXT NOT NULL, confidence REAL NOT NULL DEFAULT 0.5, seen INTEGER NOT NULL DEFAULT 1,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (tenant, user_id, category, key));",
    /* 4: runtime params (set over REST); the webhook outbox, filled in the transaction that
     * stops a session and emptied by deliveries */
    "ALTER TABLE sessions ADD COLUMN runtime_params TEXT;"
    "CREATE TABLE webhook_outbox ("
    "  id INTEGER PRIMARY KEY, notice_id TEXT NOT NULL UNIQUE,"
    "  tenant TEXT NOT NULL, session_id TEXT NOT NULL, user_id TEXT,"
    "  url TEXT NOT NULL, event INTEGER NOT NULL, payload TEXT NOT NULL,"
    "  status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
    "  next_ms INTEGER NOT NULL, last_status INTEGER, last_error TEXT,"
    "  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);"
    "CREATE INDEX outbox_due ON webhook_outbox(status, next_ms);"
    "CREATE INDEX outbox_tenant ON webhook_outbox(tenant, id);"
    "CREATE INDEX outbox_user ON webhook_outbox(tenant, user_id);",
    /* 5: which stopped sessions still wait for their summary (NULL; 0 = none wanted) */
    "ALTER TABLE sessions ADD COLUMN summarized_ms INTEGER;"
    "UPDATE sessions SET summarized_ms = 0;"
    "CREATE INDEX sessions_to_summarize ON sessions(stopped_ms) WHERE summarized_ms IS NULL;",
    /* 6: how far a running session was summarized (summary_threshold; see 11) */
    "ALTER TABLE sessions ADD COLUMN summarized_seq INTEGER NOT NULL DEFAULT 0;",
    /* 7: the exact-match answer cache (cache.h) */
    "CREATE TABLE answer_cache ("
    "  key TEXT PRIMARY KEY, tenant TEXT NOT NULL, user_id TEXT, content TEXT NOT NULL,"
    "  model TEXT, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX answer_cache_user ON answer_cache(tenant, user_id);"
    "CREATE INDEX answer_cache_expires ON answer_cache(expires_ms);",
    /* 8: retrieval (recall.h): the turns waiting for their embedding, the embeddings (gone
     * with their turn); a user's sessions newest first without a sort */
    "CREATE TABLE embed_queue ("
    "  sid INTEGER NOT NULL, seq INTEGER NOT NULL,"
    "  attempts INTEGER NOT NULL DEFAULT 0, next_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (sid, seq),"
    "  FOREIGN KEY (sid, seq) REFERENCES messages(sid, seq) ON DELETE CASCADE) WITHOUT ROWID;"
    "CREATE INDEX embed_queue_due ON embed_queue(next_ms);"
    "CREATE TABLE embeddings ("
    "  sid INTEGER NOT NULL, seq INTEGER NOT NULL, model TEXT NOT NULL, vec BLOB, error TEXT,"
    "  created_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (sid, seq),"
    "  FOREIGN KEY (sid, seq) REFERENCES messages(sid, seq) ON DELETE CASCADE) WITHOUT ROWID;"
    "DROP INDEX sessions_user;"
    "CREATE INDEX sessions_user ON sessions(tenant, user_id, created_ms);",
    /* 9: a stopped session's summary that failed upstream is tried again later */
    ("ALTER TABLE sessions ADD COLUMN summary_tries INTEGER NOT NULL DEFAULT 0;"
     "ALTER TABLE sessions ADD COLUMN summary_next_ms INTEGER NOT NULL DEFAULT 0;"),
    /* 10: ids that are not UTF-8 text (accepted before util_id_valid checked it) read back as
     * JSON null and stalled the jobs that read them: each gets a text name. A session keeps its
     * turns (they hang off sid); a user id maps the same way in every table. */
    ("UPDATE sessions SET id = 'invalid-' || sid || '-' || lower(hex(randomblob(4)))"
     "  WHERE NOT memproxy_id_ok(id);"
     "UPDATE sessions SET user_id = " SQLITE_BAD_USER " WHERE NOT memproxy_id_ok(user_id);"
     "UPDATE OR REPLACE user_summaries SET user_id = " SQLITE_BAD_USER
     "  WHERE NOT memproxy_id_ok(user_id);"
     "UPDATE OR REPLACE user_facts SET user_id = " SQLITE_BAD_USER
     "  WHERE NOT memproxy_id_ok(user_id);"
     "UPDATE webhook_outbox SET session_id = 'invalid-' || id WHERE NOT memproxy_id_ok(session_id);"
     "UPDATE webhook_outbox SET user_id = " SQLITE_BAD_USER " WHERE NOT memproxy_id_ok(user_id);"
     "DELETE FROM answer_cache WHERE NOT memproxy_id_ok(user_id);"),
    /* 11: a running call's own summary (summary_threshold) of the turns its client's window
     * no longer holds, and how many turns that window spans; summarized_seq now says how far
     * that summary goes (before, passes folded the call into the user's summary) */
    ("ALTER TABLE sessions ADD COLUMN call_summary TEXT;"
     "ALTER TABLE sessions ADD COLUMN window_turns INTEGER NOT NULL DEFAULT 0;"
     "UPDATE sessions SET summarized_seq = 0 WHERE status = 'RUNNING';"),
    /* 12: a window's fingerprint in a narrow table of its own: written on every request of a
     * client matched by content, it rewrote the session's whole row — the system prompt
     * (kilobytes, in overflow pages) and the labels with it — into the WAL each time.
     * sessions.window_hash stays for what was imported before; this table wins. */
    ("CREATE TABLE session_windows ("
     "  sid INTEGER PRIMARY KEY REFERENCES sessions(sid) ON DELETE CASCADE,"
     "  hash INTEGER NOT NULL);"
     "INSERT INTO session_windows(sid, hash) SELECT sid, window_hash FROM sessions"
     "  WHERE window_hash IS NOT NULL;"),
};

/* memproxy_id_ok(x): NULL or an id util_id_valid accepts (migration 10). */
static void sqlite_schema_id_ok(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
        sqlite3_result_int(ctx, 1);
        return;
    }
    const char *s = (const char *)sqlite3_value_blob(argv[0]);
    int n = sqlite3_value_bytes(argv[0]);
    sqlite3_result_int(ctx, s != NULL && util_id_valid(s, (size_t)n));
}

static const char store_pragmas[] = "PRAGMA journal_mode=WAL;"
                                    "PRAGMA synchronous=NORMAL;"
                                    "PRAGMA foreign_keys=ON;"
                                    "PRAGMA journal_size_limit=67108864;";

/* Facts (docs/design.md §10): one seen again gains confidence, one not seen in a summary pass of
 * its user loses a tenth of it, and one under the floor is forgotten. */
#define STORE_FACT_BOOST "0.1"
#define STORE_FACT_DECAY "0.9"
#define STORE_FACT_FLOOR "0.1"

static const char *const store_sql[ST__COUNT] = {
    [ST_SESSION_ENSURE] = "INSERT INTO sessions(tenant, id, created_ms, updated_ms) "
                          "VALUES (?1, ?2, ?3, ?3) "
                          "ON CONFLICT(tenant, id) DO UPDATE SET updated_ms = excluded.updated_ms",
    [ST_SESSION_SID] = "SELECT sid FROM sessions WHERE tenant = ?1 AND id = ?2",
    [ST_SESSION_SET] = "UPDATE sessions SET user_id = COALESCE(?2, user_id), "
                       "profile = COALESCE(?3, profile) WHERE sid = ?1",
    [ST_SESSION_SYSTEM] = "UPDATE sessions SET system_messages = ?2 WHERE sid = ?1",
    [ST_SESSION_WINDOW] = "INSERT INTO session_windows(sid, hash) VALUES (?1, ?2) "
                          "ON CONFLICT(sid) DO UPDATE SET hash = excluded.hash",
    [ST_WINDOW_TURNS] = "UPDATE sessions SET window_turns = ?2 WHERE sid = ?1",
    [ST_INSERT] = "INSERT INTO messages(sid, seq, turn_id, turn_idx, role, content, "
                  "source, interrupted, interrupt_ms, original, metadata, tool_calls, "
                  "tool_call_id, name, timestamp_ms, importance, model, usage, finish_reason, "
                  "ttft_us, latency_us) VALUES (?1, ?21, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
                  "?12, ?13, ?14, ?15, ?16, ?17, ?18, "
                  "?19, ?20) ON CONFLICT (sid, turn_id, role, turn_idx) DO NOTHING",
    [ST_UPDATE] = "UPDATE messages SET content = ?3, original = ?4, interrupted = ?5, "
                  "interrupt_ms = ?6 WHERE sid = ?1 AND seq = ?2",
    [ST_REPLACE] = "UPDATE messages SET content = ?3, original = ?4, interrupted = ?5, "
                   "interrupt_ms = ?6, model = ?7, usage = ?8, finish_reason = ?9, ttft_us = ?10, "
                   "latency_us = ?11, timestamp_ms = ?12, tool_calls = ?13, "
                   "metadata = COALESCE(?14, '{}') WHERE sid = ?1 AND seq = ?2",
    [ST_STOP] = "UPDATE sessions SET status = 'STOPPED', stopped_ms = ?2, updated_ms = ?2, "
                "summarized_ms = CASE WHEN ?4 AND user_id IS NOT NULL THEN NULL ELSE 0 END "
                "WHERE sid = ?1 AND status != 'STOPPED' AND updated_ms < ?3",
    [ST_REOPEN] = "UPDATE sessions SET status = 'RUNNING', stopped_ms = NULL, updated_ms = ?2 "
                  "WHERE sid = ?1 AND status = 'STOPPED'",
    [ST_DELETE] = "DELETE FROM sessions WHERE sid = ?1",
    [ST_RUNTIME] = "UPDATE sessions SET runtime_system = COALESCE(?2, runtime_system), "
                   "runtime_params = COALESCE(?4, runtime_params), updated_ms = ?3 WHERE sid = ?1",
    [ST_PATCH] = "UPDATE sessions SET labels = COALESCE(?2, labels), metadata = COALESCE(?3, "
                 "metadata), user_id = COALESCE(?4, user_id), updated_ms = ?5 WHERE sid = ?1",
    [ST_PURGE] = "DELETE FROM sessions WHERE sid IN (SELECT sid FROM sessions "
                 "WHERE updated_ms < ?1 LIMIT ?2)",
    [ST_PURGE_OUTBOX] = "DELETE FROM webhook_outbox WHERE id IN (SELECT id FROM webhook_outbox "
                        "WHERE status != 'pending' AND updated_ms < ?1 LIMIT ?2)",
    [ST_OUTBOX_ADD] = "INSERT INTO webhook_outbox(notice_id, tenant, session_id, user_id, url, "
                      "event, payload, next_ms, created_ms, updated_ms) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
    [ST_OUTBOX_RESULT] = "UPDATE webhook_outbox SET status = ?2, attempts = attempts + 1, "
                         "next_ms = ?3, last_status = ?4, last_error = ?5, updated_ms = ?6 "
                         "WHERE id = ?1 AND status = 'pending'",
    [ST_OUTBOX_RETRY] = "UPDATE webhook_outbox SET status = 'pending', attempts = 0, "
                        "next_ms = ?3, updated_ms = ?3 WHERE tenant = ?1 AND notice_id = ?2 "
                        "AND status != 'delivered'",
    [ST_IMPORT] = "INSERT INTO sessions(tenant, id, user_id, profile, status, labels, metadata, "
                  "system_messages, window_hash, created_ms, updated_ms, stopped_ms, "
                  "runtime_system, runtime_params) VALUES (?1, ?2, ?3, ?4, ?5, "
                  "COALESCE(?6, '{}'), COALESCE(?7, '{}'), ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    [ST_USER_SESSIONS] = "DELETE FROM sessions WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_SUMMARY_DEL] = "DELETE FROM user_summaries WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_FACTS_DEL] = "DELETE FROM user_facts WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_OUTBOX_DEL] = "DELETE FROM webhook_outbox WHERE tenant = ?1 AND user_id = ?2",
    [ST_USER_CACHE_DEL] = "DELETE FROM answer_cache WHERE tenant = ?1 AND user_id = ?2",
    [ST_CACHE_PUT] = "INSERT OR REPLACE INTO answer_cache(key, tenant, user_id, content, model, "
                     "created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_CACHE_EXPIRE] = "DELETE FROM answer_cache WHERE key IN (SELECT key FROM answer_cache "
                        "WHERE expires_ms < ?1 LIMIT 16)",
    [ST_SUMMARY_SET] = "INSERT INTO user_summaries(tenant, user_id, summary, from_ms, to_ms, "
                       "updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_FACT_SET] = "INSERT INTO user_facts(tenant, user_id, category, key, value, confidence, "
                    "seen, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7) "
                    "ON CONFLICT(tenant, user_id, category, key) DO UPDATE SET "
                    "value = excluded.value, confidence = excluded.confidence, "
                    "updated_ms = excluded.updated_ms",
    [ST_SUMMARY_FOLD] = "INSERT INTO user_summaries(tenant, user_id, summary, from_ms, to_ms, "
                        "updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
                        "ON CONFLICT(tenant, user_id) DO UPDATE SET summary = excluded.summary, "
                        "from_ms = MIN(COALESCE(from_ms, excluded.from_ms), excluded.from_ms), "
                        "to_ms = MAX(COALESCE(to_ms, excluded.to_ms), excluded.to_ms), "
                        "updated_ms = excluded.updated_ms",
    [ST_FACT_SEEN] = "INSERT INTO user_facts(tenant, user_id, category, key, value, confidence, "
                     "seen, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?7) "
                     "ON CONFLICT(tenant, user_id, category, key) DO UPDATE SET "
                     "value = excluded.value, confidence = MIN(1.0, MAX(confidence, "
                     "excluded.confidence) + " STORE_FACT_BOOST "), seen = seen + 1, "
                     "updated_ms = excluded.updated_ms",
    [ST_FACT_DECAY] = "UPDATE user_facts SET confidence = confidence * " STORE_FACT_DECAY
                      " WHERE tenant = ?1 AND user_id = ?2 AND updated_ms < ?3",
    [ST_FACT_FORGET] = "DELETE FROM user_facts WHERE tenant = ?1 AND user_id = ?2 AND "
                       "confidence < " STORE_FACT_FLOOR,
    [ST_SUMMARIZED] = "UPDATE sessions SET summarized_ms = ?3 WHERE tenant = ?1 AND id = ?2",
    [ST_SUMMARIZED_SEQ] = "UPDATE sessions SET summarized_seq = MAX(summarized_seq, ?3), "
                          "call_summary = COALESCE(?4, call_summary) "
                          "WHERE tenant = ?1 AND id = ?2",
    [ST_SUMMARY_RETRY] = "UPDATE sessions SET summary_tries = summary_tries + 1, "
                         "summary_next_ms = ?3 WHERE tenant = ?1 AND id = ?2",
    [ST_OUTBOX_SUMMARY] = "UPDATE webhook_outbox SET payload = CASE WHEN ?3 IS NULL THEN payload "
                          "ELSE json_set(payload, '$.summary', ?3) END, next_ms = MIN(next_ms, ?4) "
                          "WHERE tenant = ?1 AND session_id = ?2 AND status = 'pending'",
    [ST_EMBED_QUEUE] = "INSERT OR REPLACE INTO embed_queue(sid, seq, attempts, next_ms) "
                       "SELECT sid, seq, 0, ?3 FROM messages WHERE sid = ?1 AND seq = ?2 "
                       "AND role IN ('user', 'assistant') AND content <> ''",
    [ST_EMBED_FORGET] = "DELETE FROM embeddings WHERE sid = ?1 AND seq = ?2",
    /* only while the turn still reads as what was embedded (an interruption may have changed
     * it meanwhile: it was queued again) */
    [ST_EMBED_PUT] = "INSERT OR REPLACE INTO embeddings(sid, seq, model, vec, error, created_ms) "
                     "SELECT sid, seq, ?3, ?4, ?5, ?6 FROM messages "
                     "WHERE sid = ?1 AND seq = ?2 AND content = ?7",
    [ST_EMBED_DONE] = "DELETE FROM embed_queue WHERE sid = ?1 AND seq = ?2",
    [ST_EMBED_RETRY] = "UPDATE embed_queue SET attempts = attempts + 1, next_ms = ?3 "
                       "WHERE sid = ?1 AND seq = ?2",
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
};

#define STORE_TURN_COLS                                                                            \
    "seq, turn_id, turn_idx, role, content, source, interrupted, interrupt_ms, original, "         \
    "metadata, tool_calls, tool_call_id, name, timestamp_ms, importance, model, usage, "           \
    "finish_reason, ttft_us, latency_us"

static const char *const store_rsql[RS__COUNT] = {
    [RS_TURNS] = "SELECT * FROM (SELECT " STORE_TURN_COLS " FROM messages WHERE sid = "
                 "(SELECT sid FROM sessions WHERE tenant = ?1 AND id = ?2) "
                 "AND turn_id >= ?3 ORDER BY seq DESC LIMIT ?4) ORDER BY seq",
    /* ordered by turn_id inside (and the LIMIT keeps SQLite from folding that order away):
     * so the rows are found through the index on (sid, turn_id, ...), one lookup a turn id;
     * ordered by seq, SQLite walks the whole session instead */
    [RS_TURNS_OF] = "SELECT * FROM (SELECT " STORE_TURN_COLS " FROM messages WHERE sid = "
                    "(SELECT sid FROM sessions WHERE tenant = ?1 AND id = ?2) "
                    "AND turn_id IN (SELECT value FROM json_each(?3)) "
                    "ORDER BY turn_id, seq LIMIT ?4) ORDER BY seq",
    [RS_SESSION] =
        "SELECT id, tenant, user_id, profile, status, system_messages, "
        "COALESCE((SELECT hash FROM session_windows w WHERE w.sid = s.sid), window_hash), "
        "created_ms, updated_ms, stopped_ms, (SELECT COUNT(*) FROM messages m WHERE "
        "m.sid = s.sid), runtime_system, labels, metadata, runtime_params, "
        "call_summary, summarized_seq, window_turns "
        "FROM sessions s WHERE tenant = ?1 AND id = ?2",
    [RS_SUMMARY] = "SELECT summary, from_ms, to_ms, updated_ms FROM user_summaries "
                   "WHERE tenant = ?1 AND user_id = ?2",
    [RS_FACTS] = "SELECT category, key, value, confidence, seen, updated_ms FROM user_facts "
                 "WHERE tenant = ?1 AND user_id = ?2 ORDER BY confidence DESC, updated_ms DESC "
                 "LIMIT ?3",
    [RS_LIST] = "SELECT id, user_id, profile, status, labels, created_ms, updated_ms, stopped_ms, "
                "sid FROM sessions WHERE tenant = ?1 AND (?2 IS NULL OR user_id = ?2) AND "
                "(?3 IS NULL OR status = ?3) AND sid < ?4 ORDER BY sid DESC LIMIT ?5",
    [RS_OUTBOX_DUE] = "SELECT id, notice_id, tenant, session_id, url, event, payload, attempts "
                      "FROM webhook_outbox WHERE status = 'pending' AND next_ms <= ?1 "
                      "ORDER BY next_ms LIMIT ?2",
    [RS_OUTBOX_NEXT] = "SELECT MIN(next_ms) FROM webhook_outbox WHERE status = 'pending'",
    [RS_DELIVERIES] = "SELECT notice_id, session_id, url, event, status, attempts, next_ms, "
                      "last_status, last_error, created_ms, updated_ms, id FROM webhook_outbox "
                      "WHERE tenant = ?1 AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR "
                      "session_id = ?3) AND (?4 IS NULL OR notice_id = ?4) AND id < ?5 "
                      "ORDER BY id DESC LIMIT ?6",
    [RS_IDLE] = "SELECT tenant, id, profile FROM sessions WHERE status = 'RUNNING' AND "
                "updated_ms < ?1 "
                "ORDER BY updated_ms LIMIT ?2",
    [RS_TO_SUMMARIZE] = "SELECT tenant, id, user_id, profile, created_ms, stopped_ms, "
                        "summary_tries FROM "
                        "sessions WHERE summarized_ms IS NULL AND status = 'STOPPED' "
                        "AND summary_next_ms <= ?1 ORDER BY stopped_ms LIMIT ?2",
    [RS_SUMMARY_NEXT] = "SELECT MIN(summary_next_ms) FROM sessions WHERE summarized_ms IS NULL "
                        "AND status = 'STOPPED'",
    /* upto: the newest turn the client's next window will not hold (it spans window_turns
     * turns and ends on the next new one) */
    [RS_RUNNING_TO_SUMMARIZE] = "SELECT tenant, id, user_id, profile, created_ms, updated_ms, "
                                "upto, summarized_seq, call_summary FROM (SELECT *, (SELECT "
                                "MAX(seq) FROM messages m WHERE m.sid = s.sid) + 1 - window_turns "
                                "AS upto FROM sessions s WHERE status = 'RUNNING' AND "
                                "window_turns > 0 AND profile = ?1) "
                                "WHERE upto - summarized_seq >= ?2 LIMIT ?3",
    [RS_CACHE_GET] = "SELECT content, model FROM answer_cache WHERE key = ?1 AND expires_ms > ?2",
    [RS_TO_EMBED] = "SELECT q.sid, q.seq, s.profile, m.content, q.attempts FROM embed_queue q "
                    "JOIN messages m ON m.sid = q.sid AND m.seq = q.seq "
                    "JOIN sessions s ON s.sid = q.sid WHERE q.next_ms <= ?1 "
                    "ORDER BY q.next_ms LIMIT ?2",
    [RS_EMBED_NEXT] = "SELECT MIN(next_ms) FROM embed_queue",
    [RS_SESSION_USER] = "SELECT user_id FROM sessions WHERE tenant = ?1 AND id = ?2",
/* A caller's latest turns, newest first: sessions by creation (an index walk), turns by seq. */
#define STORE_RECALL_SQL(where)                                                                    \
    "SELECT m.sid, m.seq, m.role, m.content, m.timestamp_ms, m.importance, e.vec "                 \
    "FROM sessions s JOIN messages m ON m.sid = s.sid "                                            \
    "LEFT JOIN embeddings e ON e.sid = m.sid AND e.seq = m.seq "                                   \
    "WHERE " where " AND m.role IN ('user', 'assistant') AND m.content <> '' "                     \
    "ORDER BY s.created_ms DESC, m.seq DESC LIMIT ?3"
    [RS_RECALL_USER] = STORE_RECALL_SQL("s.tenant = ?1 AND s.user_id = ?2"),
    [RS_RECALL_SESSION] = STORE_RECALL_SQL("s.tenant = ?1 AND s.id = ?2"),
    [RS_EMBEDDED_USER] = "SELECT 1 FROM sessions s JOIN embeddings e ON e.sid = s.sid "
                         "WHERE s.tenant = ?1 AND s.user_id = ?2 AND e.vec IS NOT NULL LIMIT 1",
    [RS_EMBEDDED_SESSION] = "SELECT 1 FROM sessions s JOIN embeddings e ON e.sid = s.sid "
                            "WHERE s.tenant = ?1 AND s.id = ?2 AND e.vec IS NOT NULL LIMIT 1",
};

int sqlite_schema_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    log_error("store: %s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    return -1;
}

int sqlite_schema_setup(sqlite3 *db)
{
    return sqlite_schema_exec(db, store_pragmas);
}

int sqlite_schema_migrate(sqlite3 *db, char **err)
{
    sqlite3_stmt *s = NULL;
    int version = 0;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
    if (sqlite3_step(s) == SQLITE_ROW)
        version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (version > STORE_SCHEMA_VERSION) {
        *err = xasprintf("the database has schema version %d; this memproxy knows up to %d",
                         version, STORE_SCHEMA_VERSION);
        return -1;
    }
    sqlite3_create_function(db, "memproxy_id_ok", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                            sqlite_schema_id_ok, NULL, NULL);
    for (int v = version; v < STORE_SCHEMA_VERSION; v++) {
        char *sql =
            xasprintf("BEGIN; %s PRAGMA user_version = %d; COMMIT;", store_migrations[v], v + 1);
        char *msg = NULL;
        int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
        free(sql);
        if (rc != SQLITE_OK) {
            *err = xasprintf("migration to schema version %d failed: %s", v + 1, msg ? msg : "?");
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
    }
    return 0;
}

int sqlite_schema_prepare(struct sqlite_db *st, char **err)
{
    for (int i = 0; i < ST__COUNT; i++) {
        if (sqlite3_prepare_v3(st->db, store_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
                               NULL) != SQLITE_OK) {
            *err = xasprintf("cannot prepare a statement: %s", sqlite3_errmsg(st->db));
            return -1;
        }
    }
    return 0;
}

int sqlite_schema_prepare_reader(struct sqlite_reader *r)
{
    for (int i = 0; i < RS__COUNT; i++) {
        if (sqlite3_prepare_v3(r->db, store_rsql[i], -1, SQLITE_PREPARE_PERSISTENT, &r->stmt[i],
                               NULL) != SQLITE_OK)
            return -1;
    }
    return 0;
}
