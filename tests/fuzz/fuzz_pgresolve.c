/*
 * Fuzz the reading of storage.url's hosts for the lookup made off the loop (memory/
 * pgsql_resolve.c): which connection strings name a host to look up, and the host, hostaddr
 * and port lists built from the lookup's answers. The lookup is faked from the name: 0 to
 * PGSQL_RESOLVE_MAX_ADDRS addresses by its length, none for names that begin with "x"
 * (a failure). The lists must stay within their caps, keep one address per host entry
 * and one port per host entry when there is a port list, and name every host entry in order.
 */
#include "base/util.h"
#include "fuzz.h"
#include "memory/pgsql_resolve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fuzz_lookup(const char *name, char addrs[][64], int max, char **err)
{
    if (name[0] == 'x') {
        *err = xstrdup("no such host");
        return -1;
    }
    int n = (int)(strlen(name) % (size_t)(max + 1));
    for (int i = 0; i < n; i++)
        snprintf(addrs[i], 64, "10.0.%d.%d", (int)(strlen(name) % 256), i);
    return n;
}

static size_t fuzz_entries(const char *list)
{
    size_t n = 1;
    for (const char *c = list; (c = strchr(c, ',')) != NULL; c++)
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = xmalloc(size + 1), *hosts = NULL, *ports = NULL, *err = NULL;
    memcpy(url, data, size);
    url[size] = '\0';
    if (pgsql_resolve_needed(url, &hosts, &ports)) {
        struct pgsql_target t;
        if (hosts == NULL || strlen(hosts) >= PGSQL_RESOLVE_MAX_LEN)
            abort();
        if (pgsql_resolve_lists(hosts, ports, fuzz_lookup, &t, &err) == 0) {
            size_t n = fuzz_entries(t.host);
            if (err != NULL || strlen(t.host) >= PGSQL_RESOLVE_MAX_LEN ||
                fuzz_entries(t.hostaddr) != n || (t.port != NULL && fuzz_entries(t.port) != n) ||
                n < fuzz_entries(hosts))
                abort();
            pgsql_target_clear(&t);
        } else if (err == NULL) {
            abort();
        }
    } else if (hosts != NULL || ports != NULL) {
        abort();
    }
    free(err);
    free(hosts);
    free(ports);
    free(url);
    return 0;
}
