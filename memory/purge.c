#include "memory/purge.h"

#include "base/log.h"
#include "base/util.h"

int purge_next(struct purge_pass *p, int64_t retention_ms)
{
    if (p->stage == 0) {
        p->stage = 1;
        p->before_ms = util_wall_ms() - retention_ms;
        p->done[0] = p->done[1] = 0;
        if (p->chunk <= 0)
            p->chunk = 10;
    }
    return p->stage;
}

int purge_done(struct purge_pass *p, long n, uint64_t took_us)
{
    long asked = p->chunk;
    if (n < 0) { /* logged by the backend; tried again at the next pass */
        p->stage = 0;
        return 0;
    }
    p->done[p->stage - 1] += n;
    if (took_us > PURGE_SLOW_US && p->chunk > 1)
        p->chunk /= 2;
    else if (took_us < PURGE_SLOW_US / 4 && n == asked)
        p->chunk = p->chunk * 2 < PURGE_MAX_CHUNK ? p->chunk * 2 : PURGE_MAX_CHUNK;
    if (n < asked && ++p->stage > 2) {
        p->stage = 0;
        return 0;
    }
    return 1;
}

void purge_log(const struct purge_pass *p, int64_t retention_ms)
{
    if (p->done[0] > 0 || p->done[1] > 0)
        log_info("store: retention: deleted %ld session(s) and %ld finished webhook "
                 "deliveries older than %lld day(s)",
                 p->done[0], p->done[1], (long long)(retention_ms / 86400000LL));
}
