#include "memory/walbuf.h"

#include "base/util.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define WALBUF_FRAME_HDR 24 /* a WAL frame's header; the WAL's own header is 32 bytes */

_Static_assert(WALBUF_CAP <= 0x1ffff, "the unix VFS writes at most 0x1ffff bytes a call");

struct walbuf_file {
    sqlite3_file base;  /* pMethods = &walbuf_io */
    sqlite3_file *real; /* the default VFS's file, in the same allocation, after this */
    unsigned char *buf; /* held bytes, for the offsets [off, off + len); WALBUF_CAP */
    size_t len;
    sqlite3_int64 off;
    sqlite3_int64 commit_page; /* where the commit frame's page goes, its header held */
    int after_read;            /* the file's last call was a read */
};

/* The default VFS's file follows ours, aligned as SQLite aligns the files it allocates. */
#define WALBUF_REAL_OFFSET ((sizeof(struct walbuf_file) + 7) & ~(size_t)7)

static sqlite3_vfs *walbuf_base;
static sqlite3_vfs walbuf_vfs;
static int walbuf_registered = -1;
static _Atomic uint64_t walbuf_asked, walbuf_made;

static int walbuf_write_through(struct walbuf_file *f, const void *p, int n, sqlite3_int64 off)
{
    atomic_fetch_add_explicit(&walbuf_made, 1, memory_order_relaxed);
    return f->real->pMethods->xWrite(f->real, p, n, off);
}

/* Write out what is held. The buffer is empty afterwards, written or not: what a failed write
 * held belongs to a transaction SQLite is told failed. */
static int walbuf_flush(struct walbuf_file *f)
{
    if (f->len == 0)
        return SQLITE_OK;
    int n = (int)f->len;
    f->len = 0;
    return walbuf_write_through(f, f->buf, n, f->off);
}

/* Hold n bytes for off: after what is held when they follow it and fit, else in place of it. */
static int walbuf_hold(struct walbuf_file *f, const void *p, int n, sqlite3_int64 off)
{
    if (f->len > 0 && off == f->off + (sqlite3_int64)f->len && f->len + (size_t)n <= WALBUF_CAP) {
        memcpy(f->buf + f->len, p, (size_t)n);
        f->len += (size_t)n;
        return SQLITE_OK;
    }
    int rc = walbuf_flush(f);
    if (rc != SQLITE_OK)
        return rc;
    if ((size_t)n > WALBUF_CAP)
        return walbuf_write_through(f, p, n, off);
    if (f->buf == NULL)
        f->buf = xmalloc(WALBUF_CAP);
    memcpy(f->buf, p, (size_t)n);
    f->off = off;
    f->len = (size_t)n;
    return SQLITE_OK;
}

/* A commit frame's header: the database's size in pages after the commit (bytes 4-7), zero in
 * every other frame. */
static int walbuf_commit_header(const void *p, int n)
{
    const unsigned char *h = p;
    return n == WALBUF_FRAME_HDR && (h[4] | h[5] | h[6] | h[7]) != 0;
}

static int walbuf_write(sqlite3_file *pf, const void *p, int n, sqlite3_int64 off)
{
    struct walbuf_file *f = (struct walbuf_file *)pf;
    atomic_fetch_add_explicit(&walbuf_asked, 1, memory_order_relaxed);
    int after_read = f->after_read;
    f->after_read = 0;
    if (off == f->commit_page) { /* the commit frame's page: the transaction's last bytes */
        f->commit_page = -1;
        int rc = walbuf_hold(f, p, n, off); /* after its header, when that is still held */
        return rc != SQLITE_OK ? rc : walbuf_flush(f);
    }
    f->commit_page = -1;
    int rc = walbuf_hold(f, p, n, off);
    if (rc != SQLITE_OK || !walbuf_commit_header(p, n))
        return rc;
    /* Its page is SQLite's next write, and goes out with it. But a commit header written
     * just after a read may be one rewritten in place (a spilled transaction's checksums,
     * recomputed at its commit, each header after a read of its frame), which no page
     * follows: SQLite publishes the commit next. That one goes out at once (and so, to be
     * sure, does any other commit header that follows a read; its page then follows it
     * straight through). */
    f->commit_page = off + n;
    return after_read ? walbuf_flush(f) : SQLITE_OK;
}

static int walbuf_close(sqlite3_file *pf)
{
    struct walbuf_file *f = (struct walbuf_file *)pf;
    int rc = walbuf_flush(f);
    int rc2 = f->real->pMethods->xClose(f->real);
    free(f->buf);
    f->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int walbuf_read(sqlite3_file *pf, void *p, int n, sqlite3_int64 off)
{
    struct walbuf_file *f = (struct walbuf_file *)pf;
    int rc = walbuf_flush(f);
    f->after_read = 1;
    return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, p, n, off);
}

static int walbuf_truncate(sqlite3_file *pf, sqlite3_int64 size)
{
    struct walbuf_file *f = (struct walbuf_file *)pf;
    int rc = walbuf_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int walbuf_sync(sqlite3_file *pf, int flags)
{
    struct walbuf_file *f = (struct walbuf_file *)pf;
    int rc = walbuf_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int walbuf_file_size(sqlite3_file *pf, sqlite3_int64 *size)
{
    struct walbuf_file *f = (struct walbuf_file *)pf;
    int rc = walbuf_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int walbuf_file_control(sqlite3_file *pf, int op, void *arg)
{
    struct walbuf_file *f = (struct walbuf_file *)pf;
    int rc = walbuf_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

/* ---- passed through as they are ---- */

static sqlite3_file *walbuf_real(sqlite3_file *pf)
{
    return ((struct walbuf_file *)pf)->real;
}

static int walbuf_lock(sqlite3_file *pf, int lock)
{
    return walbuf_real(pf)->pMethods->xLock(walbuf_real(pf), lock);
}

static int walbuf_unlock(sqlite3_file *pf, int lock)
{
    return walbuf_real(pf)->pMethods->xUnlock(walbuf_real(pf), lock);
}

static int walbuf_check_reserved(sqlite3_file *pf, int *out)
{
    return walbuf_real(pf)->pMethods->xCheckReservedLock(walbuf_real(pf), out);
}

static int walbuf_sector_size(sqlite3_file *pf)
{
    return walbuf_real(pf)->pMethods->xSectorSize(walbuf_real(pf));
}

static int walbuf_device_characteristics(sqlite3_file *pf)
{
    return walbuf_real(pf)->pMethods->xDeviceCharacteristics(walbuf_real(pf));
}

/* SQLite keeps the WAL index in the database file's shared memory, never in the WAL's; the
 * WAL file has none to offer (version 1 methods). */
static const sqlite3_io_methods walbuf_io = {
    .iVersion = 1,
    .xClose = walbuf_close,
    .xRead = walbuf_read,
    .xWrite = walbuf_write,
    .xTruncate = walbuf_truncate,
    .xSync = walbuf_sync,
    .xFileSize = walbuf_file_size,
    .xLock = walbuf_lock,
    .xUnlock = walbuf_unlock,
    .xCheckReservedLock = walbuf_check_reserved,
    .xFileControl = walbuf_file_control,
    .xSectorSize = walbuf_sector_size,
    .xDeviceCharacteristics = walbuf_device_characteristics,
};

/* A WAL file gets the buffer; every other file is the default VFS's own, in place. */
static int walbuf_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *pf, int flags,
                       int *out_flags)
{
    (void)vfs;
    if ((flags & SQLITE_OPEN_WAL) == 0)
        return walbuf_base->xOpen(walbuf_base, name, pf, flags, out_flags);
    struct walbuf_file *f = (struct walbuf_file *)pf;
    memset(f, 0, sizeof(*f));
    f->real = (sqlite3_file *)((char *)f + WALBUF_REAL_OFFSET);
    f->real->pMethods = NULL;
    f->commit_page = -1;
    int rc = walbuf_base->xOpen(walbuf_base, name, f->real, flags, out_flags);
    if (rc != SQLITE_OK) {
        if (f->real->pMethods != NULL)
            f->real->pMethods->xClose(f->real);
        return rc; /* base.pMethods stays NULL: SQLite will not close it */
    }
    f->base.pMethods = &walbuf_io;
    return SQLITE_OK;
}

/* The default VFS with our open. Its other methods are used as they are: they are given our
 * VFS rather than theirs, which the unix VFS's do not look at. */
static void walbuf_register_once(void)
{
    walbuf_base = sqlite3_vfs_find(NULL);
    if (walbuf_base == NULL)
        return;
    walbuf_vfs = *walbuf_base;
    walbuf_vfs.pNext = NULL;
    walbuf_vfs.zName = WALBUF_VFS;
    walbuf_vfs.szOsFile = (int)(WALBUF_REAL_OFFSET + (size_t)walbuf_base->szOsFile);
    walbuf_vfs.xOpen = walbuf_open;
    walbuf_registered = sqlite3_vfs_register(&walbuf_vfs, 0) == SQLITE_OK ? 0 : -1;
}

int walbuf_register(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, walbuf_register_once);
    return walbuf_registered;
}

void walbuf_stats(struct walbuf_stats *out)
{
    out->asked = atomic_load_explicit(&walbuf_asked, memory_order_relaxed);
    out->made = atomic_load_explicit(&walbuf_made, memory_order_relaxed);
}
