#include "memory/pgsql_resolve.h"

#include "base/log.h"
#include "base/util.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void pgsql_target_clear(struct pgsql_target *t)
{
    free(t->host);
    free(t->hostaddr);
    free(t->port);
    memset(t, 0, sizeof(*t));
}

/* ---- which hosts are names ---- */

/* The next entry of a comma-separated list at *p into buf (cap bytes): 1, or 0 at its end. */
static int pgsql_resolve_next(const char **p, char *buf, size_t cap)
{
    if (*p == NULL)
        return 0;
    const char *comma = strchr(*p, ',');
    size_t len = comma ? (size_t)(comma - *p) : strlen(*p);
    if (len >= cap)
        len = cap - 1; /* the lists are capped at PGSQL_RESOLVE_MAX_LEN before this */
    memcpy(buf, *p, len);
    buf[len] = '\0';
    *p = comma ? comma + 1 : NULL;
    return 1;
}

/* An entry a lookup is for: not empty, not a socket's folder, not a numeric address. */
static int pgsql_resolve_is_name(const char *entry)
{
    unsigned char addr[sizeof(struct in6_addr)];
    if (*entry == '\0' || *entry == '/' || *entry == '@')
        return 0;
    return inet_pton(AF_INET, entry, addr) != 1 && inet_pton(AF_INET6, entry, addr) != 1;
}

/* A connection string's value of key (not empty), else the environment's env, else NULL. */
static const char *pgsql_resolve_opt(const PQconninfoOption *o, const char *key, const char *env)
{
    for (; o->keyword != NULL; o++)
        if (strcmp(o->keyword, key) == 0 && o->val != NULL && *o->val != '\0')
            return o->val;
    const char *v = getenv(env);
    return v != NULL && *v != '\0' ? v : NULL;
}

int pgsql_resolve_needed(const char *url, char **hosts, char **ports)
{
    char *msg = NULL, entry[PGSQL_RESOLVE_MAX_LEN];
    int need = 0;
    *hosts = *ports = NULL;
    PQconninfoOption *o = PQconninfoParse(url, &msg);
    if (o == NULL) { /* libpq says what is wrong with it when connecting */
        PQfreemem(msg);
        return 0;
    }
    const char *host = pgsql_resolve_opt(o, "host", "PGHOST");
    const char *port = pgsql_resolve_opt(o, "port", "PGPORT");
    if (host == NULL || pgsql_resolve_opt(o, "hostaddr", "PGHOSTADDR") != NULL ||
        pgsql_resolve_opt(o, "service", "PGSERVICE") != NULL ||
        strlen(host) >= PGSQL_RESOLVE_MAX_LEN || (port && strlen(port) >= PGSQL_RESOLVE_MAX_LEN))
        goto out;
    for (const char *p = host; !need && pgsql_resolve_next(&p, entry, sizeof(entry));)
        need = pgsql_resolve_is_name(entry);
    if (need) {
        *hosts = xstrdup(host);
        *ports = port != NULL && strchr(port, ',') != NULL ? xstrdup(port) : NULL;
    }
out:
    PQconninfoFree(o);
    return need;
}

/* ---- the lists to connect with ---- */

struct pgsql_list {
    char s[PGSQL_RESOLVE_MAX_LEN];
    size_t len;
    int count;
};

/* Append one entry (empty ones too), after a comma unless first: -1 when too long. */
static int pgsql_list_add(struct pgsql_list *l, const char *entry)
{
    size_t n = strlen(entry), comma = l->count > 0;
    if (l->len + comma + n >= sizeof(l->s))
        return -1;
    if (comma)
        l->s[l->len++] = ',';
    memcpy(l->s + l->len, entry, n + 1);
    l->len += n;
    l->count++;
    return 0;
}

struct pgsql_lists {
    struct pgsql_list host, addr, port;
};

/* One target: its host entry, its address ("": libpq's own, for a socket or a numeric
 * address) and its port (NULL: no port list, the string's one port for all). */
static int pgsql_lists_add(struct pgsql_lists *ls, const char *host, const char *addr,
                           const char *port)
{
    if (pgsql_list_add(&ls->host, host) != 0 || pgsql_list_add(&ls->addr, addr) != 0)
        return -1;
    return port != NULL ? pgsql_list_add(&ls->port, port) : 0;
}

/* Entries in a list. */
static int pgsql_resolve_count(const char *list)
{
    int n = 1;
    for (const char *c = list; (c = strchr(c, ',')) != NULL; c++)
        n++;
    return n;
}

/* Entry i (entry, port) as targets: each address of a name, else itself. */
static int pgsql_resolve_entry(struct pgsql_lists *ls, const char *entry, const char *port,
                               pgsql_lookup_fn lookup, char **err)
{
    char addrs[PGSQL_RESOLVE_MAX_ADDRS][64];
    if (!pgsql_resolve_is_name(entry))
        return pgsql_lists_add(ls, entry, "", port);
    int n = lookup(entry, addrs, PGSQL_RESOLVE_MAX_ADDRS, err);
    if (n <= 0) {
        if (*err == NULL)
            *err = xasprintf("%s: no address", entry);
        return -1;
    }
    for (int k = 0; k < n; k++)
        if (pgsql_lists_add(ls, entry, addrs[k], port) != 0)
            return -1;
    return 0;
}

int pgsql_resolve_lists(const char *hosts, const char *ports, pgsql_lookup_fn lookup,
                        struct pgsql_target *out, char **err)
{
    char entry[PGSQL_RESOLVE_MAX_LEN], port[PGSQL_RESOLVE_MAX_LEN];
    struct pgsql_lists *ls = xcalloc(1, sizeof(*ls));
    const char *p = hosts, *pp;
    int rc = -1, i = 0;
    *err = NULL;
    memset(out, 0, sizeof(*out));
    if (ports != NULL && pgsql_resolve_count(ports) == 1)
        ports = NULL; /* one for all: the string's own */
    if (ports != NULL && pgsql_resolve_count(ports) != pgsql_resolve_count(hosts)) {
        *err = xasprintf("%d port numbers for %d hosts", pgsql_resolve_count(ports),
                         pgsql_resolve_count(hosts));
        goto out;
    }
    pp = ports; /* walked beside the hosts: as many entries (counted above) */
    for (; pgsql_resolve_next(&p, entry, sizeof(entry)); i++) {
        const char *pe = pgsql_resolve_next(&pp, port, sizeof(port)) ? port : NULL;
        if (i >= PGSQL_RESOLVE_MAX_ENTRIES || pgsql_resolve_entry(ls, entry, pe, lookup, err) != 0)
            goto out;
    }
    out->host = xstrdup(ls->host.s);
    out->hostaddr = xstrdup(ls->addr.s);
    out->port = ports != NULL ? xstrdup(ls->port.s) : NULL;
    rc = 0;
out:
    if (rc != 0 && *err == NULL)
        *err = xasprintf("%s: too many hosts or addresses", hosts);
    free(ls);
    return rc;
}

int pgsql_lookup_system(const char *name, char addrs[][64], int max, char **err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(name, NULL, &hints, &res), n = 0;
    if (rc != 0) {
        *err = xasprintf("%s: %s", name, gai_strerror(rc));
        return -1;
    }
    for (struct addrinfo *ai = res; ai != NULL && n < max; ai = ai->ai_next) {
        char buf[64];
        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, buf, sizeof(buf), NULL, 0, NI_NUMERICHOST) !=
            0)
            continue;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = strcmp(addrs[k], buf) == 0;
        if (!seen)
            memcpy(addrs[n++], buf, sizeof(buf));
    }
    freeaddrinfo(res);
    return n;
}

/* ---- the lookup's thread ---- */

struct pgsql_resolve {
    pthread_mutex_t mu;
    int done, abandoned; /* under mu */
    char *hosts, *ports;
    struct pgsql_target t;
    char *err;
    int rc;
    struct event *ev; /* on the base: fired by the thread when done */
    pgsql_resolve_cb cb;
    void *arg;
};

static void pgsql_resolve_free(struct pgsql_resolve *r)
{
    pthread_mutex_destroy(&r->mu);
    free(r->hosts);
    free(r->ports);
    free(r->err);
    pgsql_target_clear(&r->t);
    free(r);
}

/* The loop's half: the callback, then the lookup is gone. */
static void pgsql_resolve_on_done(evutil_socket_t fd, short what, void *arg)
{
    struct pgsql_resolve *r = arg;
    (void)fd;
    (void)what;
    event_free(r->ev);
    if (r->rc == 0)
        r->cb(r->arg, &r->t, NULL);
    else
        r->cb(r->arg, NULL, r->err);
    pgsql_resolve_free(r);
}

/* Tell the loop (unless it gave up on the lookup: then it is this thread's to free). */
static void pgsql_resolve_finish(struct pgsql_resolve *r)
{
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    int gone = r->abandoned;
    if (!gone)
        event_active(r->ev, 0, 0);
    pthread_mutex_unlock(&r->mu);
    if (gone)
        pgsql_resolve_free(r);
}

static void *pgsql_resolve_thread(void *arg)
{
    struct pgsql_resolve *r = arg;
    log_set_thread_name("pg-lookup"); /* not its worker's name, which it would inherit */
    r->rc = pgsql_resolve_lists(r->hosts, r->ports, pgsql_lookup_system, &r->t, &r->err);
    pgsql_resolve_finish(r);
    return NULL;
}

struct pgsql_resolve *pgsql_resolve_start(char *hosts, char *ports, struct event_base *base,
                                          pgsql_resolve_cb cb, void *arg)
{
    struct pgsql_resolve *r = xcalloc(1, sizeof(*r));
    pthread_t th;
    pthread_attr_t attr;
    pthread_mutex_init(&r->mu, NULL);
    r->hosts = hosts;
    r->ports = ports;
    r->cb = cb;
    r->arg = arg;
    r->ev = event_new(base, -1, 0, pgsql_resolve_on_done, r);
    if (r->ev == NULL)
        log_fatal("postgresql: out of memory (event_new)");
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, pgsql_resolve_thread, r) != 0) {
        r->rc = -1; /* reported on the loop as a failed lookup: tried again later */
        r->err = xstrdup("cannot start a thread to look the host up");
        pgsql_resolve_finish(r);
    }
    pthread_attr_destroy(&attr);
    return r;
}

void pgsql_resolve_cancel(struct pgsql_resolve *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    int done = r->done;
    r->abandoned = 1;
    pthread_mutex_unlock(&r->mu);
    event_free(r->ev); /* the thread no longer touches it */
    if (done)
        pgsql_resolve_free(r);
}
