/*
 * cfgcheck: what comes after the options table is read (cfg.h) — the environment's settings,
 * the --upstream flag, and the rules that span options (names resolved, profiles' upstreams,
 * webhooks, keys). Errors name the option, and the file and line where the option came from.
 */
#ifndef MEMPROXY_CFGCHECK_H
#define MEMPROXY_CFGCHECK_H

#include "config/cfg.h"

/* Point the default profile's primary upstream at url, creating upstream and profile if the
 * config has none (the --upstream flag). */
void cfgcheck_set_upstream_url(struct cfg *cfg, const char *url);

/* Apply MEMPROXY_UPSTREAM_URL, MEMPROXY_LISTEN, MEMPROXY_CLIENT_KEY and MEMPROXY_ADMIN_KEY. (The
 * upstream key from the environment is a default that cfgcheck_validate() fills in.) */
void cfgcheck_apply_env(struct cfg *cfg);

/* Check cross-option rules, resolve names, and fill the first upstream's empty api_key from
 * MEMPROXY_UPSTREAM_API_KEY or OPENAI_API_KEY. 0 or -1 with *err set. */
int cfgcheck_validate(struct cfg *cfg, char **err);

/* Keys and secrets: at least this many bytes, and no placeholder (docs/security.md). */
#define CFGCHECK_MIN_SECRET 16
/* Is the host part of server.listen a loopback address (127.0.0.0/8, ::1, localhost)? */
int cfgcheck_loopback(const char *host);

#endif
