/*
 * readpool: reads that would make an event loop wait, run on a few threads of their own.
 *
 * With PostgreSQL every read is a network round trip, and a slow one (a big page of history,
 * a lock, a server far away) would hold every other request of the worker that made it. The
 * chat path's reads have their own non-blocking channel (memory_reader_async); the rest (the
 * REST API's reads, the answer cache, retrieval, a turn-id window reaching back past the
 * working set) are handed to this pool: each thread owns one blocking reader (one database
 * connection), takes jobs in the order they came, runs the job's read with its reader and
 * hands the job back to the event base that asked, where its done callback runs.
 * storage.pool sets the number of threads (docs/deploy.md counts the connections).
 *
 * SQLite needs no pool: its reads come from the page cache in microseconds, so the callers
 * read in place (proxy/http/worker.h, worker_read).
 *
 * Threads: readpool_run from any loop's thread; fn runs on a pool thread and must touch only
 * what the job owns and the reader it is given; done runs on base's thread.
 *
 * Ownership: readpool_create returns a pool freed with readpool_destroy, which runs the jobs
 * still queued, queues their done callbacks on their bases and joins the threads: run those
 * bases once more afterwards. arg stays the caller's.
 */
#ifndef MEMPROXY_READPOOL_H
#define MEMPROXY_READPOOL_H

#include <event2/event.h>
#include <stddef.h>

struct memory;
struct memory_reader;
struct readpool;

/* Which queue a job waits in: a thread takes the call lane's jobs first, so a chat request's
 * read (the answer cache, retrieval, a reach-back) never waits behind a queue of REST reads
 * (a call viewer open on many screens, an export of a long session); within a lane, first in
 * first out. A job already running is not overtaken. */
enum readpool_lane { READPOOL_CALL, READPOOL_REST, READPOOL_LANES };

typedef void (*readpool_fn)(struct memory_reader *r, void *arg);
/* failed: a read of fn went unanswered (memory_reader_failed): what it found looks like
 * "nothing there" and must not be answered as such. */
typedef void (*readpool_done)(void *arg, int failed);

/* threads readers of m, each opened here. NULL with *err set when one cannot be opened. */
struct readpool *readpool_create(struct memory *m, size_t threads, char **err);
void readpool_destroy(struct readpool *p);
/* Queue fn in lane for a pool thread; done(arg, failed) runs on base's thread afterwards. */
void readpool_run(struct readpool *p, enum readpool_lane lane, struct event_base *base,
                  readpool_fn fn, readpool_done done, void *arg);

#endif
