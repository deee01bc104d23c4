/*
 * purge: the pace of retention's deletions (store_backend.h's purge), shared by the backends.
 * A pass deletes the sessions idle past the retention period (their turns by cascade), then
 * the finished webhook deliveries as old, in short transactions, one per call: between two,
 * the writer commits the groups queued meanwhile (store.c), so a reply waits for at most one
 * chunk, never for the pass. A chunk is sized by time, not rows: it halves while a
 * transaction takes longer than PURGE_SLOW_US and doubles while one takes less than a
 * quarter of it, so sessions of thousands of turns are deleted a few at a time; and the
 * writer rests PURGE_PAUSE_MS between two, so the pass takes at most about 70% of it.
 */
#ifndef MEMPROXY_PURGE_H
#define MEMPROXY_PURGE_H

#include <stdint.h>

#define PURGE_SLOW_US   5000 /* a chunk's transaction should take at most about this */
#define PURGE_PAUSE_MS  2    /* and the writer rests this long between two, for the queue */
#define PURGE_MAX_CHUNK 500  /* sessions (or deliveries) per transaction at most */

struct purge_pass {
    int stage;         /* 0: no pass under way; 1: sessions; 2: finished deliveries */
    int64_t before_ms; /* what the pass deletes is older than this */
    long chunk;        /* rows the next transaction deletes at most */
    long done[2];      /* sessions and deliveries deleted so far in this pass */
};

/* The next chunk's DELETE: a pass begun if none is under way (rows older than
 * now - retention_ms); which table (1 sessions, 2 deliveries), before_ms and chunk are in p.
 * Returns the stage. */
int purge_next(struct purge_pass *p, int64_t retention_ms);
/* What the chunk did: n rows (or -1: it failed, the pass ends) in took_us. 1 when the pass
 * goes on (call purge_next again soon), 0 when it is over (p->done says what it deleted). */
int purge_done(struct purge_pass *p, long n, uint64_t took_us);
/* The line a finished pass logs (nothing when it deleted nothing). */
void purge_log(const struct purge_pass *p, int64_t retention_ms);

#endif
