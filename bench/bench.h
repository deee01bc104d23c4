/*
 * bench.h: the two helpers bench/'s programs share (header-only: each is one small program).
 */
#ifndef MEMPROXY_BENCH_H
#define MEMPROXY_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A benchmark that cannot measure stops: what failed, and errno's reason. */
static inline void die(const char *what)
{
    perror(what);
    exit(1);
}

#endif
