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

/* 0 and *key set (borrowed from cfg; NULL when no client keys are configured: the tenant is
 * "default") when allowed; -1 otherwise. header may be NULL. */
int auth_client(const struct cfg *cfg, const char *header, const struct cfg_client_key **key);

/* The REST API's keys (auth.admin_keys): the same check, but no keys configured means no
 * access, not open access. */
int auth_admin(const struct cfg *cfg, const char *header, const struct cfg_client_key **key);

/* May a request with key act for user (NULL: the request names none)? A key with a user
 * binding (auth.client_keys[].user: "x" or the prefix "x*") must name a user it covers; any
 * other key (or none configured) may act for anyone. */
int auth_user_allowed(const struct cfg_client_key *key, const char *user);

/* The token of "Bearer <token>" (scheme case-insensitive), or NULL. Borrowed from header. */
const char *auth_bearer(const char *header);

#endif
