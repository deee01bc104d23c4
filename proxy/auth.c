#include "auth.h"

#include "util.h"

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

int auth_client(const struct cfg *cfg, const char *header, const char **tenant)
{
    if (cfg->nclient_keys == 0) {
        *tenant = "default";
        return 0;
    }
    const char *token = auth_bearer(header);
    if (token == NULL)
        return -1;
    size_t tlen = strlen(token);
    int found = -1;
    for (size_t i = 0; i < cfg->nclient_keys; i++) {
        const char *k = cfg->client_keys[i].key;
        if (util_ct_equal(token, tlen, k, strlen(k)) && found < 0)
            found = (int)i;
    }
    if (found < 0)
        return -1;
    *tenant = cfg->client_keys[found].tenant;
    return 0;
}
