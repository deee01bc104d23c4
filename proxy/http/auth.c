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
                      const char **tenant)
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
    *tenant = keys[found].tenant;
    return 0;
}

int auth_client(const struct cfg *cfg, const char *header, const char **tenant)
{
    if (cfg->nclient_keys == 0) {
        *tenant = "default";
        return 0;
    }
    return auth_match(cfg->client_keys, cfg->nclient_keys, header, tenant);
}

int auth_admin(const struct cfg *cfg, const char *header, const char **tenant)
{
    return auth_match(cfg->admin_keys, cfg->nadmin_keys, header, tenant);
}
