/*
 * cfg: memproxy's configuration — one options table, loaded from YAML, the environment and
 * command-line flags, validated once at start.
 *
 * Every option lives in the table in cfg.c (name, type, default, bounds, help). The YAML
 * loader, the flag parser, the defaults, `memproxy --options` and docs/configuration.md all
 * come from that table, so an option cannot exist in one place and not another.
 *
 * Scalar values may use ${VAR} or ${VAR:-default}; an unset ${VAR} without a default is an
 * error (a silently empty API key is worse than a refusal to start).
 *
 * Errors name the file, the line and the option: "memproxy.yaml:12: server.workers: ...".
 *
 * Ownership: cfg_load()/cfg_defaults() return a struct cfg the caller frees with
 * cfg_destroy(). After start the struct is read-only and shared by all threads, which is why
 * its fields are public: callers read them directly and never write.
 */
#ifndef MEMPROXY_CFG_H
#define MEMPROXY_CFG_H

#include <stddef.h>
#include <stdio.h>

struct tiktoken;

#define CFG_MAX_FALLBACKS 8

/* Longest upstream base URL accepted (upstream.c appends a path of its own). */
#define CFG_MAX_URL 1024

struct cfg_upstream {
    char *name;
    char *url;     /* base URL up to and including /v1, no trailing slash */
    char *api_key; /* sent upstream as "Authorization: Bearer"; "" sends none */
    long connect_timeout_ms;
    long first_byte_timeout_ms; /* request sent -> response headers; past it: 504 */
    long idle_timeout_ms;       /* no byte from upstream for this long mid-response */
    long total_timeout_ms;      /* whole transfer, including a long stream */
};

struct cfg_strlist {
    char **v;
    size_t n;
};

/* A ranks file loaded with a pattern (base/tiktoken.h), shared by the profiles that name it. */
struct cfg_tokenizer {
    char *file;
    int pattern; /* enum tiktoken_pattern */
    struct tiktoken *tk;
};

struct cfg_profile {
    char *name;
    char *upstream;               /* name of the primary upstream */
    struct cfg_strlist fallbacks; /* tried in order before the first byte reaches the client */
    char *model;                  /* replaces the client's "model" when non-empty */
    struct cfg_strlist system_messages;
    char *history; /* "passthrough" or "stored" */
    struct cfg_strlist transforms;
    char *interruptions; /* "heard", "original" or "annotate" */
    char *annotate_note;
    char *timestamp_format;
    struct cfg_strlist drop_sources;
    long token_budget;          /* 0 = none */
    char *tokenizer_file;       /* "" = tokenizer.file; "none" = characters / 4 */
    char *tokenizer_pattern;    /* "" = tokenizer.pattern */
    long memory_budget;         /* tokens inject_memory may add */
    struct cfg_strlist tenants; /* empty = every tenant's keys may use the profile */
    char *memory_role;          /* role of remembered memory: "system", "developer" or "user" */
    char *fallback_reply;       /* "" = none: the error goes to the client */
    char *runtime_system; /* "replace" or "append": runtime system messages and the client's */
    struct cfg_strlist summary_skip_sources; /* turn sources the summarizer leaves out */
    struct cfg_strlist body_drop, body_keep; /* the standard transform's body fields */
    int context_header;
    int summarize;          /* summaries and facts at stop (docs/design.md §10) */
    char *summarizer_model; /* "" = the profile's model, else the session's last reply's */
    char *summary_prompt;   /* "" = the built-in prompt (memory/summary.h) */
    long summary_wait_ms;   /* a stop's webhook dumps wait this long for the summary */
    long summary_threshold; /* turns added to a running session that make a summary; 0 = none */
    long summary_retry_ms;  /* a failed stopped-session summary is tried again after this */
    int cache;              /* the exact-match answer cache (memory/cache.h) */
    long cache_ttl_ms;
    int retrieval;             /* tri-hybrid retrieval (memory/recall.h) */
    char *retrieval_model;     /* the embedding model */
    long retrieval_timeout_ms; /* a request's lookup waits at most this long */
    long retrieval_recent, retrieval_relevant, retrieval_scan, retrieval_budget;
    double retrieval_importance, retrieval_similarity;
    /* Resolved by validation: the profile's tokenizer (NULL: tokens are characters / 4; one
     * of cfg.tokenizers), and indexes into cfg.upstreams, primary first. */
    const struct tiktoken *tokenizer;
    size_t chain[1 + CFG_MAX_FALLBACKS];
    size_t nchain;
};

struct cfg_client_key {
    char *key;
    char *tenant;
    char *user;        /* client keys: "" = any user id; "x" = only x; "x*" = ids starting x */
    int inject_memory; /* client keys: remembered memory may be injected for its requests */
};

struct cfg_webhook {
    char *url;
    char *secret;
    struct cfg_strlist events; /* "102", "103" */
    char *tenant;              /* "" = every tenant */
    long timeout_ms;
    long max_attempts;
    long backoff_ms, max_backoff_ms;
};

struct cfg {
    char *source; /* file the values came from, or "(defaults)" */

    char *listen;         /* "host:port" */
    long workers;         /* 0 = one per CPU */
    long max_connections; /* 0 = from RLIMIT_NOFILE (server.c) */
    long max_body_size;
    long max_header_size;
    long max_json_depth;
    long max_messages;
    long max_json_nodes;
    long parse_memo; /* bytes of memo per worker; 0 = none */
    long client_timeout_ms;
    long request_timeout_ms;
    long shutdown_timeout_ms;
    long max_client_buffer;
    long max_upstream_response;
    long upstream_max_connections;

    char *log_level;
    char *log_access; /* "text", "json" or "off" */
    int metrics_enabled;

    char *db_path;
    char *db_url; /* PostgreSQL instead of db_path when not empty */
    long statement_timeout_ms;
    long lease_ms;
    long replica_wait_ms; /* storage.replica_wait */
    int prepared_statements;
    long db_pool; /* storage.pool: threads (connections) of the read pool */
    long busy_timeout_ms;
    long commit_delay_us;
    long commit_spin_us;
    long wal_flush_after;
    int sessions_require;
    struct cfg_strlist session_id_fields;
    struct cfg_strlist session_user_fields;
    char *session_id_pattern; /* "" = none */
    void *session_id_regex;   /* regex_t of session_id_pattern (cfgcheck compiles it), or NULL */
    char *tokenizer_file;     /* "" = none: tokens are estimated as characters / 4 */
    char *tokenizer_pattern;  /* "o200k" or "cl100k" */
    struct cfg_tokenizer *tokenizers; /* loaded by cfgcheck: each file and pattern once */
    size_t ntokenizers;
    long ws_session_turns;
    long ws_max_turns;
    long ws_session_bytes; /* memory.session_bytes */
    long ws_max_bytes;     /* memory.max_bytes */
    long retention_days;
    long idle_timeout_ms; /* 0 = never */
    char *agora_secret;   /* "" = notifications refused */
    char *agora_tenant;
    char *agora_session_field;
    long agora_max_age_ms; /* notifications.max_age; 0 = notifyMs not checked */

    int auth_open;     /* auth.open: no client keys on a reachable address is intended */
    char *metrics_key; /* "" = /metrics needs no key */
    int ui_enabled;    /* GET /ui/: the call viewer */
    struct cfg_strlist allowed_hosts; /* empty = any Host header */
    struct cfg_client_key *client_keys;
    size_t nclient_keys;
    struct cfg_client_key *admin_keys; /* the REST API's; same shape */
    size_t nadmin_keys;
    struct cfg_webhook *webhooks;
    size_t nwebhooks;
    struct cfg_upstream *upstreams;
    size_t nupstreams;
    struct cfg_profile *profiles;
    size_t nprofiles;
    size_t default_profile; /* index into profiles */
};

/* A config with every default and nothing else (no upstream, no profile). */
struct cfg *cfg_defaults(void);

/*
 * Read path (YAML) into a fresh config. Returns NULL and sets *err (caller frees) on any
 * error; the message names file:line and option.
 */
struct cfg *cfg_load(const char *path, char **err);

/* The same from text in memory; name stands for the file in errors. */
struct cfg *cfg_load_text(const char *text, size_t len, const char *name, char **err);

/*
 * Set one top-level option by its table name from text, as a flag does. origin names the
 * source in errors (e.g. "--workers"). Returns 0 or -1 with *err set.
 */
int cfg_set(struct cfg *cfg, const char *name, const char *value, const char *origin, char **err);

/* The parts of the config an option belongs to (the options table's sections). */
enum cfg_section {
    CFG_SEC_TOP,
    CFG_SEC_UPSTREAM,
    CFG_SEC_PROFILE,
    CFG_SEC_CLIENT_KEY,
    CFG_SEC_ADMIN_KEY,
    CFG_SEC_WEBHOOK
};

/* For cfgcheck.c: set the table's defaults of section in base (a struct cfg, an upstream, a
 * profile or a webhook). */
void cfg_apply_defaults(enum cfg_section section, void *base);

/* The profile with this name, or NULL. */
const struct cfg_profile *cfg_profile_find(const struct cfg *cfg, const char *name, size_t len);

/* Print the options table as a Markdown table (docs/configuration.md is made from this). */
void cfg_print_options(FILE *out);

/* Parse "host:port" into host (caller frees) and port. 0 or -1. */
int cfg_parse_listen(const char *listen, char **host, int *port);

void cfg_destroy(struct cfg *cfg);

#endif
