/*
 * sqlite_ckpt: the WAL's checkpoints on a thread of their own, beside the writer.
 *
 * Why: a checkpoint syncs the WAL, copies its pages into the database and syncs that
 * (synchronous=NORMAL): ~3 ms of fdatasync each on the benchmark's VM, more on a network disk.
 * Run by the writer between groups, it held every commit that came meanwhile: one at a time,
 * a call-shaped client (~4.6 frames a request) met one every ~220 requests, and the reply
 * behind it waited for the disk — half of what stood between the call's p99 and p50
 * (bench/README.md). On its own connection and thread the checkpoint copies what was
 * committed while the writer goes on committing: SQLite lets one checkpointer run beside one
 * writer (WAL mode; the checkpointer takes no writer lock).
 *
 * What it cannot do alone: the WAL starts over from its beginning only when a write
 * transaction begins with every frame copied. A checkpoint copies the frames there were when
 * it began; under steady load the writer appends more while it runs, so the WAL would grow
 * without end. Requests with gaps between them (a voice agent's: a reply every few seconds a
 * call) leave it time to catch up, and the WAL starts over. So the writer still
 * checkpoints itself, between groups, once the WAL holds SQLITE_CKPT_FRAMES_MAX frames (four
 * times where it asks this thread for one): it first has a checkpoint thread copy the bulk
 * while commits go on (by the rule below: the idle one at light load, whose copying of a few
 * thousand pages then takes no CPU a request waits for), then copies what came meanwhile with
 * nothing appending (a sync of a few frames rather than of thousands: ~1-2 ms held rather
 * than 4-6; the syncs of the WAL, the database and the new WAL's header), and the next commit
 * starts the WAL over. Past twice that bound it waits for a pass under way (cutting an idle
 * one, below) and copies the rest itself at once.
 *
 * What the bound trades: a longer WAL costs every commit more. SQLite indexes the WAL's frames
 * by page number in a hash table per 4,096 frames with linear probing, and a page written k
 * times since the WAL started sits k times on one probe chain, which each new frame of that
 * page walks to its end. A call's writes go to the same few pages (the turns' rightmost leaf,
 * its index's, the window's row) in nearly every transaction, so their chains grow with the
 * WAL. At 4,000 frames the index's append costs a call-shaped recorded request ~12k
 * instructions one at a time (callgrind). A lower bound saves part of that but holds the
 * commits more often, which costs the call's p99 more than the instructions are worth
 * (LATENCY=p99 CALL=1 bench/compare; the figures are in commit 0b7d614's message). At 4,000,
 * one call-shaped request in ~620 to ~870 one at a time meets a hold, beyond p99.
 *
 * Ownership: sqlite_ckpt_create() opens its own connection to path and starts the thread;
 * sqlite_ckpt_destroy() stops it, waits for a pass under way, and closes; a thread whose pass
 * cuts another's (sqlite_ckpt_wake_cut) must be destroyed before that one. Both, and the rest,
 * are the writer's to call (sqlite_ckpt_count from any thread).
 */
#ifndef MEMPROXY_SQLITE_CKPT_H
#define MEMPROXY_SQLITE_CKPT_H

#include <sqlite3.h>
#include <stdint.h>

/* Frames in the WAL after a commit at which the checkpointer is asked for a pass (SQLite's own
 * automatic checkpoint's count), and at which the writer runs one itself. */
#define SQLITE_CKPT_FRAMES     1000
#define SQLITE_CKPT_FRAMES_MAX 4000

struct sqlite_ckpt;

/* A thread at SCHED_IDLE when idle, else at its creator's priority. NULL with *err set when
 * the connection cannot be opened or the thread not started. */
struct sqlite_ckpt *sqlite_ckpt_create(const char *path, int idle, char **err);
void sqlite_ckpt_destroy(struct sqlite_ckpt *c);
/* Ask for a pass: 1, or 0 when one is under way (the writer asks again after its next
 * commit). Never waits. */
int sqlite_ckpt_wake(struct sqlite_ckpt *c);
/* The same, the pass first cutting first's (sqlite_ckpt_cut), on c's thread. */
int sqlite_ckpt_wake_cut(struct sqlite_ckpt *c, struct sqlite_ckpt *first);
/* Whether a pass is asked for or under way. Never waits. */
int sqlite_ckpt_busy(struct sqlite_ckpt *c);
/* Wait until no pass is under way (before the writer's own: it must find the lock free). */
void sqlite_ckpt_idle(struct sqlite_ckpt *c);
/* Stop a pass asked for or under way (sqlite3_interrupt: what it copied is copied again by
 * the next) and wait until it has stopped: before the writer's own pass at its hard bound. */
void sqlite_ckpt_cut(struct sqlite_ckpt *c);
/* Passes that succeeded. */
uint64_t sqlite_ckpt_count(struct sqlite_ckpt *c);

/* One PASSIVE checkpoint on db (copies what no reader still needs, never waits for one): 0
 * when it ran, -1 when it failed or was busy. *failing logs a failure once, until one
 * succeeds again (a full disk: the WAL grows until then). */
int sqlite_ckpt_run(sqlite3 *db, int *failing);

#endif
