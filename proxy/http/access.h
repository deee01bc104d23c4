/*
 * access: one line per request at info level (log.access: text, json or off). No bodies, no
 * keys. The chat path writes its own line when a chat ends, with the session, user, profile,
 * upstream, model, time to first token and whether the cache answered; every other response
 * is written by respond (proxy/http/respond.h) with what the HTTP layer knows.
 *
 *   access POST /v1/chat/completions 200 ms=142.1 ttft_ms=12.0 bytes=1834 tenant=default
 *          session=room-42 user=1002 profile=default upstream=main model=gpt-4o-mini cache=miss
 *
 * A value with a space or a quote is written as a JSON string; absent ones are left out.
 */
#ifndef MEMPROXY_ACCESS_H
#define MEMPROXY_ACCESS_H

#include "config/cfg.h"

#include <stdint.h>

struct access_line {
    const char *method, *path; /* path: the request's, query left out */
    int status;
    int64_t dur_us, ttft_us; /* < 0: unknown */
    long long bytes;         /* the response body's; < 0: unknown */
    const char *tenant, *session, *user, *profile, *upstream, *model, *cache, *ended;
};

/* Write a's line, unless log.access is off or info is below the log level. */
void access_write(const struct cfg *cfg, const struct access_line *a);

#endif
