#include "proxy/http/auth.h"

#include "base/util.h"

#include <string.h>
#include <strings.h>

const char *auth_bearer(const char *header)
{
    if (header == NULL || strncasecmp(header, "Bearer ", 7) != 0)
        return NULL;
    header += 7;
    while (*header == ' ')
        header++;
    return *header ? header : NULL;
}

/* Constant time over every key, whichever matches first. */
static int auth_match(const struct cfg_client_key *keys, size_t n, const char *header,
                      const struct cfg_client_key **key)
{
    const char *token = auth_bearer(header);
    if (token == NULL)
        return -1;
    size_t tlen = strlen(token);
    int found = -1;
    for (size_t i = 0; i < n; i++) {
        const char *k = keys[i].key;
        if (util_ct_equal(token, tlen, k, strlen(k)) && found < 0)
            found = (int)i;
    }
    if (found < 0)
        return -1;
    *key = &keys[found];
    return 0;
}

int auth_client(const struct cfg *cfg, const char *header, const struct cfg_client_key **key)
{
    if (cfg->nclient_keys == 0) {
        *key = NULL;
        return 0;
    }
    return auth_match(cfg->client_keys, cfg->nclient_keys, header, key);
}

int auth_admin(const struct cfg *cfg, const char *header, const struct cfg_client_key **key)
{
    return auth_match(cfg->admin_keys, cfg->nadmin_keys, header, key);
}

int auth_user_allowed(const struct cfg_client_key *key, const char *user)
{
    if (key == NULL || key->user == NULL || *key->user == '\0')
        return 1;
    if (user == NULL)
        return 0;
    size_t n = strlen(key->user);
    if (key->user[n - 1] == '*')
        return strncmp(user, key->user, n - 1) == 0;
    return strcmp(user, key->user) == 0;
}
