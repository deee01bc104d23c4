/*
 * pgsql_resolve: a connection string's host names looked up off the event loop.
 *
 * Why: libpq's non-blocking connect (PQconnectStartParams, PQconnectPoll) still resolves a
 * host name synchronously, with getaddrinfo, before its first poll. A worker's read
 * connection (pgsql_async) is made, and made again after every outage, on the worker's loop:
 * with `storage.url` naming its server (a Docker or Kubernetes service, a managed database's
 * endpoint), each attempt would stop that worker's chat requests for as long as the lookup
 * takes — seconds, when the resolver is as unreachable as the database. So the names are
 * looked up on a thread of their own, and the connection is made with `hostaddr` set to what
 * they resolved to (libpq then makes no lookup, and still uses `host` for TLS and
 * .pgpass).
 *
 * What is looked up: each entry of the `host` list (from the connection string, else
 * PGHOST) that is a name: not empty, not a socket folder (`/…`, `@…`), not a numeric
 * address. A string that sets `hostaddr` (or PGHOSTADDR) or a `service` is connected to as
 * it is, and so is one without a name to look up. Every address a name has is kept, in the
 * resolver's order (libpq tries them in turn, as it would have), at most
 * PGSQL_RESOLVE_MAX_ADDRS a name.
 *
 * Ownership: pgsql_resolve_start() returns a lookup that ends in exactly one of: its
 * callback on the base's loop (the lookup is freed after it returns), or
 * pgsql_resolve_cancel() on that loop's thread (no callback; the thread finishes alone).
 */
#ifndef MEMPROXY_PGSQL_RESOLVE_H
#define MEMPROXY_PGSQL_RESOLVE_H

#include <event2/event.h>
#include <stddef.h>

#define PGSQL_RESOLVE_MAX_ADDRS   8    /* kept per host name */
#define PGSQL_RESOLVE_MAX_ENTRIES 32   /* host entries in a connection string */
#define PGSQL_RESOLVE_MAX_LEN     4096 /* a host, hostaddr or port list, in and out */

/* The host, hostaddr and port lists to connect with (keys after the connection string's
 * dbname, so that they win over it); port NULL: the string's own. */
struct pgsql_target {
    char *host, *hostaddr, *port;
};
void pgsql_target_clear(struct pgsql_target *t);

/* addrs: name's addresses, numeric, at most max; returns how many, or -1 with *err set
 * (malloc'd). getaddrinfo in production, a fake in the tests. */
typedef int (*pgsql_lookup_fn)(const char *name, char addrs[][64], int max, char **err);
int pgsql_lookup_system(const char *name, char addrs[][64], int max, char **err);

/* Pure: whether url (a libpq connection string or URI) names hosts to look up (1), else 0
 * (connect as it is); with 1, *hosts and *ports are the lists to resolve (malloc'd; *ports
 * NULL when the string sets one port, or none, for all of them). */
int pgsql_resolve_needed(const char *url, char **hosts, char **ports);

/* Resolve the lists of pgsql_resolve_needed with lookup: 0 and *out set, or -1 with *err
 * (the first name that failed, and why). */
int pgsql_resolve_lists(const char *hosts, const char *ports, pgsql_lookup_fn lookup,
                        struct pgsql_target *out, char **err);

/* t: the lists to connect with (valid during the call), or NULL and err when a name did not
 * resolve (or a list grew past its caps). */
typedef void (*pgsql_resolve_cb)(void *arg, struct pgsql_target *t, const char *err);

struct pgsql_resolve;

/* Look up hosts and ports (pgsql_resolve_needed's, taken) on a thread; cb runs on base's
 * loop. base must have been made after evthread_use_pthreads(). */
struct pgsql_resolve *pgsql_resolve_start(char *hosts, char *ports, struct event_base *base,
                                          pgsql_resolve_cb cb, void *arg);
void pgsql_resolve_cancel(struct pgsql_resolve *r);

#endif
