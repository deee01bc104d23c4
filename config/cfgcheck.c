#include "config/cfgcheck.h"

#include "base/log.h"
#include "base/tiktoken.h"
#include "base/util.h"

#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static struct cfg_upstream *cfgcheck_upstream_add(struct cfg *cfg, const char *name,
                                                  const char *url)
{
    cfg->upstreams = xrealloc(cfg->upstreams, (cfg->nupstreams + 1) * sizeof(*cfg->upstreams));
    struct cfg_upstream *u = &cfg->upstreams[cfg->nupstreams++];
    memset(u, 0, sizeof(*u));
    cfg_apply_defaults(CFG_SEC_UPSTREAM, u);
    u->name = xstrdup(name);
    u->url = xstrdup(url);
    return u;
}

static struct cfg_profile *cfgcheck_profile_add(struct cfg *cfg, const char *name, const char *up)
{
    cfg->profiles = xrealloc(cfg->profiles, (cfg->nprofiles + 1) * sizeof(*cfg->profiles));
    struct cfg_profile *p = &cfg->profiles[cfg->nprofiles++];
    memset(p, 0, sizeof(*p));
    cfg_apply_defaults(CFG_SEC_PROFILE, p);
    p->name = xstrdup(name);
    p->upstream = xstrdup(up);
    return p;
}

static struct cfg_upstream *cfgcheck_upstream_by_name(struct cfg *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        if (strcmp(cfg->upstreams[i].name, name) == 0)
            return &cfg->upstreams[i];
    }
    return NULL;
}

void cfgcheck_set_upstream_url(struct cfg *cfg, const char *url)
{
    if (cfg->nprofiles == 0) {
        if (cfg->nupstreams == 0)
            cfgcheck_upstream_add(cfg, "default", url);
        cfgcheck_profile_add(cfg, "default", cfg->upstreams[0].name);
    }
    const struct cfg_profile *p = cfg_profile_find(cfg, "default", 7);
    if (p == NULL)
        p = &cfg->profiles[0];
    struct cfg_upstream *u = cfgcheck_upstream_by_name(cfg, p->upstream);
    if (u == NULL)
        u = cfgcheck_upstream_add(cfg, p->upstream, url);
    free(u->url);
    u->url = xstrdup(url);
}

/* A key from the environment, tenant "default"; a client key also binds no user (admin keys
 * have no such field: cfg frees what their section lists). */
static void cfgcheck_key_add(struct cfg_client_key **keys, size_t *n, const char *key, int client)
{
    *keys = xrealloc(*keys, (*n + 1) * sizeof(**keys));
    (*keys)[*n] = (struct cfg_client_key){.key = xstrdup(key),
                                          .tenant = xstrdup("default"),
                                          .user = client ? xstrdup("") : NULL,
                                          .inject_memory = 1};
    (*n)++;
}

void cfgcheck_apply_env(struct cfg *cfg)
{
    const char *url = getenv("MEMPROXY_UPSTREAM_URL");
    const char *client = getenv("MEMPROXY_CLIENT_KEY");
    const char *admin = getenv("MEMPROXY_ADMIN_KEY");
    const char *listen = getenv("MEMPROXY_LISTEN");
    const char *db = getenv("MEMPROXY_DATABASE_URL");

    if (url != NULL && *url != '\0')
        cfgcheck_set_upstream_url(cfg, url);
    if (listen != NULL && *listen != '\0') {
        free(cfg->listen);
        cfg->listen = xstrdup(listen);
    }
    if (db != NULL && *db != '\0') {
        free(cfg->db_url);
        cfg->db_url = xstrdup(db);
    }
    if (admin != NULL && *admin != '\0')
        cfgcheck_key_add(&cfg->admin_keys, &cfg->nadmin_keys, admin, 0);
    if (client != NULL && *client != '\0')
        cfgcheck_key_add(&cfg->client_keys, &cfg->nclient_keys, client, 1);
}

__attribute__((format(printf, 3, 4))) static int cfgcheck_invalid(struct cfg *cfg, char **err,
                                                                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    *err = xasprintf("%s: %s", cfg->source, msg);
    free(msg);
    return -1;
}

static int cfgcheck_validate_upstreams(struct cfg *cfg, char **err)
{
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        struct cfg_upstream *u = &cfg->upstreams[i];
        if (strncmp(u->url, "http://", 7) != 0 && strncmp(u->url, "https://", 8) != 0)
            return cfgcheck_invalid(cfg, err,
                                    "upstreams[%s].url: '%s' must start with http:// or "
                                    "https://",
                                    u->name, u->url);
        size_t n = strlen(u->url);
        if (n > CFG_MAX_URL) /* a request's URL is this plus a path, in a bounded buffer */
            return cfgcheck_invalid(cfg, err, "upstreams[%s].url: longer than %d characters",
                                    u->name, CFG_MAX_URL);
        while (n > 0 && u->url[n - 1] == '/')
            u->url[--n] = '\0';
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cfg->upstreams[j].name, u->name) == 0)
                return cfgcheck_invalid(cfg, err, "upstreams: name '%s' is used twice", u->name);
        }
    }
    return 0;
}

static int cfgcheck_check_profile(struct cfg *cfg, struct cfg_profile *p, char **err)
{
    static const char *const modes[] = {"heard", "original", "annotate"};
    int ok = 0;
    if (strcmp(p->history, "passthrough") != 0 && strcmp(p->history, "stored") != 0)
        return cfgcheck_invalid(cfg, err,
                                "profiles[%s].history: '%s' must be passthrough or stored", p->name,
                                p->history);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(modes); i++)
        ok |= strcmp(p->interruptions, modes[i]) == 0;
    if (!ok)
        return cfgcheck_invalid(
            cfg, err, "profiles[%s].interruptions: '%s' must be heard, original or annotate",
            p->name, p->interruptions);
    if (strcmp(p->runtime_system, "replace") != 0 && strcmp(p->runtime_system, "append") != 0)
        return cfgcheck_invalid(cfg, err,
                                "profiles[%s].runtime_system: '%s' must be replace or append",
                                p->name, p->runtime_system);
    if (strcmp(p->memory_role, "system") != 0 && strcmp(p->memory_role, "developer") != 0 &&
        strcmp(p->memory_role, "user") != 0)
        return cfgcheck_invalid(cfg, err,
                                "profiles[%s].memory_role: '%s' must be system, developer or user",
                                p->name, p->memory_role);
    return 0;
}

static int cfgcheck_resolve_profile(struct cfg *cfg, struct cfg_profile *p, char **err)
{
    p->nchain = 0;
    if (cfgcheck_check_profile(cfg, p, err) != 0)
        return -1;
    if (p->fallbacks.n > CFG_MAX_FALLBACKS)
        return cfgcheck_invalid(cfg, err, "profiles[%s].fallbacks: at most %d", p->name,
                                CFG_MAX_FALLBACKS);
    for (size_t i = 0; i <= p->fallbacks.n; i++) {
        const char *name = i == 0 ? p->upstream : p->fallbacks.v[i - 1];
        struct cfg_upstream *u = cfgcheck_upstream_by_name(cfg, name);
        if (u == NULL)
            return cfgcheck_invalid(cfg, err, "profiles[%s]: no upstream named '%s'", p->name,
                                    name);
        p->chain[p->nchain++] = (size_t)(u - cfg->upstreams);
    }
    return 0;
}

/* Why a secret would be guessed, or NULL: a placeholder left in (the example config's
 * "change-me" once worked as a key), or too short to resist guessing. */
static const char *cfgcheck_weak(const char *s)
{
    static const char *const placeholders[] = {"change-me", "changeme", "change_me",  "replace-me",
                                               "your-",     "example",  "placeholder"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(placeholders); i++) {
        if (strcasestr(s, placeholders[i]) != NULL)
            return "is a placeholder";
    }
    return strlen(s) < CFGCHECK_MIN_SECRET ? "is shorter than 16 bytes" : NULL;
}

/* Every key and secret is one: none empty, short or a placeholder. */
static int cfgcheck_secrets(struct cfg *cfg, char **err)
{
    const char *why;
    for (size_t i = 0; i < cfg->nclient_keys; i++)
        if ((why = cfgcheck_weak(cfg->client_keys[i].key)) != NULL)
            return cfgcheck_invalid(cfg, err, "auth.client_keys[%zu].key %s", i, why);
    for (size_t i = 0; i < cfg->nadmin_keys; i++)
        if ((why = cfgcheck_weak(cfg->admin_keys[i].key)) != NULL)
            return cfgcheck_invalid(cfg, err, "auth.admin_keys[%zu].key %s", i, why);
    for (size_t i = 0; i < cfg->nwebhooks; i++)
        if ((why = cfgcheck_weak(cfg->webhooks[i].secret)) != NULL)
            return cfgcheck_invalid(cfg, err, "webhooks[%zu].secret %s", i, why);
    if (*cfg->agora_secret != '\0' && (why = cfgcheck_weak(cfg->agora_secret)) != NULL)
        return cfgcheck_invalid(cfg, err, "notifications.agora_secret %s", why);
    if (*cfg->metrics_key != '\0' && (why = cfgcheck_weak(cfg->metrics_key)) != NULL)
        return cfgcheck_invalid(cfg, err, "metrics.key %s", why);
    return 0;
}

/* The host of an http(s) URL into host (cap bytes), "" when there is none. */
static void cfgcheck_url_host(const char *url, char *host, size_t cap)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = p[0] == '[' ? strcspn(p, "]") + 1 : strcspn(p, ":/?#");
    util_copy(host, cap, p, n);
}

/*
 * The first upstream's empty key from the environment: MEMPROXY_UPSTREAM_API_KEY (memproxy's
 * own, meant for it), else OPENAI_API_KEY — but only when that upstream is OpenAI's: a key set
 * for other tools in the shell must not go to whatever host memproxy is pointed at. Then a
 * key that would cross the network in clear text is said at start.
 */
static void cfgcheck_env_key(struct cfg *cfg)
{
    struct cfg_upstream *u = &cfg->upstreams[0];
    char host[256];
    cfgcheck_url_host(u->url, host, sizeof(host));
    const char *own = getenv("MEMPROXY_UPSTREAM_API_KEY"), *openai = getenv("OPENAI_API_KEY");
    const char *key = own != NULL && *own != '\0' ? own : NULL;
    if (key == NULL && openai != NULL && *openai != '\0') {
        if (strcasecmp(host, "api.openai.com") == 0)
            key = openai;
        else if (*u->api_key == '\0')
            log_info("upstreams[0] (%s) is not api.openai.com: OPENAI_API_KEY is not sent to it "
                     "(set its api_key, or MEMPROXY_UPSTREAM_API_KEY)",
                     host);
    }
    if (key != NULL && *u->api_key == '\0') {
        free(u->api_key);
        u->api_key = xstrdup(key);
    }
    for (size_t i = 0; i < cfg->nupstreams; i++) {
        cfgcheck_url_host(cfg->upstreams[i].url, host, sizeof(host));
        if (*cfg->upstreams[i].api_key != '\0' &&
            strncmp(cfg->upstreams[i].url, "http://", 7) == 0 && !cfgcheck_loopback(host))
            log_warn("upstreams[%zu]: its api_key goes to %s over plain http://, readable on "
                     "the way",
                     i, host);
    }
}

/* sessions.id_pattern compiled once (POSIX extended, one group at least). */
static int cfgcheck_id_pattern(struct cfg *cfg, char **err)
{
    if (*cfg->session_id_pattern == '\0' || cfg->session_id_regex != NULL)
        return 0;
    regex_t *re = xmalloc(sizeof(*re));
    int rc = regcomp(re, cfg->session_id_pattern, REG_EXTENDED);
    if (rc != 0 || re->re_nsub < 1) {
        char why[128] = "it needs a group: (...)";
        if (rc != 0)
            regerror(rc, re, why, sizeof(why));
        if (rc == 0)
            regfree(re);
        free(re);
        return cfgcheck_invalid(cfg, err, "sessions.id_pattern: '%s': %s", cfg->session_id_pattern,
                                why);
    }
    cfg->session_id_regex = re;
    return 0;
}

/* The tokenizer of file and pattern, loaded the first time one asks for it (NULL for file ""
 * or "none"). on names the options in an error: "tokenizer." or "profiles[p].tokenizer_". */
static int cfgcheck_tokenizer_get(struct cfg *cfg, const char *on, const char *file,
                                  const char *pattern_name, const struct tiktoken **out, char **err)
{
    enum tiktoken_pattern pattern;
    char *why = NULL;
    *out = NULL;
    if (tiktoken_pattern_named(pattern_name, &pattern) != 0)
        return cfgcheck_invalid(cfg, err, "%spattern: '%s' must be o200k or cl100k", on,
                                pattern_name);
    if (*file == '\0' || strcmp(file, "none") == 0)
        return 0;
    for (size_t i = 0; i < cfg->ntokenizers; i++) {
        struct cfg_tokenizer *t = &cfg->tokenizers[i];
        if (strcmp(t->file, file) == 0 && t->pattern == (int)pattern) {
            *out = t->tk;
            return 0;
        }
    }
    struct tiktoken *tk = tiktoken_load(file, pattern, &why);
    if (tk == NULL) {
        int rc = cfgcheck_invalid(cfg, err, "%sfile: %s", on, why);
        free(why);
        return rc;
    }
    cfg->tokenizers = xrealloc(cfg->tokenizers, (cfg->ntokenizers + 1) * sizeof(*cfg->tokenizers));
    cfg->tokenizers[cfg->ntokenizers++] =
        (struct cfg_tokenizer){.file = xstrdup(file), .pattern = (int)pattern, .tk = tk};
    *out = tk;
    return 0;
}

/* tokenizer.file, and each profile's own (tokenizer_file, tokenizer_pattern; empty = the
 * top-level one's). Each file and pattern is read once, however many profiles name it. */
static int cfgcheck_tokenizer(struct cfg *cfg, char **err)
{
    const struct tiktoken *top;
    if (cfgcheck_tokenizer_get(cfg, "tokenizer.", cfg->tokenizer_file, cfg->tokenizer_pattern, &top,
                               err) != 0)
        return -1;
    for (size_t i = 0; i < cfg->nprofiles; i++) {
        struct cfg_profile *p = &cfg->profiles[i];
        const char *file = *p->tokenizer_file != '\0' ? p->tokenizer_file : cfg->tokenizer_file;
        const char *pattern =
            *p->tokenizer_pattern != '\0' ? p->tokenizer_pattern : cfg->tokenizer_pattern;
        char *on = xasprintf("profiles[%s].tokenizer_", p->name);
        int rc = cfgcheck_tokenizer_get(cfg, on, file, pattern, &p->tokenizer, err);
        free(on);
        if (rc != 0)
            return -1;
    }
    return 0;
}

int cfgcheck_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
           strcmp(host, "::1") == 0 || strcmp(host, "[::1]") == 0;
}

static int cfgcheck_validate_webhooks(struct cfg *cfg, char **err)
{
    for (size_t i = 0; i < cfg->nwebhooks; i++) {
        const struct cfg_webhook *h = &cfg->webhooks[i];
        if (strncmp(h->url, "http://", 7) != 0 && strncmp(h->url, "https://", 8) != 0)
            return cfgcheck_invalid(cfg, err,
                                    "webhooks[%zu].url: '%s' must start with http:// or "
                                    "https://",
                                    i, h->url);
        if (*h->secret == '\0')
            return cfgcheck_invalid(cfg, err, "webhooks[%zu].secret: must not be empty", i);
        if (h->events.n == 0)
            return cfgcheck_invalid(cfg, err, "webhooks[%zu].events: name at least one event", i);
        for (size_t j = 0; j < h->events.n; j++) {
            if (strcmp(h->events.v[j], "102") != 0 && strcmp(h->events.v[j], "103") != 0)
                return cfgcheck_invalid(cfg, err, "webhooks[%zu].events: '%s' is not 102 or 103", i,
                                        h->events.v[j]);
        }
        for (size_t j = 0; j < i; j++) { /* an entry is its URL and tenant (hook.c) */
            if (strcmp(cfg->webhooks[j].url, h->url) == 0 &&
                strcmp(cfg->webhooks[j].tenant, h->tenant) == 0)
                return cfgcheck_invalid(cfg, err,
                                        "webhooks[%zu]: url '%s' is listed twice for tenant '%s'",
                                        i, h->url, h->tenant);
        }
    }
    return 0;
}

int cfgcheck_validate(struct cfg *cfg, char **err)
{
    char *host = NULL;
    int port = 0;

    if (cfg_parse_listen(cfg->listen, &host, &port) != 0)
        return cfgcheck_invalid(cfg, err, "server.listen: '%s' must be host:port", cfg->listen);
    int open_to_others = !cfgcheck_loopback(host);
    free(host);
    if (open_to_others && cfg->nclient_keys == 0 && !cfg->auth_open)
        return cfgcheck_invalid(
            cfg, err,
            "server.listen: %s is reachable from other hosts and no client key is configured: "
            "anyone could spend the upstream's key. Set auth.client_keys (or "
            "MEMPROXY_CLIENT_KEY), listen on 127.0.0.1, or set auth.open: true",
            cfg->listen);
    if (cfg->nupstreams == 0)
        return cfgcheck_invalid(cfg, err,
                                "no upstream configured: add 'upstreams' to the config, "
                                "or pass --upstream URL (or set MEMPROXY_UPSTREAM_URL)");
    if (cfgcheck_validate_upstreams(cfg, err) != 0)
        return -1;
    cfgcheck_env_key(cfg);
    if (cfg->nprofiles == 0)
        cfgcheck_profile_add(cfg, "default", cfg->upstreams[0].name);
    cfg->default_profile = 0;
    for (size_t i = 0; i < cfg->nprofiles; i++) {
        struct cfg_profile *p = &cfg->profiles[i];
        if (cfgcheck_resolve_profile(cfg, p, err) != 0)
            return -1;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(cfg->profiles[j].name, p->name) == 0)
                return cfgcheck_invalid(cfg, err, "profiles: name '%s' is used twice", p->name);
        }
        if (strcmp(p->name, "default") == 0)
            cfg->default_profile = i;
    }
    if (cfgcheck_secrets(cfg, err) != 0 || cfgcheck_id_pattern(cfg, err) != 0 ||
        cfgcheck_tokenizer(cfg, err) != 0)
        return -1;
    if (strcmp(cfg->log_access, "text") != 0 && strcmp(cfg->log_access, "json") != 0 &&
        strcmp(cfg->log_access, "off") != 0)
        return cfgcheck_invalid(cfg, err, "log.access: '%s' must be text, json or off",
                                cfg->log_access);
    return cfgcheck_validate_webhooks(cfg, err);
}
