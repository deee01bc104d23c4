#include "config/cfg.h"

#include "base/log.h"
#include "base/tiktoken.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

enum cfg_type { T_STR, T_INT, T_BOOL, T_SIZE, T_DURATION, T_STRLIST, T_LEVEL, T_FRACTION };

/* Where an option lives: the top level, or one item of a list section. */

struct cfg_option {
    enum cfg_section section;
    const char *name; /* dotted path inside its section */
    enum cfg_type type;
    size_t offset;   /* into struct cfg or the section's item struct */
    const char *def; /* text parsed like a value; NULL = required (item sections only) */
    long long min, max;
    const char *help;
};

#define KIB     1024LL
#define MIB     (1024LL * 1024)
#define SEC     1000LL
#define TOP(f)  offsetof(struct cfg, f)
#define UPS(f)  offsetof(struct cfg_upstream, f)
#define PRO(f)  offsetof(struct cfg_profile, f)
#define CKEY(f) offsetof(struct cfg_client_key, f)
#define HOOK(f) offsetof(struct cfg_webhook, f)

/* The options table. Keep config/memproxy.example.yaml in step (a unit test checks it). */
static const struct cfg_option cfg_options[] = {
    {CFG_SEC_TOP, "server.listen", T_STR, TOP(listen), "127.0.0.1:8080", 0, 0,
     "Address to listen on, host:port (0.0.0.0 for all interfaces)."},
    {CFG_SEC_TOP, "server.workers", T_INT, TOP(workers), "0", 0, 256,
     "Network worker threads, each with its own event loop; 0 = one per CPU."},
    {CFG_SEC_TOP, "server.max_connections", T_INT, TOP(max_connections), "0", 0, 1000000,
     "Most client connections open at once; past it a new one gets 503 and is closed. "
     "0 = from the open-file limit: half of what is left after 64 for the process itself "
     "(each chat request holds a client and an upstream socket)."},
    {CFG_SEC_TOP, "server.max_body_size", T_SIZE, TOP(max_body_size), "4MiB", 1 * KIB, 256 * MIB,
     "Largest request body; larger gets 413 (JSON). Past it by a quarter (at least 64 KiB), the "
     "body is discarded as it comes, not buffered, and evhttp answers 413 itself."},
    {CFG_SEC_TOP, "server.max_header_size", T_SIZE, TOP(max_header_size), "16KiB", 1 * KIB, 1 * MIB,
     "Largest request header block."},
    {CFG_SEC_TOP, "server.max_json_depth", T_INT, TOP(max_json_depth), "64", 2, 1000,
     "Deepest nesting accepted in a request body."},
    {CFG_SEC_TOP, "server.max_json_nodes", T_INT, TOP(max_json_nodes), "200000", 1000, 100000000,
     "Most JSON values (objects, arrays, strings, numbers) in one request body; more gets 413. "
     "A tree costs ~100 bytes a value whatever its text."},
    {CFG_SEC_TOP, "server.max_messages", T_INT, TOP(max_messages), "4096", 1, 1000000,
     "Most messages accepted in one chat request."},
    {CFG_SEC_TOP, "server.parse_memo", T_SIZE, TOP(parse_memo), "2MiB", 0, 1024 * MIB,
     "Per worker: messages kept as read, by their exact bytes and tenant, with what was made "
     "of them (their check, transforms' facts, standard form, text), so a voice platform's "
     "window resent each turn is not read or rebuilt again; 0 = read every message."},
    {CFG_SEC_TOP, "server.client_timeout", T_DURATION, TOP(client_timeout_ms), "60s", 1 * SEC,
     3600 * SEC,
     "Time a client has to send its request; idle keep-alive connections close after it."},
    {CFG_SEC_TOP, "server.request_timeout", T_DURATION, TOP(request_timeout_ms), "30s", 1 * SEC,
     3600 * SEC,
     "Time from a request's first byte to its last (headers and body); past it: 408 and the "
     "connection is closed. client_timeout counts silence, this the whole request."},
    {CFG_SEC_TOP, "server.shutdown_timeout", T_DURATION, TOP(shutdown_timeout_ms), "30s", 0,
     600 * SEC, "On SIGTERM, how long in-flight requests may take to finish before exit."},
    {CFG_SEC_TOP, "server.max_client_buffer", T_SIZE, TOP(max_client_buffer), "256KiB", 4 * KIB,
     64 * MIB, "Unsent bytes queued for one slow client before the upstream transfer pauses."},
    {CFG_SEC_TOP, "server.max_upstream_response", T_SIZE, TOP(max_upstream_response), "8MiB",
     64 * KIB, 256 * MIB, "Largest non-streaming upstream response; larger gets 502."},
    {CFG_SEC_TOP, "upstream.max_connections", T_INT, TOP(upstream_max_connections), "64", 1, 10000,
     "Idle upstream connections each worker keeps open for reuse."},
    {CFG_SEC_TOP, "log.access", T_STR, TOP(log_access), "text", 0, 0,
     "One line per request at info level: text (key=value), json (a JSON object), or off. "
     "No bodies, no keys."},
    {CFG_SEC_TOP, "log.level", T_LEVEL, TOP(log_level), "info", 0, 0,
     "debug, info, warn or error."},
    {CFG_SEC_TOP, "metrics.enabled", T_BOOL, TOP(metrics_enabled), "true", 0, 0,
     "Serve Prometheus metrics at GET /metrics."},
    {CFG_SEC_TOP, "storage.path", T_STR, TOP(db_path), "memproxy.db", 0, 0,
     "SQLite database file (created readable by its owner only, 0600, as are its WAL and "
     "shared-memory files; --db overrides)."},
    {CFG_SEC_TOP, "storage.url", T_STR, TOP(db_url), "", 0, 0,
     "A PostgreSQL database (a libpq URI, postgresql://user@host:port/db?..., or key=value "
     "string) to run on instead of the SQLite file: how several replicas share one memory "
     "(docs/deploy.md). Empty: SQLite. MEMPROXY_DATABASE_URL overrides."},
    {CFG_SEC_TOP, "storage.statement_timeout", T_DURATION, TOP(statement_timeout_ms), "10s", 0,
     600 * SEC,
     "PostgreSQL: a statement running longer is cancelled and its operation fails (a chat "
     "reply's end then says storage_failed; REST answers 503). 0 = the server's setting."},
    {CFG_SEC_TOP, "storage.lease", T_DURATION, TOP(lease_ms), "2m", 1 * SEC, 3600 * SEC,
     "PostgreSQL: a webhook delivery, summary or embedding a replica takes is its own this "
     "long; when the replica dies, another takes the item over after it. Longer than "
     "webhooks[].timeout and than an upstream's answer to a summary may take."},
    {CFG_SEC_TOP, "storage.replica_wait", T_DURATION, TOP(replica_wait_ms), "100ms", 0, 10 * SEC,
     "PostgreSQL, stored history mode: how long a request that begins with what the caller "
     "heard of a reply waits for that reply's turn, when another replica has not committed it "
     "yet (a barge-in whose next request reached this replica at once; docs/deploy.md). "
     "Checked every 2 ms; past it the request goes on with what this replica has, and a heard "
     "part of no turn id is not recorded (that reply stays as its replica recorded it)."},
    {CFG_SEC_TOP, "storage.prepared_statements", T_BOOL, TOP(prepared_statements), "true", 0, 0,
     "PostgreSQL: each connection prepares the statements it runs (protocol-level, never SQL "
     "PREPARE) so the server parses and plans them once; behind PgBouncer older than 1.21, or "
     "without max_prepared_statements, set false."},
    {CFG_SEC_TOP, "storage.pool", T_INT, TOP(db_pool), "2", 1, 64,
     "PostgreSQL: connections (each with a thread) for the reads that would otherwise make a "
     "worker wait: the REST API's, the answer cache's, retrieval's, a turn-id window reaching "
     "past the working set. More when many REST reads run at once. A replica holds at most "
     "server.workers + 2 + storage.pool connections (docs/deploy.md)."},
    {CFG_SEC_TOP, "storage.busy_timeout", T_DURATION, TOP(busy_timeout_ms), "5s", 1, 600 * SEC,
     "How long a database connection waits for a lock before the operation fails."},
    {CFG_SEC_TOP, "storage.commit_delay_us", T_INT, TOP(commit_delay_us), "500", 0, 100000,
     "Under load (other recorded requests under way, replies ending less than this many "
     "microseconds apart) a reply's commit waits this long for the next ones to share it, "
     "and a request's own turns (its window's new messages) wait for its reply's commit, this "
     "long at most; 0 = never. One request at a time never waits."},
    {CFG_SEC_TOP, "storage.commit_spin_us", T_INT, TOP(commit_spin_us), "100", 0, 10000,
     "One recorded request at a time (no other reply on its way, nothing else ready for the "
     "worker, its replies more than twice this apart), the worker waits this many "
     "microseconds at most for its reply's commit, "
     "yielding its CPU, instead of sleeping until the writer wakes it (a wake-up through the "
     "kernel, and on a VM the wake-up of an idle CPU); then it sleeps until woken. 0 = always "
     "sleep. SQLite only."},
    {CFG_SEC_TOP, "storage.wal_flush_after", T_SIZE, TOP(wal_flush_after), "256KiB", 0, 64 * MIB,
     "Each time this much has been committed to SQLite's WAL, the kernel is asked to start "
     "writing it to disk (sync_file_range; nothing waits for it), so the checkpoints' syncs "
     "find little left to write and do not stall requests in one burst (PostgreSQL's "
     "checkpoint_flush_after). 0 = leave it all to the checkpoints. SQLite only."},
    {CFG_SEC_TOP, "sessions.require", T_BOOL, TOP(sessions_require), "false", 0, 0,
     "Refuse chat requests that name no session (400) instead of forwarding them unrecorded."},
    {CFG_SEC_TOP, "sessions.user_fields", T_STRLIST, TOP(session_user_fields), "", 0, 0,
     "Body fields tried for the user id after user_id, user and user_uid: names or JSON "
     "Pointers (e.g. [/metadata/caller_id])."},
    {CFG_SEC_TOP, "sessions.id_pattern", T_STR, TOP(session_id_pattern), "", 0, 0,
     "A POSIX extended regular expression matched against the first system message when no "
     "other source names the session; its first group is the id (e.g. 'conversation: "
     "([A-Za-z0-9_-]+)' for a prompt carrying {{system__conversation_id}})."},
    {CFG_SEC_TOP, "sessions.id_fields", T_STRLIST, TOP(session_id_fields), "", 0, 0,
     "Body fields tried, in order, for the session id after the built-in sources: names or "
     "JSON Pointers (e.g. [channel] or [/metadata/call_sid])."},
    {CFG_SEC_TOP, "memory.session_turns", T_INT, TOP(ws_session_turns), "256", 8, 100000,
     "Recent turns per session kept in memory, so a hot session's request reads no database."},
    {CFG_SEC_TOP, "memory.session_bytes", T_SIZE, TOP(ws_session_bytes), "8MiB", 64 * KIB,
     1024 * MIB,
     "Per session in the working set: the newest turns within this many bytes (the newest turn "
     "always stays); older ones are read from the database when needed."},
    {CFG_SEC_TOP, "memory.max_bytes", T_SIZE, TOP(ws_max_bytes), "256MiB", 1 * MIB,
     64L * 1024 * MIB,
     "All sessions in the working set together: past it the least recently used go."},
    {CFG_SEC_TOP, "memory.max_turns", T_INT, TOP(ws_max_turns), "200000", 64, 100000000,
     "Turns kept in memory over all sessions; the least recently used sessions go first. "
     "A voice call's turn takes ~4 KiB (the default: ~800 MiB at most)."},
    {CFG_SEC_TOP, "tokenizer.file", T_STR, TOP(tokenizer_file), "", 0, 0,
     "A tiktoken ranks file (o200k_base.tiktoken, cl100k_base.tiktoken, Llama 3's "
     "tokenizer.model): trim, inject_memory and retrieval count tokens with it. Empty = "
     "characters / 4."},
    {CFG_SEC_TOP, "tokenizer.pattern", T_STR, TOP(tokenizer_pattern), "o200k", 0, 0,
     "The file's pre-tokenizer: o200k (GPT-4o, GPT-4.1, GPT-5, o-series) or cl100k (GPT-4, "
     "GPT-3.5, Llama 3)."},
    {CFG_SEC_TOP, "retention.days", T_INT, TOP(retention_days), "0", 0, 36500,
     "Sessions not updated for this many days are deleted in the background; 0 keeps them."},
    {CFG_SEC_TOP, "sessions.idle_timeout", T_DURATION, TOP(idle_timeout_ms), "0s", 0,
     30 * 86400 * SEC,
     "A RUNNING session without requests for this long is stopped (and dumped to the webhooks); "
     "0 = never."},
    {CFG_SEC_TOP, "ui.enabled", T_BOOL, TOP(ui_enabled), "true", 0, 0,
     "Serve the call viewer at GET /ui/ (from the binary; it reads the REST API with an admin "
     "key the person enters)."},
    {CFG_SEC_TOP, "metrics.key", T_STR, TOP(metrics_key), "", 0, 0,
     "A key GET /metrics requires (Authorization: Bearer <key>, at least 16 bytes); empty = "
     "none: keep /metrics off other hosts' reach then."},
    {CFG_SEC_TOP, "server.allowed_hosts", T_STRLIST, TOP(allowed_hosts), "", 0, 0,
     "Host header names (without port) requests must carry, e.g. [memproxy.internal]; empty = "
     "any. Other Hosts get 421: a DNS name rebound to this address cannot reach memproxy from "
     "a browser."},
    {CFG_SEC_TOP, "auth.open", T_BOOL, TOP(auth_open), "false", 0, 0,
     "Serve chat without client keys on an address other hosts can reach (by default that is "
     "refused at start: anyone could spend the upstream's key). Loopback needs no key."},
    {CFG_SEC_TOP, "notifications.agora_secret", T_STR, TOP(agora_secret), "", 0, 0,
     "Secret of Agora's notification callbacks (Agora-Signature-V2 is checked with it); empty "
     "refuses POST /v1/notifications/agora."},
    {CFG_SEC_TOP, "notifications.max_age", T_DURATION, TOP(agora_max_age_ms), "5m", 0, 86400 * SEC,
     "A notification whose notifyMs is further than this from now (either way) is refused: a "
     "captured one cannot be replayed later; 0 = not checked. A noticeId seen within it is "
     "acknowledged and not acted on again."},
    {CFG_SEC_TOP, "notifications.tenant", T_STR, TOP(agora_tenant), "default", 0, 0,
     "Tenant whose sessions Agora's notifications stop."},
    {CFG_SEC_TOP, "notifications.session_field", T_STR, TOP(agora_session_field), "", 0, 0,
     "A payload field tried for the session id after labels.session_id and name (e.g. "
     "channel)."},

    {CFG_SEC_CLIENT_KEY, "key", T_STR, CKEY(key), NULL, 0, 0,
     "A key clients send as 'Authorization: Bearer <key>', at least 16 bytes. No keys: chat is "
     "served only on a loopback address (or with auth.open)."},
    {CFG_SEC_CLIENT_KEY, "user", T_STR, CKEY(user), "", 0, 0,
     "The user ids this key may act for: empty = any; 'x' = only x; 'x*' = those starting "
     "with x. A request naming another user, or none, gets 403. For key holders that are not "
     "fully trusted (one key per end user or per device)."},
    {CFG_SEC_CLIENT_KEY, "inject_memory", T_BOOL, CKEY(inject_memory), "true", 0, 0,
     "Whether remembered memory (summary, facts, retrieved turns) may be injected into this "
     "key's requests; false keeps a key holder from reading a user's memory through the model."},
    {CFG_SEC_CLIENT_KEY, "tenant", T_STR, CKEY(tenant), "default", 0, 0,
     "Tenant the key's sessions belong to."},
    {CFG_SEC_ADMIN_KEY, "key", T_STR, CKEY(key), NULL, 0, 0,
     "A key for the REST API ('Authorization: Bearer <key>'). No admin keys = the REST API "
     "refuses every call."},
    {CFG_SEC_ADMIN_KEY, "tenant", T_STR, CKEY(tenant), "default", 0, 0,
     "Tenant whose sessions the key may read and manage."},

    {CFG_SEC_WEBHOOK, "url", T_STR, HOOK(url), NULL, 0, 0,
     "Where a session's stop-time dump is POSTed (http:// or https://)."},
    {CFG_SEC_WEBHOOK, "secret", T_STR, HOOK(secret), NULL, 0, 0,
     "Key of the Agora-Signature (HMAC-SHA1) and Agora-Signature-V2 (HMAC-SHA256) headers."},
    {CFG_SEC_WEBHOOK, "events", T_STRLIST, HOOK(events), "103", 0, 0,
     "Agora event types sent: 103 (the session's history) and/or 102 (the session left)."},
    {CFG_SEC_WEBHOOK, "tenant", T_STR, HOOK(tenant), "", 0, 0,
     "Only this tenant's sessions; empty = every tenant's."},
    {CFG_SEC_WEBHOOK, "timeout", T_DURATION, HOOK(timeout_ms), "10s", 1, 300 * SEC,
     "A try that gets no 2xx within this long failed."},
    {CFG_SEC_WEBHOOK, "max_attempts", T_INT, HOOK(max_attempts), "12", 1, 1000,
     "Tries before a delivery is kept as failed (GET /v1/webhooks/deliveries, retryable)."},
    {CFG_SEC_WEBHOOK, "backoff", T_DURATION, HOOK(backoff_ms), "1s", 1, 3600 * SEC,
     "Wait before the first retry; doubled per try, with jitter."},
    {CFG_SEC_WEBHOOK, "max_backoff", T_DURATION, HOOK(max_backoff_ms), "10m", 1, 86400 * SEC,
     "Longest wait between tries."},

    {CFG_SEC_UPSTREAM, "name", T_STR, UPS(name), NULL, 0, 0, "Name profiles refer to."},
    {CFG_SEC_UPSTREAM, "url", T_STR, UPS(url), NULL, 0, 0,
     "Base URL of an OpenAI-compatible API, up to /v1 (e.g. https://api.openai.com/v1); at "
     "most 1024 characters."},
    {CFG_SEC_UPSTREAM, "api_key", T_STR, UPS(api_key), "", 0, 0,
     "Key sent upstream; empty sends none. The first upstream's defaults to "
     "$MEMPROXY_UPSTREAM_API_KEY, or to $OPENAI_API_KEY when it is api.openai.com; a key "
     "sent over plain http:// to another host is warned of at start."},
    {CFG_SEC_UPSTREAM, "connect_timeout", T_DURATION, UPS(connect_timeout_ms), "5s", 1, 300 * SEC,
     "Time to connect (and finish TLS); past it the next fallback is tried, then 502."},
    {CFG_SEC_UPSTREAM, "first_byte_timeout", T_DURATION, UPS(first_byte_timeout_ms), "60s", 1,
     3600 * SEC, "Time from sending the request to the response headers; past it: 504."},
    {CFG_SEC_UPSTREAM, "idle_timeout", T_DURATION, UPS(idle_timeout_ms), "60s", 1 * SEC, 3600 * SEC,
     "Longest silence between bytes after the response headers; past it the reply ends with "
     "upstream_timeout (504, or an error event in a stream)."},
    {CFG_SEC_UPSTREAM, "total_timeout", T_DURATION, UPS(total_timeout_ms), "10m", 1 * SEC,
     86400 * SEC, "Longest whole transfer, streams included."},

    {CFG_SEC_PROFILE, "name", T_STR, PRO(name), NULL, 0, 0,
     "Chosen by X-Memproxy-Profile, body 'profile' or /p/{name}/v1/...; 'default' otherwise."},
    {CFG_SEC_PROFILE, "upstream", T_STR, PRO(upstream), NULL, 0, 0, "Primary upstream's name."},
    {CFG_SEC_PROFILE, "fallbacks", T_STRLIST, PRO(fallbacks), "", 0, 0,
     "Upstreams tried in order when the previous one fails before the first byte."},
    {CFG_SEC_PROFILE, "model", T_STR, PRO(model), "", 0, 0,
     "Model sent upstream instead of the client's; empty keeps the client's."},
    {CFG_SEC_PROFILE, "system_messages", T_STRLIST, PRO(system_messages), "", 0, 0,
     "System messages sent first, before the client's own."},
    {CFG_SEC_PROFILE, "history", T_STR, PRO(history), "passthrough", 0, 0,
     "passthrough: the client sends its window; stored: the client sends only new messages "
     "and the session's stored history is put before them."},
    {CFG_SEC_PROFILE, "transforms", T_STRLIST, PRO(transforms),
     "interruptions,trim,inject_memory,standard", 0, 0,
     "Transforms run over the messages, in order: standard, interruptions, timestamps, "
     "user_context, drop_sources, merge_consecutive, trim, inject_memory."},
    {CFG_SEC_PROFILE, "interruptions", T_STR, PRO(interruptions), "heard", 0, 0,
     "How an interrupted reply is shown to the model: heard (what the caller heard), original "
     "(all that was generated) or annotate (heard, plus annotate_note)."},
    {CFG_SEC_PROFILE, "annotate_note", T_STR, PRO(annotate_note),
     "[interrupted: the caller cut in here and did not hear the rest]", 0, 0,
     "Appended to an interrupted reply with interruptions: annotate."},
    {CFG_SEC_PROFILE, "timestamp_format", T_STR, PRO(timestamp_format), "[%Y-%m-%d %H:%M:%S UTC] ",
     0, 0, "strftime format (UTC) the timestamps transform puts before each message's text."},
    {CFG_SEC_PROFILE, "drop_sources", T_STRLIST, PRO(drop_sources), "", 0, 0,
     "Sources the drop_sources transform leaves out (e.g. [silence, llm_failure])."},
    {CFG_SEC_PROFILE, "token_budget", T_INT, PRO(token_budget), "16000", 0, 100000000,
     "Tokens the trim transform fits the messages into (counted by the profile's tokenizer, "
     "else about 4 characters each); 0 = no limit."},
    {CFG_SEC_PROFILE, "tokenizer_file", T_STR, PRO(tokenizer_file), "", 0, 0,
     "This profile's tiktoken ranks file, where its model counts otherwise than "
     "tokenizer.file's (profiles that route to different model families); none = characters "
     "/ 4; empty = tokenizer.file. A file several profiles name with one pattern is loaded "
     "once."},
    {CFG_SEC_PROFILE, "tokenizer_pattern", T_STR, PRO(tokenizer_pattern), "", 0, 0,
     "This profile's pre-tokenizer for its tokenizer_file: o200k or cl100k; empty = "
     "tokenizer.pattern."},
    {CFG_SEC_PROFILE, "body_drop", T_STRLIST, PRO(body_drop), "", 0, 0,
     "Body fields the standard transform removes besides the voice platforms' own (call, "
     "customer, phoneNumber, elevenlabs_extra_body, turn_id, timestamp, interruptable, "
     "session_id, user_id, user_uid, profile); every other field goes upstream."},
    {CFG_SEC_PROFILE, "body_keep", T_STRLIST, PRO(body_keep), "", 0, 0,
     "Platform body fields the standard transform sends upstream anyway (Vapi's call object "
     "is memproxy's session source and never goes)."},
    {CFG_SEC_PROFILE, "summary_skip_sources", T_STRLIST, PRO(summary_skip_sources),
     "greeting,silence,llm_failure", 0, 0,
     "Turn sources the summarizer leaves out: the platform's own lines (greetings, 'are you "
     "still there?', fallback replies) say nothing about the caller."},
    {CFG_SEC_PROFILE, "fallback_reply", T_STR, PRO(fallback_reply), "", 0, 0,
     "When every upstream of the profile fails before the first token, this text is answered "
     "as an ordinary assistant message (status 200, streamed or not) instead of an error, so "
     "the caller hears something; recorded with source llm_failure. Empty = the error."},
    {CFG_SEC_PROFILE, "runtime_system", T_STR, PRO(runtime_system), "replace", 0, 0,
     "What a session's runtime system messages (POST .../update, Agora's update body) do to the "
     "client's own system messages: replace them, as Agora's update does (the profile's "
     "system_messages stay), or append after them."},
    {CFG_SEC_PROFILE, "memory_role", T_STR, PRO(memory_role), "system", 0, 0,
     "Role of the remembered memory inject_memory adds (the caller's summary, facts and "
     "earlier turns, always quoted as data the model is told not to obey): system, developer "
     "or user. Runtime system messages set over REST stay system."},
    {CFG_SEC_PROFILE, "tenants", T_STRLIST, PRO(tenants), "", 0, 0,
     "Tenants whose client keys may use this profile; empty = all. Another tenant's request for "
     "it gets 403."},
    {CFG_SEC_PROFILE, "memory_budget", T_INT, PRO(memory_budget), "1000", 0, 1000000,
     "Tokens inject_memory may add (runtime system messages, then summary, then facts)."},
    {CFG_SEC_PROFILE, "context_header", T_BOOL, PRO(context_header), "true", 0, 0,
     "Answer with X-Memproxy-Context: history, trimmed and injected message counts, and the "
     "tokens sent when trim counted them."},
    {CFG_SEC_PROFILE, "summarize", T_BOOL, PRO(summarize), "false", 0, 0,
     "When a session with a user id stops, summarize it (and extract facts about the caller) "
     "through the profile's upstream, off the hot path; injected into the user's next sessions."},
    {CFG_SEC_PROFILE, "summarizer_model", T_STR, PRO(summarizer_model), "", 0, 0,
     "Model of the summary request; empty = the profile's model, else the session's last "
     "reply's."},
    {CFG_SEC_PROFILE, "summary_prompt", T_STR, PRO(summary_prompt), "", 0, 0,
     "System prompt of the summary request; empty = the built-in one (JSON summary and facts)."},
    {CFG_SEC_PROFILE, "summary_threshold", T_INT, PRO(summary_threshold), "0", 0, 100000,
     "With summarize: a RUNNING call also gets its own summary, injected while the client's "
     "window no longer holds its turns, made again each time this many more turns left the "
     "window; 0 = only the summary at stop."},
    {CFG_SEC_PROFILE, "cache", T_BOOL, PRO(cache), "false", 0, 0,
     "Answer a turn that depends on no earlier context (system messages and one user message) "
     "from the exact-match cache when the same was asked before; X-Memproxy-Cache: hit|miss; "
     "Cache-Control: no-cache bypasses."},
    {CFG_SEC_PROFILE, "cache_ttl", T_DURATION, PRO(cache_ttl_ms), "1h", 1 * SEC, 30 * 86400 * SEC,
     "How long a cached answer is served."},
    {CFG_SEC_PROFILE, "summary_wait", T_DURATION, PRO(summary_wait_ms), "10s", 0, 300 * SEC,
     "How long a stop's webhook dumps wait for the summary to ride along; then they go "
     "without it."},
    {CFG_SEC_PROFILE, "summary_retry", T_DURATION, PRO(summary_retry_ms), "1m", 1 * SEC, 3600 * SEC,
     "A stopped session's summary that failed upstream is tried again after this, doubled per "
     "try, up to 5 tries (its webhook dumps go without it at the first failure)."},
    {CFG_SEC_PROFILE, "retrieval", T_BOOL, PRO(retrieval), "false", 0, 0,
     "Tri-hybrid retrieval: stored user and assistant turns are embedded in the background "
     "(upstream /v1/embeddings) and each request gets the caller's recent, salient and "
     "relevant earlier turns as one system message (through inject_memory)."},
    {CFG_SEC_PROFILE, "retrieval_model", T_STR, PRO(retrieval_model), "text-embedding-3-small", 0,
     0, "Embedding model asked for, on the profile's primary upstream."},
    {CFG_SEC_PROFILE, "retrieval_timeout", T_DURATION, PRO(retrieval_timeout_ms), "30ms", 1,
     10 * SEC,
     "Time budget of a request's lookup: when the question's embedding is not back by then, "
     "the request goes on without the relevance leg."},
    {CFG_SEC_PROFILE, "retrieval_recent", T_INT, PRO(retrieval_recent), "10", 0, 1000,
     "Recency leg: the caller's latest turns not in the request already."},
    {CFG_SEC_PROFILE, "retrieval_importance", T_FRACTION, PRO(retrieval_importance), "0.85", 0, 0,
     "Salience leg: turns whose importance is at least this."},
    {CFG_SEC_PROFILE, "retrieval_similarity", T_FRACTION, PRO(retrieval_similarity), "0.655", 0, 0,
     "Relevance leg: turns whose cosine similarity to the question is at least this."},
    {CFG_SEC_PROFILE, "retrieval_relevant", T_INT, PRO(retrieval_relevant), "5", 0, 1000,
     "Relevance leg: at most this many, the most similar."},
    {CFG_SEC_PROFILE, "retrieval_scan", T_INT, PRO(retrieval_scan), "1000", 1, 100000,
     "Candidates read per request: the caller's latest turns (with their embeddings)."},
    {CFG_SEC_PROFILE, "retrieval_budget", T_INT, PRO(retrieval_budget), "500", 1, 1000000,
     "Tokens the retrieved message may take (relevance kept first, then salience, then "
     "recency); inject_memory's memory_budget applies too."},
};

struct cfg_list_section {
    const char *name;
    enum cfg_section section;
    size_t item_size;
    size_t list_offset, count_offset;
};

static const struct cfg_list_section cfg_lists[] = {
    {"upstreams", CFG_SEC_UPSTREAM, sizeof(struct cfg_upstream), TOP(upstreams), TOP(nupstreams)},
    {"profiles", CFG_SEC_PROFILE, sizeof(struct cfg_profile), TOP(profiles), TOP(nprofiles)},
    {"auth.client_keys", CFG_SEC_CLIENT_KEY, sizeof(struct cfg_client_key), TOP(client_keys),
     TOP(nclient_keys)},
    {"auth.admin_keys", CFG_SEC_ADMIN_KEY, sizeof(struct cfg_client_key), TOP(admin_keys),
     TOP(nadmin_keys)},
    {"webhooks", CFG_SEC_WEBHOOK, sizeof(struct cfg_webhook), TOP(webhooks), TOP(nwebhooks)},
};

/* ---- value parsing (shared by YAML, flags and defaults) ---- */

struct cfg_unit {
    const char *suffix;
    long long mult;
};

static int cfg_parse_scaled(const char *s, const struct cfg_unit *units, size_t nunits,
                            int unit_required, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno != 0 || v < 0)
        return -1;
    if (*end == '\0') {
        *out = v;
        return unit_required ? -2 : 0;
    }
    for (size_t i = 0; i < nunits; i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (v > INT64_MAX / units[i].mult)
                return -1;
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

static int cfg_parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

static void cfg_strlist_clear(struct cfg_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static void cfg_strlist_add(struct cfg_strlist *l, const char *s)
{
    l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
    l->v[l->n++] = xstrdup(s);
}

/* A bound in the option's own unit: 90s rather than 90000. */
static void cfg_format_bound(const struct cfg_option *o, long long v, char *out, size_t n)
{
    static const struct cfg_unit durs[] = {{"h", 3600 * SEC}, {"m", 60 * SEC}, {"s", SEC}};
    static const struct cfg_unit sizes[] = {{"GiB", 1024 * MIB}, {"MiB", MIB}, {"KiB", KIB}};
    const struct cfg_unit *u = o->type == T_DURATION ? durs : o->type == T_SIZE ? sizes : NULL;
    for (size_t i = 0; u != NULL && i < 3; i++) {
        if (v != 0 && v % u[i].mult == 0) {
            snprintf(out, n, "%lld%s", v / u[i].mult, u[i].suffix);
            return;
        }
    }
    snprintf(out, n, "%lld%s", v, o->type == T_DURATION ? "ms" : "");
}

/*
 * Store text into the option's field. Returns 0, or -1 with the reason in *why (caller frees).
 * For T_STRLIST a scalar is one item (sequences are added item by item by the caller).
 */
static int cfg_store(const struct cfg_option *o, void *base, const char *text, char **why)
{
    static const struct cfg_unit sizes[] = {
        {"B", 1}, {"KiB", KIB}, {"MiB", MIB}, {"GiB", 1024 * MIB}, {"K", KIB}, {"M", MIB}};
    static const struct cfg_unit durs[] = {
        {"ms", 1}, {"s", SEC}, {"m", 60 * SEC}, {"h", 3600 * SEC}};
    char *field = (char *)base + o->offset;
    long long v = 0;
    int rc = 0;
    const char *bad = NULL; /* why text is refused */

    switch (o->type) {
    case T_STR:
        free(*(char **)field);
        *(char **)field = xstrdup(text);
        return 0;
    case T_LEVEL: {
        enum log_level lvl;
        if (log_level_parse(text, &lvl) != 0) {
            bad = "must be debug, info, warn or error";
            break;
        }
        free(*(char **)field);
        *(char **)field = xstrdup(text);
        return 0;
    }
    case T_STRLIST:
        if (*text != '\0')
            cfg_strlist_add((struct cfg_strlist *)field, text);
        return 0;
    case T_BOOL:
        if (cfg_parse_bool(text, (int *)field) == 0)
            return 0;
        bad = "must be true or false";
        break;
    case T_FRACTION: {
        char *end = NULL;
        errno = 0;
        double d = strtod(text, &end);
        if (errno != 0 || end == text || *end != '\0' || !(d >= 0 && d <= 1)) {
            bad = "must be a number from 0 to 1";
            break;
        }
        *(double *)field = d;
        return 0;
    }
    case T_INT:
        if (util_parse_ll(text, &v) != 0)
            bad = "must be a whole number";
        break;
    case T_SIZE:
        if (cfg_parse_scaled(text, sizes, UTIL_ARRAY_LEN(sizes), 0, &v) != 0)
            bad = "must be a size: a number of bytes, or with KiB, MiB or GiB";
        break;
    case T_DURATION:
        rc = cfg_parse_scaled(text, durs, UTIL_ARRAY_LEN(durs), 1, &v);
        if (rc != 0)
            bad = rc == -2 ? "needs a unit: ms, s, m or h (e.g. 30s)"
                           : "must be a duration such as 250ms, 30s, 5m or 1h";
        break;
    }
    if (bad != NULL) {
        *why = xstrdup(bad);
        return -1;
    }
    if (v < o->min || v > o->max) {
        char lo[32], hi[32];
        cfg_format_bound(o, o->min, lo, sizeof(lo));
        cfg_format_bound(o, o->max, hi, sizeof(hi));
        *why = xasprintf("is out of range: %s to %s", lo, hi);
        return -1;
    }
    *(long *)field = (long)v;
    return 0;
}

/* A list's default is written "a,b,c" (an item given in a file is never split). */
static void cfg_default_list(const struct cfg_option *o, void *base)
{
    char *copy = xstrdup(o->def), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        char *why = NULL;
        cfg_store(o, base, t, &why); /* a list item is never refused */
        free(why);
    }
    free(copy);
}

void cfg_apply_defaults(enum cfg_section section, void *base)
{
    char *why = NULL;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cfg_options); i++) {
        const struct cfg_option *o = &cfg_options[i];
        if (o->section != section || o->def == NULL)
            continue;
        if (o->type == T_STRLIST)
            cfg_default_list(o, base);
        else if (cfg_store(o, base, o->def, &why) != 0) /* a programming error */
            log_fatal("cfg: the default of %s %s", o->name, why);
    }
}

static const struct cfg_option *cfg_option_find(enum cfg_section section, const char *name)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cfg_options); i++) {
        if (cfg_options[i].section == section && strcmp(cfg_options[i].name, name) == 0)
            return &cfg_options[i];
    }
    return NULL;
}

/* Is name a prefix ("server") of some option of this section ("server.listen")? */
static int cfg_is_group(enum cfg_section section, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cfg_options); i++) {
        const struct cfg_option *o = &cfg_options[i];
        if (o->section == section && strncmp(o->name, name, n) == 0 && o->name[n] == '.')
            return 1;
    }
    for (size_t i = 0; section == CFG_SEC_TOP && i < UTIL_ARRAY_LEN(cfg_lists); i++) {
        if (strncmp(cfg_lists[i].name, name, n) == 0 && cfg_lists[i].name[n] == '.')
            return 1;
    }
    return 0;
}

struct cfg *cfg_defaults(void)
{
    struct cfg *cfg = xcalloc(1, sizeof(*cfg));
    cfg->source = xstrdup("(defaults)");
    cfg_apply_defaults(CFG_SEC_TOP, cfg);
    return cfg;
}

/* ---- ${VAR} expansion ---- */

/* Expand ${VAR} and ${VAR:-default} in s. Returns a fresh string, or NULL with *why set. */
static char *cfg_expand_env(const char *s, char **why)
{
    size_t cap = strlen(s) + 1, len = 0;
    char *out = xmalloc(cap);

    while (*s) {
        const char *add = s, *close;
        size_t addlen = 1;
        if (s[0] == '$' && s[1] == '{' && (close = strchr(s + 2, '}')) != NULL) {
            const char *name = s + 2, *dflt = NULL;
            size_t namelen = (size_t)(close - name);
            const char *sep = strstr(name, ":-");
            if (sep != NULL && sep < close) {
                dflt = sep + 2;
                namelen = (size_t)(sep - name);
            }
            char *var = xstrndup(name, namelen);
            const char *val = getenv(var);
            if (val == NULL && dflt == NULL) {
                *why = xasprintf("environment variable %s is not set (use ${%s:-} to allow "
                                 "empty)",
                                 var, var);
                free(var);
                free(out);
                return NULL;
            }
            free(var);
            add = val ? val : dflt;
            addlen = val ? strlen(val) : (size_t)(close - dflt);
            s = close + 1;
        } else {
            s++;
        }
        if (len + addlen + 1 > cap) {
            cap = (len + addlen + 1) * 2;
            out = xrealloc(out, cap);
        }
        memcpy(out + len, add, addlen);
        len += addlen;
    }
    out[len] = '\0';
    return out;
}

/* ---- YAML walking ---- */

struct cfg_loader {
    const char *file;
    yaml_document_t doc;
    char *err;
    char item[64]; /* "upstreams[1]" while inside a list item: names options in errors */
};

__attribute__((format(printf, 4, 5))) static int
cfg_fail(struct cfg_loader *ld, const yaml_node_t *node, const char *opt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    if (ld->err == NULL) {
        int in_item = ld->item[0] != '\0' && opt != NULL;
        ld->err = xasprintf(
            "%s:%lu: %s%s%s%s%s", ld->file, node ? (unsigned long)node->start_mark.line + 1 : 0UL,
            in_item ? ld->item : "", in_item ? "." : "", opt ? opt : "", opt ? ": " : "", msg);
    }
    free(msg);
    return -1;
}

static int cfg_walk_map(struct cfg_loader *ld, yaml_node_t *map, const char *prefix,
                        enum cfg_section section, void *base);

static int cfg_scalar(struct cfg_loader *ld, yaml_node_t *node, const struct cfg_option *o,
                      const char *full, void *base)
{
    char *why = NULL;
    char *text = cfg_expand_env((const char *)node->data.scalar.value, &why);
    if (text == NULL) {
        cfg_fail(ld, node, full, "%s", why);
        free(why);
        return -1;
    }
    int rc = cfg_store(o, base, text, &why);
    if (rc != 0)
        cfg_fail(ld, node, full, "'%s' %s", text, why);
    free(why);
    free(text);
    return rc;
}

static int cfg_option_value(struct cfg_loader *ld, yaml_node_t *val, const struct cfg_option *o,
                            const char *full, void *base)
{
    if (val->type == YAML_SCALAR_NODE)
        return cfg_scalar(ld, val, o, full, base);
    if (val->type != YAML_SEQUENCE_NODE || o->type != T_STRLIST)
        return cfg_fail(ld, val, full, "expected a single value");
    cfg_strlist_clear((struct cfg_strlist *)((char *)base + o->offset));
    for (yaml_node_item_t *it = val->data.sequence.items.start; it < val->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(&ld->doc, *it);
        if (item->type != YAML_SCALAR_NODE)
            return cfg_fail(ld, item, full, "expected a list of names");
        if (cfg_scalar(ld, item, o, full, base) != 0)
            return -1;
    }
    return 0;
}

/* Parse a list section ("upstreams:") into a fresh array of item structs. */
static int cfg_walk_list(struct cfg_loader *ld, yaml_node_t *seq, const struct cfg_list_section *ls,
                         struct cfg *cfg)
{
    char **list = (char **)((char *)cfg + ls->list_offset);
    size_t *count = (size_t *)((char *)cfg + ls->count_offset);

    if (seq->type != YAML_SEQUENCE_NODE)
        return cfg_fail(ld, seq, ls->name, "expected a list");
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *node = yaml_document_get_node(&ld->doc, *it);
        *list = xrealloc(*list, (*count + 1) * ls->item_size);
        char *item = *list + *count * ls->item_size;
        memset(item, 0, ls->item_size);
        (*count)++;
        cfg_apply_defaults(ls->section, item);
        if (node->type == YAML_SCALAR_NODE &&
            (ls->section == CFG_SEC_CLIENT_KEY || ls->section == CFG_SEC_ADMIN_KEY)) {
            /* "- sk-abc" is shorthand for "- key: sk-abc" */
            if (cfg_scalar(ld, node, cfg_option_find(ls->section, "key"), ls->name, item) != 0)
                return -1;
            continue;
        }
        if (node->type != YAML_MAPPING_NODE)
            return cfg_fail(ld, node, ls->name, "each item must be a mapping");
        snprintf(ld->item, sizeof(ld->item), "%s[%zu]", ls->name, *count - 1);
        int rc = cfg_walk_map(ld, node, NULL, ls->section, item);
        ld->item[0] = '\0';
        if (rc != 0)
            return -1;
        for (size_t i = 0; i < UTIL_ARRAY_LEN(cfg_options); i++) {
            const struct cfg_option *o = &cfg_options[i];
            if (o->section == ls->section && o->def == NULL && *(char **)(item + o->offset) == NULL)
                return cfg_fail(ld, node, ls->name, "item is missing '%s'", o->name);
        }
    }
    return 0;
}

static int cfg_walk_pair(struct cfg_loader *ld, yaml_node_t *key, yaml_node_t *val,
                         const char *prefix, enum cfg_section section, void *base)
{
    if (key->type != YAML_SCALAR_NODE)
        return cfg_fail(ld, key, prefix, "keys must be plain names");
    const char *k = (const char *)key->data.scalar.value;
    char *full = prefix ? xasprintf("%s.%s", prefix, k) : xstrdup(k);
    int rc = -1;
    const struct cfg_option *o = cfg_option_find(section, full);

    if (o != NULL) {
        rc = cfg_option_value(ld, val, o, full, base);
        goto out;
    }
    for (size_t i = 0; section == CFG_SEC_TOP && i < UTIL_ARRAY_LEN(cfg_lists); i++) {
        if (strcmp(cfg_lists[i].name, full) == 0) {
            rc = cfg_walk_list(ld, val, &cfg_lists[i], base);
            goto out;
        }
    }
    if (cfg_is_group(section, full) && val->type == YAML_MAPPING_NODE)
        rc = cfg_walk_map(ld, val, full, section, base);
    else
        rc = cfg_fail(ld, key, full, "unknown option (memproxy --options lists them all)");
out:
    free(full);
    return rc;
}

static int cfg_walk_map(struct cfg_loader *ld, yaml_node_t *map, const char *prefix,
                        enum cfg_section section, void *base)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *key = yaml_document_get_node(&ld->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(&ld->doc, p->value);
        if (cfg_walk_pair(ld, key, val, prefix, section, base) != 0)
            return -1;
    }
    return 0;
}

static int cfg_parse_file(struct cfg_loader *ld, FILE *f, struct cfg *cfg)
{
    yaml_parser_t parser;
    int rc = -1;

    yaml_parser_initialize(&parser);
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &ld->doc)) {
        ld->err = xasprintf("%s:%lu: YAML error: %s", ld->file,
                            (unsigned long)parser.problem_mark.line + 1,
                            parser.problem ? parser.problem : "unreadable");
        yaml_parser_delete(&parser);
        return -1;
    }
    yaml_node_t *root = yaml_document_get_root_node(&ld->doc);
    if (root == NULL)
        rc = 0; /* an empty file is all defaults */
    else if (root->type != YAML_MAPPING_NODE)
        rc = cfg_fail(ld, root, NULL, "the top level must be a mapping of options");
    else
        rc = cfg_walk_map(ld, root, NULL, CFG_SEC_TOP, cfg);
    yaml_document_delete(&ld->doc);
    yaml_parser_delete(&parser);
    return rc;
}

static struct cfg *cfg_load_stream(FILE *f, const char *name, char **err)
{
    struct cfg_loader ld = {.file = name};
    struct cfg *cfg = cfg_defaults();
    free(cfg->source);
    cfg->source = xstrdup(name);
    int rc = cfg_parse_file(&ld, f, cfg);
    fclose(f);
    if (rc != 0) {
        *err = ld.err;
        cfg_destroy(cfg);
        return NULL;
    }
    return cfg;
}

struct cfg *cfg_load(const char *path, char **err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *err = xasprintf("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    return cfg_load_stream(f, path, err);
}

struct cfg *cfg_load_text(const char *text, size_t len, const char *name, char **err)
{
    FILE *f = len > 0 ? fmemopen((void *)text, len, "rb") : fopen("/dev/null", "rb");
    if (f == NULL) {
        *err = xasprintf("%s: cannot read: %s", name, strerror(errno));
        return NULL;
    }
    return cfg_load_stream(f, name, err);
}

int cfg_set(struct cfg *cfg, const char *name, const char *value, const char *origin, char **err)
{
    const struct cfg_option *o = cfg_option_find(CFG_SEC_TOP, name);
    char *why = NULL;
    if (o == NULL) {
        *err = xasprintf("%s: unknown option %s", origin, name);
        return -1;
    }
    if (cfg_store(o, cfg, value, &why) != 0) {
        *err = xasprintf("%s: %s: '%s' %s", origin, name, value, why);
        free(why);
        return -1;
    }
    return 0;
}

const struct cfg_profile *cfg_profile_find(const struct cfg *cfg, const char *name, size_t len)
{
    for (size_t i = 0; i < cfg->nprofiles; i++) {
        const char *n = cfg->profiles[i].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return &cfg->profiles[i];
    }
    return NULL;
}

int cfg_parse_listen(const char *listen, char **host, int *port)
{
    const char *colon = strrchr(listen, ':');
    long long p = 0;
    if (colon == NULL || colon == listen || util_parse_ll(colon + 1, &p) != 0 || p < 0 || p > 65535)
        return -1;
    const char *h = listen;
    size_t hlen = (size_t)(colon - listen);
    if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') { /* [::1]:8080 */
        h++;
        hlen -= 2;
    }
    *host = xstrndup(h, hlen);
    *port = (int)p;
    return 0;
}

/* ---- docs, teardown ---- */

void cfg_print_options(FILE *out)
{
    static const char *const types[] = {"string",   "integer", "bool",  "size",
                                        "duration", "list",    "level", "fraction"};
    static const char *const sections[] = {
        "",           "upstreams[].", "profiles[].", "auth.client_keys[].", "auth.admin_keys[].",
        "webhooks[]."};
    fprintf(out, "| option | type | default | help |\n|---|---|---|---|\n");
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cfg_options); i++) {
        const struct cfg_option *o = &cfg_options[i];
        fprintf(out, "| `%s%s` | %s | %s%s%s | %s |\n", sections[o->section], o->name,
                types[o->type], o->def ? "`" : "", o->def ? o->def : "(required)",
                o->def ? "`" : "", o->help);
    }
}

static void cfg_free_fields(enum cfg_section section, void *base)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cfg_options); i++) {
        const struct cfg_option *o = &cfg_options[i];
        if (o->section != section)
            continue;
        char *field = (char *)base + o->offset;
        if (o->type == T_STR || o->type == T_LEVEL)
            free(*(char **)field);
        else if (o->type == T_STRLIST)
            cfg_strlist_clear((struct cfg_strlist *)field);
    }
}

void cfg_destroy(struct cfg *cfg)
{
    if (cfg == NULL)
        return;
    if (cfg->session_id_regex != NULL) /* compiled by cfgcheck */
        regfree(cfg->session_id_regex);
    free(cfg->session_id_regex);
    for (size_t i = 0; i < cfg->ntokenizers; i++) { /* loaded by cfgcheck */
        tiktoken_destroy(cfg->tokenizers[i].tk);
        free(cfg->tokenizers[i].file);
    }
    free(cfg->tokenizers);
    for (size_t i = 0; i < cfg->nupstreams; i++)
        cfg_free_fields(CFG_SEC_UPSTREAM, &cfg->upstreams[i]);
    for (size_t i = 0; i < cfg->nprofiles; i++)
        cfg_free_fields(CFG_SEC_PROFILE, &cfg->profiles[i]);
    for (size_t i = 0; i < cfg->nclient_keys; i++)
        cfg_free_fields(CFG_SEC_CLIENT_KEY, &cfg->client_keys[i]);
    for (size_t i = 0; i < cfg->nadmin_keys; i++)
        cfg_free_fields(CFG_SEC_ADMIN_KEY, &cfg->admin_keys[i]);
    free(cfg->admin_keys);
    for (size_t i = 0; i < cfg->nwebhooks; i++)
        cfg_free_fields(CFG_SEC_WEBHOOK, &cfg->webhooks[i]);
    free(cfg->webhooks);
    free(cfg->upstreams);
    free(cfg->profiles);
    free(cfg->client_keys);
    cfg_free_fields(CFG_SEC_TOP, cfg);
    free(cfg->source);
    free(cfg);
}
