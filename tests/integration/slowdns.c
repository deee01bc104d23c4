/* slowdns: a resolver that hangs on demand, for test_pgreads' SlowLookup (LD_PRELOAD).
 *
 * getaddrinfo() of the name in SLOWDNS_NAME answers 127.0.0.1. While the file SLOWDNS_HOLD
 * exists, such a lookup first waits for it to go (two minutes at most), and appends the
 * calling thread's name to SLOWDNS_HOLD.entered: the test learns which thread looked the
 * name up, and whether that thread's other work went on meanwhile. Other names go to the
 * real getaddrinfo. Test code only: never built into memproxy. */
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

typedef int (*slowdns_gai)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

static void slowdns_hold(const char *hold)
{
    char comm[17] = {0}, path[4096];
    const struct timespec tick = {0, 10 * 1000 * 1000};
    prctl(PR_GET_NAME, comm);
    snprintf(path, sizeof(path), "%s.entered", hold);
    FILE *f = fopen(path, "a");
    if (f != NULL) {
        fprintf(f, "%s\n", comm);
        fclose(f);
    }
    for (int i = 0; i < 12000 && access(hold, F_OK) == 0; i++)
        nanosleep(&tick, NULL);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    slowdns_gai real;
    void *sym = dlsym(RTLD_NEXT, "getaddrinfo");
    memcpy(&real, &sym, sizeof(real)); /* POSIX's way from dlsym's pointer to a function's */
    const char *name = getenv("SLOWDNS_NAME"), *hold = getenv("SLOWDNS_HOLD");
    if (node != NULL && name != NULL && strcmp(node, name) == 0) {
        if (hold != NULL && access(hold, F_OK) == 0)
            slowdns_hold(hold);
        node = "127.0.0.1";
    }
    return real(node, service, hints, res);
}
