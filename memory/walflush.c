#include "memory/walflush.h"

#include "base/log.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h> /* sync_file_range: _GNU_SOURCE, set by the build */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WALFLUSH_HEADER 32 /* the WAL file's header */
#define WALFLUSH_FRAME  24 /* each frame's header, before its page */

struct walflush {
    char *path;
    int fd;     /* -1 until the WAL exists (or for good once opening failed otherwise) */
    int failed; /* opening or a writeback failed: logged once, off from then on */
    int64_t after, flushed;
    atomic_uint_fast64_t count;
};

int64_t walflush_end(int64_t frames, int64_t page_size)
{
    return WALFLUSH_HEADER + frames * (WALFLUSH_FRAME + page_size);
}

int walflush_next(int64_t *flushed, int64_t end, int64_t after, int64_t *off, int64_t *len)
{
    if (end < *flushed)
        *flushed = 0; /* the WAL started over: its frames are written from its start again */
    if (after <= 0 || end - *flushed < after)
        return 0;
    *off = *flushed;
    *len = end - *flushed;
    *flushed = end;
    return 1;
}

struct walflush *walflush_create(const char *wal_path, int64_t after)
{
    if (after <= 0)
        return NULL;
    struct walflush *f = xcalloc(1, sizeof(*f));
    f->path = xstrdup(wal_path);
    f->fd = -1;
    f->after = after;
    return f;
}

void walflush_destroy(struct walflush *f)
{
    if (f == NULL)
        return;
    if (f->fd >= 0)
        close(f->fd);
    free(f->path);
    free(f);
}

/* Off from now on, said once: the checkpoints still sync everything, only in bursts. */
static void walflush_fail(struct walflush *f, const char *what)
{
    log_warn("%s: %s: %s; the WAL's writeback is left to the checkpoints", f->path, what,
             strerror(errno));
    f->failed = 1;
}

/* The WAL's descriptor, opened the first time it is needed (the WAL is created by the first
 * write after the database is opened in WAL mode). */
static int walflush_fd(struct walflush *f)
{
    if (f->fd < 0 && !f->failed) {
        f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0 && errno != ENOENT)
            walflush_fail(f, "cannot open the WAL for its writeback");
    }
    return f->fd;
}

void walflush_grown(struct walflush *f, int64_t end)
{
    int64_t off, len;
    if (f == NULL || f->failed || !walflush_next(&f->flushed, end, f->after, &off, &len) ||
        walflush_fd(f) < 0)
        return;
    if (sync_file_range(f->fd, off, len, SYNC_FILE_RANGE_WRITE) != 0) {
        walflush_fail(f, "sync_file_range");
        return;
    }
    atomic_fetch_add_explicit(&f->count, 1, memory_order_relaxed);
}

uint64_t walflush_count(struct walflush *f)
{
    return f != NULL ? atomic_load_explicit(&f->count, memory_order_relaxed) : 0;
}
