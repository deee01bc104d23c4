/* Unit tests: a connection string's host names looked up off the loop (memory/pgsql_resolve.c):
 * which strings need a lookup, the host, hostaddr and port lists libpq is then given, and the
 * lookup's thread reporting on the loop, or abandoned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "memory/pgsql_resolve.h"

#include <event2/thread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* db.example: two addresses; one.example: one; other names: no such host. */
static int fake_lookup(const char *name, char addrs[][64], int max, char **err)
{
    int n = 0;
    if (strcmp(name, "db.example") == 0) {
        snprintf(addrs[n++], 64, "10.0.0.1");
        if (max > 1)
            snprintf(addrs[n++], 64, "fd00::1");
        return n;
    }
    if (strcmp(name, "one.example") == 0) {
        snprintf(addrs[n++], 64, "10.0.0.9");
        return n;
    }
    *err = strdup("Name or service not known");
    return -1;
}

static int needed(const char *url, char **hosts, char **ports)
{
    unsetenv("PGHOST");
    unsetenv("PGHOSTADDR");
    unsetenv("PGSERVICE");
    unsetenv("PGPORT");
    return pgsql_resolve_needed(url, hosts, ports);
}

static void test_needed(void **state)
{
    char *hosts, *ports;
    (void)state;
    assert_int_equal(needed("postgresql://memproxy@db.example:5432/mp", &hosts, &ports), 1);
    assert_string_equal(hosts, "db.example");
    assert_null(ports); /* one port for all: the string's own */
    free(hosts);
    assert_int_equal(needed("host=127.0.0.1,db.example port=5432,6432 dbname=mp", &hosts, &ports),
                     1);
    assert_string_equal(hosts, "127.0.0.1,db.example");
    assert_string_equal(ports, "5432,6432");
    free(hosts);
    free(ports);
    /* nothing to look up: addresses, sockets, hostaddr given, a service, no host at all */
    const char *as_is[] = {"postgresql://memproxy@127.0.0.1:5432/mp",
                           "postgresql://memproxy@[::1]:5432/mp",
                           "host=/run/postgresql dbname=mp",
                           "host=db.example hostaddr=10.0.0.1 dbname=mp",
                           "service=mp",
                           "dbname=mp",
                           "postgresql:///mp",
                           "not a = connection string ' "};
    for (size_t i = 0; i < sizeof(as_is) / sizeof(*as_is); i++) {
        assert_int_equal(needed(as_is[i], &hosts, &ports), 0);
        assert_null(hosts);
    }
}

static void test_needed_env(void **state)
{
    char *hosts, *ports;
    (void)state;
    unsetenv("PGHOSTADDR");
    setenv("PGHOST", "db.example", 1);
    assert_int_equal(pgsql_resolve_needed("dbname=mp", &hosts, &ports), 1);
    assert_string_equal(hosts, "db.example");
    free(hosts);
    setenv("PGHOSTADDR", "10.0.0.1", 1); /* libpq connects to it: nothing to look up */
    assert_int_equal(pgsql_resolve_needed("dbname=mp", &hosts, &ports), 0);
    unsetenv("PGHOST");
    unsetenv("PGHOSTADDR");
}

static void test_lists(void **state)
{
    struct pgsql_target t;
    char *err = NULL;
    (void)state;
    /* each address of a name a target of its own, the others as they are */
    assert_int_equal(
        pgsql_resolve_lists("db.example,/run/pg,127.0.0.1", NULL, fake_lookup, &t, &err), 0);
    assert_string_equal(t.host, "db.example,db.example,/run/pg,127.0.0.1");
    assert_string_equal(t.hostaddr, "10.0.0.1,fd00::1,,");
    assert_null(t.port);
    pgsql_target_clear(&t);
    /* a port list follows its hosts' addresses */
    assert_int_equal(pgsql_resolve_lists("one.example,db.example", "6432", fake_lookup, &t, &err),
                     0);
    assert_string_equal(t.host, "one.example,db.example,db.example");
    assert_string_equal(t.hostaddr, "10.0.0.9,10.0.0.1,fd00::1");
    assert_null(t.port); /* one port for all, as libpq reads it: the string's own */
    pgsql_target_clear(&t);
    assert_int_equal(
        pgsql_resolve_lists("one.example,db.example", "6432,5433", fake_lookup, &t, &err), 0);
    assert_string_equal(t.port, "6432,5433,5433");
    pgsql_target_clear(&t);
}

static void test_lists_fail(void **state)
{
    struct pgsql_target t;
    char *err = NULL;
    (void)state;
    assert_int_equal(
        pgsql_resolve_lists("one.example,nowhere.example", NULL, fake_lookup, &t, &err), -1);
    assert_string_equal(err, "Name or service not known");
    assert_null(t.host);
    free(err);
    /* ports that match neither one for all nor one per host: refused as libpq would */
    err = NULL;
    assert_int_equal(
        pgsql_resolve_lists("one.example,db.example,/run/pg", "6432,5433", fake_lookup, &t, &err),
        -1);
    assert_non_null(strstr(err, "port"));
    free(err);
    /* more host entries than the cap: refused, not cut short */
    char many[PGSQL_RESOLVE_MAX_LEN];
    size_t len = 0;
    for (int i = 0; i <= PGSQL_RESOLVE_MAX_ENTRIES; i++)
        len += (size_t)snprintf(many + len, sizeof(many) - len, "%sone.example", i ? "," : "");
    err = NULL;
    assert_int_equal(pgsql_resolve_lists(many, NULL, fake_lookup, &t, &err), -1);
    assert_non_null(strstr(err, "too many"));
    free(err);
}

struct seen {
    int calls;
    char host[128], hostaddr[128], err[256];
    struct event_base *base;
};

static void on_resolved(void *arg, struct pgsql_target *t, const char *err)
{
    struct seen *s = arg;
    s->calls++;
    if (t != NULL) {
        snprintf(s->host, sizeof(s->host), "%s", t->host);
        snprintf(s->hostaddr, sizeof(s->hostaddr), "%s", t->hostaddr);
    } else {
        snprintf(s->err, sizeof(s->err), "%s", err);
    }
    event_base_loopbreak(s->base);
}

/* Run base until a callback came (or 60 s passed: then the assertions after it fail). */
static void run(struct event_base *base)
{
    struct timeval guard = {60, 0};
    event_base_loopexit(base, &guard);
    event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
}

/* The thread's answer arrives on the loop: "localhost" from the hosts file. */
static void test_thread(void **state)
{
    struct seen s = {0};
    (void)state;
    s.base = event_base_new();
    struct pgsql_resolve *r =
        pgsql_resolve_start(strdup("localhost"), NULL, s.base, on_resolved, &s);
    assert_non_null(r);
    run(s.base);
    assert_int_equal(s.calls, 1);
    assert_string_equal(s.host, "localhost");
    assert_true(strstr(s.hostaddr, "127.0.0.1") != NULL || strstr(s.hostaddr, "::1") != NULL);
    /* a name that cannot be: the error comes back instead (".invalid" is reserved) */
    r = pgsql_resolve_start(strdup("memproxy.invalid"), NULL, s.base, on_resolved, &s);
    run(s.base);
    assert_int_equal(s.calls, 2);
    assert_non_null(strstr(s.err, "memproxy.invalid"));
    event_base_free(s.base);
}

/* Abandoned while its thread looks up, and after it is done but before the loop ran its
 * callback: no callback either way, nothing leaked (ASan's run checks). */
static void test_cancel(void **state)
{
    struct seen s = {0};
    (void)state;
    s.base = event_base_new();
    pgsql_resolve_cancel(pgsql_resolve_start(strdup("localhost"), NULL, s.base, on_resolved, &s));
    struct pgsql_resolve *r =
        pgsql_resolve_start(strdup("localhost"), NULL, s.base, on_resolved, &s);
    struct timespec pause = {0, 200000000};
    nanosleep(&pause, NULL); /* done by now, most likely; abandoned while looking up if not */
    pgsql_resolve_cancel(r);
    struct timeval tv = {0, 100000};
    event_base_loopexit(s.base, &tv);
    event_base_loop(s.base, EVLOOP_NO_EXIT_ON_EMPTY);
    assert_int_equal(s.calls, 0);
    pgsql_resolve_cancel(NULL);
    event_base_free(s.base);
}

int main(void)
{
    evthread_use_pthreads(); /* the lookup's thread wakes the loop */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needed), cmocka_unit_test(test_needed_env),
        cmocka_unit_test(test_lists),  cmocka_unit_test(test_lists_fail),
        cmocka_unit_test(test_thread), cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
