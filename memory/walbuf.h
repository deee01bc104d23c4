/*
 * walbuf: an SQLite VFS over the platform's default one ("unix") that hands a transaction's
 * WAL frames to the kernel in one write instead of two per page.
 *
 * Why: SQLite writes each WAL frame with two pwrite calls, its 24-byte header and then the
 * page. A turn recorded in a call dirties three to four pages (the session's leaf of
 * messages, of their unique index, the session's row, the index of recent sessions), so a
 * group commit of eight requests wrote ~31 frames: 62 system calls, 11.7 a request, each
 * ~3 µs on the benchmark's VM — 36 µs of the writer's CPU per request in a sliding window,
 * more than the worker spent on all of its own system calls (bench/syscalls, SLIDE=1).
 *
 * How: the WAL file of a connection opened on this VFS (WALBUF_VFS) keeps the bytes written
 * to consecutive offsets in a buffer (WALBUF_CAP at most) and writes them in one pwrite when
 * the run breaks. Every other file passes straight to the default VFS.
 *
 * Why it is safe: readers, other processes and recovery learn of new frames only from the
 * WAL index header SQLite publishes after it wrote the transaction's commit frame — the frame
 * whose header carries the database size (bytes 4-7, zero in every other frame; SQLite's file
 * format). So the commit frame's page is never held: SQLite writes it right after the frame's
 * header, and it goes out at once with that header and everything before it, in one write
 * (one write a transaction, not two: the reply's commit is what a recorded response's end
 * waits for). By the time xWrite returns for the commit frame's page, the whole transaction
 * is in the file, as without walbuf. One commit header comes without its page: SQLite
 * rewrites the frame headers of a transaction that spilled to the WAL before its commit
 * (their checksums), each just after reading its frame, and publishes the commit after the
 * last, the commit frame's; a commit header that follows a read goes out at once.
 * What stays held is only ever part of a transaction not yet committed, which SQLite
 * itself would discard after a crash (recovery keeps the frames up to the last commit frame
 * whose checksums hold); a failed write of it is reported to SQLite, which rolls that
 * transaction back.
 * The buffer is also written out before any read, sync, truncate, size query, file control
 * or close of the WAL, so SQLite never sees the file without what it wrote.
 *
 * Threads: a connection's files are used by one thread at a time (SQLite's rule), and each
 * WAL file object has its own buffer; walbuf_register() may be called from any thread.
 */
#ifndef MEMPROXY_WALBUF_H
#define MEMPROXY_WALBUF_H

#include <stdint.h>

#define WALBUF_VFS "memproxy-walbuf"
/* A longer run goes out in parts. The unix VFS writes at most 128 KiB - 1 in one call (it
 * masks the length with 0x1ffff, a longer write comes back short, as SQLITE_FULL). */
#define WALBUF_CAP (124 * 1024) /* 30 frames of 4 KiB */

/* Registers the VFS (not as the default), once; 0, or -1 when SQLite has no default VFS. */
int walbuf_register(void);

/* Process-wide counts since start (for tests and the benchmark): WAL writes SQLite asked
 * for, and the writes walbuf made for them. */
struct walbuf_stats {
    uint64_t asked;
    uint64_t made;
};
void walbuf_stats(struct walbuf_stats *out);

#endif
