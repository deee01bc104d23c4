/*
 * auth: client keys. A request carries "Authorization: Bearer <key>"; the key is compared in
 * constant time against every configured key (all of them, whatever matches first), so
 * response timing says nothing about how much of a key was right. No keys configured means
 * the proxy is open; main warns about that at start.
 *
 * The client's key is never forwarded: the upstream client builds its own Authorization
 * header from the upstream's configured key.
 */
#ifndef MEMPROXY_AUTH_H
#define MEMPROXY_AUTH_H

#include "config/cfg.h"

/* 0 and *tenant set (borrowed from cfg) when allowed; -1 otherwise. header may be NULL. */
int auth_client(const struct cfg *cfg, const char *header, const char **tenant);

/* The REST API's keys (auth.admin_keys): the same check, but no keys configured means no
 * access, not open access. */
int auth_admin(const struct cfg *cfg, const char *header, const char **tenant);

/* The token of "Bearer <token>" (scheme case-insensitive), or NULL. Borrowed from header. */
const char *auth_bearer(const char *header);

#endif
