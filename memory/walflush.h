/*
 * walflush: the SQLite WAL's writeback started as the WAL grows, a few hundred KiB at a time,
 * instead of all at once by the checkpoint's sync (PostgreSQL's checkpoint_flush_after and
 * wal_writer_flush_after do the same for its files).
 *
 * Why: with synchronous=NORMAL a commit only writes its frames into the page cache; they reach
 * the disk when a checkpoint syncs the WAL (memory/sqlite_ckpt.h), every SQLITE_CKPT_FRAMES
 * frames: ~4 MiB of WAL written and waited for in one burst. On the benchmark's VM the
 * checkpoints make about half of a recorded call's p99, and those bursts half of that (one
 * call-shaped request at a time: ~770 µs added at p99, 250-350 µs where nothing is
 * checkpointed, ~580 where the passes do not sync; bench/compare LATENCY=p99 CALL=1). Asking
 * the kernel to start writing each 256 KiB as it is committed (sync_file_range with
 * SYNC_FILE_RANGE_WRITE: it starts the writeback and returns, it waits for no disk) leaves a
 * pass's sync little to write: the same bytes reach the disk, spread over the requests. On
 * against off (docs/architecture.md): call-shaped p99 260-290 µs lower, p50 9-16 µs higher.
 *
 * Nothing about durability changes: the writeback started here is what the kernel would do
 * later anyway, the checkpoint still syncs, and a commit never waits for it. The writer calls
 * walflush_grown() after its group's completions are handed over, so no response waits for
 * the system call either.
 *
 * Ownership: walflush_create() opens its own read-only descriptor on the WAL file (lazily:
 * the WAL may not exist yet) and walflush_destroy() closes it. One thread at a time calls
 * walflush_grown() (the writer); walflush_count() from any thread.
 */
#ifndef MEMPROXY_WALFLUSH_H
#define MEMPROXY_WALFLUSH_H

#include <stdint.h>

struct walflush;

/* For the WAL at wal_path, flushing each `after` bytes; NULL when after is 0 (off). */
struct walflush *walflush_create(const char *wal_path, int64_t after);
void walflush_destroy(struct walflush *f);
/* After a commit: the WAL's committed frames now end at byte end (its 32-byte header and
 * frames of 24 bytes + a page each; smaller than before when the WAL started over). */
void walflush_grown(struct walflush *f, int64_t end);
/* Writebacks started (for /metrics). */
uint64_t walflush_count(struct walflush *f);

/* The range to start writing back (pure; walflush_grown's decision, for the unit tests):
 * with the WAL written back from *flushed on, and now ending at end, 1 and [*off, *off + *len)
 * when at least after bytes wait (and *flushed moves to end), else 0. A WAL that started over
 * (end < *flushed) is followed from its start. */
int walflush_next(int64_t *flushed, int64_t end, int64_t after, int64_t *off, int64_t *len);

/* The byte at which frame `frames` ends in a WAL of page_size pages. */
int64_t walflush_end(int64_t frames, int64_t page_size);

#endif
