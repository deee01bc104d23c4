#include "memory/sqlite.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/purge.h"
#include "memory/sqlite_ckpt.h"
#include "memory/sqlite_exec.h"
#include "memory/sqlite_read.h"
#include "memory/sqlite_schema.h"
#include "memory/walbuf.h"
#include "memory/walflush.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* The WAL's checkpoints: past SQLITE_CKPT_FRAMES frames after a commit, the checkpointer
 * thread copies them into the database beside the writer (memory/sqlite_ckpt.h says why);
 * past SQLITE_CKPT_FRAMES_MAX the writer finishes the job itself, between groups, after it
 * has reported its group (sqlite_settle_bound). SQLite's own automatic checkpoint, which the
 * WAL hook replaces on the write connection, would run inside the COMMIT the group's replies
 * wait for. */

/* One chunk of retention's pass (purge.h) in a transaction of its own. */
static int sqlite_purge(void *arg)
{
    struct sqlite_db *st = arg;
    struct purge_pass *pp = &st->purge;
    sqlite3_stmt *s =
        st->stmt[purge_next(pp, st->opts.retention_ms) == 1 ? ST_PURGE : ST_PURGE_OUTBOX];
    json_object_clear(st->sids); /* a purged session's id must not be reused */
    uint64_t t0 = util_now_us();
    long n = -1;
    if (sqlite_exec_run(st, ST_BEGIN) == 0) {
        sqlite3_bind_int64(s, 1, pp->before_ms);
        sqlite3_bind_int64(s, 2, pp->chunk);
        int ok = sqlite_exec_step(st->db, s) == 0;
        n = ok ? sqlite3_changes(st->db) : -1;
        if (sqlite_exec_run(st, ok ? ST_COMMIT : ST_ROLLBACK) != 0)
            n = -1;
    }
    if (purge_done(pp, n, util_now_us() - t0))
        return 1;
    purge_log(pp, st->opts.retention_ms);
    return 0;
}

/* After each commit on the write connection (SQLite calls it with the frames now in the WAL):
 * only noted here, for sqlite_settle. */
static int sqlite_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    struct sqlite_db *st = arg;
    (void)db;
    (void)name;
    st->wal_frames = frames;
    return SQLITE_OK;
}

/* Under load: the writer's groups held more than two batches on average since the last pass
 * was asked. */
static int sqlite_loaded(const struct sqlite_db *st)
{
    return st->ckpt_batches > 2 * st->ckpt_groups;
}

/* The bulk's pass past the bound, as a pass of its own: at light load on the idle thread (its
 * copying of a few thousand pages takes no CPU a request waits for; at the writer's priority it
 * made the requests that came meanwhile share the core with it, measured as the recorded call's
 * p99), under load or while the idle thread's last pass has not ended on the other one, which
 * cuts the idle one's first. Load that comes while the idle thread copies hands the bulk over. */
static void sqlite_bulk_ask(struct sqlite_db *st)
{
    int loaded = sqlite_loaded(st);
    if (st->ckpt_bulk == st->ckpt || (st->ckpt_bulk == st->ckpt_idle && !loaded))
        return; /* asked of the thread that fits */
    if (st->ckpt_bulk == NULL && !loaded && sqlite_ckpt_wake(st->ckpt_idle))
        st->ckpt_bulk = st->ckpt_idle;
    else if (sqlite_ckpt_wake_cut(st->ckpt, st->ckpt_idle))
        st->ckpt_bulk = st->ckpt;
}

/* The WAL past SQLITE_CKPT_FRAMES_MAX (the checkpointers did not keep up: steady load appends
 * while they copy). First a thread copies the bulk while commits go on (sqlite_bulk_ask); once
 * it is done, the writer copies what came meanwhile with nothing appending, so every frame a
 * reader does not hold back is copied and the next commit starts the WAL over. Past twice the
 * bound the writer waits for the second thread's pass under way, cuts the idle one's (at
 * SCHED_IDLE it may not get the CPU the writer keeps busy) and copies the rest at once. A
 * failed one is tried again after the next commit. */
static void sqlite_settle_bound(struct sqlite_db *st)
{
    if (st->wal_frames < 2 * SQLITE_CKPT_FRAMES_MAX &&
        (st->ckpt_bulk == NULL || sqlite_ckpt_busy(st->ckpt_bulk))) {
        sqlite_bulk_ask(st);
        return;
    }
    st->ckpt_bulk = NULL;
    st->wal_frames = 0;
    sqlite_ckpt_cut(st->ckpt_idle); /* it may not get the CPU the writer holds */
    sqlite_ckpt_idle(st->ckpt);
    if (sqlite_ckpt_run(st->db, &st->ckpt_failing) == 0)
        atomic_fetch_add_explicit(&st->n_ckpt, 1, memory_order_relaxed);
}

/* On the writer, with everything committed so far reported. The checkpointer is asked for a
 * pass each SQLITE_CKPT_FRAMES frames the WAL grows, not after every commit: under steady
 * load a pass that asked again at once would copy a few frames and sync the disk for them,
 * one pass every ~3 requests one at a time, and its CPU would be taken from the worker's
 * where they share a core (bench/reference pins them so). */
static int sqlite_settle(void *arg)
{
    struct sqlite_db *st = arg;
    walflush_grown(st->flush, walflush_end(st->wal_frames, st->page_size));
    if (st->wal_frames < SQLITE_CKPT_FRAMES)
        st->ckpt_next = SQLITE_CKPT_FRAMES; /* the WAL started over */
    if (st->wal_frames >= SQLITE_CKPT_FRAMES_MAX) {
        sqlite_settle_bound(st);
    } else if (st->wal_frames >= st->ckpt_next) {
        /* under load (the writer's groups held more than two batches on average since the
         * last pass, or the idle thread's last pass has not ended), the other thread's turn */
        if (sqlite_loaded(st) || !sqlite_ckpt_wake(st->ckpt_idle))
            sqlite_ckpt_wake_cut(st->ckpt, st->ckpt_idle);
        st->ckpt_next = st->wal_frames + SQLITE_CKPT_FRAMES;
        st->ckpt_batches = st->ckpt_groups = 0;
    }
    return 0;
}

/* From any thread (store_drain): the checkpointer's pass asked for or under way is done. */
static void sqlite_settled(void *arg)
{
    struct sqlite_db *st = arg;
    sqlite_ckpt_idle(st->ckpt_idle);
    sqlite_ckpt_idle(st->ckpt);
}

/* Run the batches of list in one transaction: 0 when it committed; -1 when a batch or the
 * commit failed and it was rolled back (the writer's session cache is then forgotten, as it
 * may name rows that are gone). */
static int sqlite_transaction(void *arg, struct store_batch *list)
{
    struct sqlite_db *st = arg;
    int ok = sqlite_exec_run(st, ST_BEGIN) == 0;
    st->ckpt_groups++;
    for (struct store_batch *b = list; ok && b != NULL; b = b->next) {
        sqlite_exec_apply(st, b);
        ok = b->ok;
        st->ckpt_batches++;
    }
    if (ok && sqlite_exec_run(st, ST_COMMIT) == 0)
        return 0;
    sqlite_exec_run(st, ST_ROLLBACK);
    json_object_clear(st->sids);
    return -1;
}

/* Whether the embeddings table holds a row (unknown counts as yes). */
static int sqlite_any_embedding(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    int any = 1;
    if (sqlite3_prepare_v2(db, "SELECT EXISTS (SELECT 1 FROM embeddings)", -1, &s, NULL) ==
            SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        any = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return any;
}

/* The database's page size (a WAL frame holds one page). */
static int64_t sqlite_page_size(sqlite3 *db)
{
    sqlite3_stmt *s = NULL;
    int64_t size = 4096;
    if (sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        size = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return size;
}

/* SQLite's process-wide settings, once, before its first use. Memory statistics off: with
 * them on (the default) every allocation and free SQLite makes takes a global mutex to count
 * it, ~36 lock and unlock pairs per transaction, for figures memproxy never reads. */
static void sqlite_setup(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    sqlite3_initialize();
}

static void sqlite_db_free(struct sqlite_db *st)
{
    sqlite_ckpt_destroy(st->ckpt); /* first: they may be copying */
    sqlite_ckpt_destroy(st->ckpt_idle);
    walflush_destroy(st->flush);
    sqlite_read_close(st->wr);
    for (int i = 0; i < ST__COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    sqlite3_close(st->db);
    json_decref(st->sids);
    free(st->path);
    free(st);
}

/* A new database is made readable by its owner only (0600, whatever the umask): it holds
 * every caller's words. SQLite gives its WAL and shared-memory files the database file's
 * mode. An existing file keeps the mode it has. */
static void sqlite_create_private(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

/* The write connection on walbuf's VFS (walbuf.h: a transaction's WAL frames in one write),
 * its pragmas, migrations, statements and the writer's own reader. */
static void *sqlite_open(const char *path, const struct store_opts *opts, char **err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sqlite_setup);
    struct sqlite_db *st = xcalloc(1, sizeof(*st));
    st->path = xstrdup(path);
    st->opts = *opts;
    if (st->opts.touch_ms <= 0 || st->opts.touch_ms > STORE_TOUCH_MS)
        st->opts.touch_ms = STORE_TOUCH_MS;
    st->sids = json_object();
    sqlite_create_private(path);
    if (sqlite3_open_v2(path, &st->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        walbuf_register() == 0 ? WALBUF_VFS : NULL) != SQLITE_OK) {
        *err = xasprintf("%s: cannot open: %s", path, sqlite3_errmsg(st->db));
        goto fail;
    }
    sqlite3_busy_timeout(st->db, (int)opts->busy_timeout_ms);
    if (sqlite_schema_setup(st->db) != 0) {
        *err = xasprintf("%s: cannot set up: %s", path, sqlite3_errmsg(st->db));
        goto fail;
    }
    if (sqlite_schema_migrate(st->db, err) != 0 || sqlite_schema_prepare(st, err) != 0)
        goto fail;
    st->embedded = sqlite_any_embedding(st->db);
    st->page_size = sqlite_page_size(st->db);
    st->flush = walflush_create(sqlite3_filename_wal(sqlite3_db_filename(st->db, "main")),
                                opts->wal_flush_after); /* the WAL file SQLite writes */
    sqlite3_wal_hook(st->db, sqlite_wal_hook, st);      /* in place of the automatic checkpoint */
    st->ckpt_next = SQLITE_CKPT_FRAMES;
    st->ckpt = sqlite_ckpt_create(path, 0, err);
    if (st->ckpt != NULL)
        st->ckpt_idle = sqlite_ckpt_create(path, 1, err);
    if (st->ckpt == NULL || st->ckpt_idle == NULL)
        goto fail;
    st->wr = xcalloc(1, sizeof(*st->wr));
    st->wr->base.be = &sqlite_backend;
    st->wr->db = st->db;
    if (sqlite_schema_prepare_reader(st->wr) != 0) {
        *err = xasprintf("cannot prepare a statement: %s", sqlite3_errmsg(st->db));
        goto fail;
    }
    return st;
fail:
    sqlite_db_free(st);
    return NULL;
}

static void sqlite_close(void *arg)
{
    if (arg != NULL)
        sqlite_db_free(arg);
}

static void sqlite_checkpoints(void *arg, uint64_t *aside, uint64_t *held)
{
    struct sqlite_db *st = arg;
    *aside = sqlite_ckpt_count(st->ckpt) + sqlite_ckpt_count(st->ckpt_idle);
    *held = atomic_load_explicit(&st->n_ckpt, memory_order_relaxed);
}

static uint64_t sqlite_wal_flushes(void *arg)
{
    return walflush_count(((struct sqlite_db *)arg)->flush);
}

static struct store_reader *sqlite_reader_open(void *arg, char **err)
{
    struct sqlite_reader *r = sqlite_read_open(arg, err);
    if (r == NULL)
        return NULL;
    r->base.be = &sqlite_backend;
    return &r->base;
}

static void sqlite_reader_close(struct store_reader *r)
{
    sqlite_read_close((struct sqlite_reader *)r);
}

const struct store_backend sqlite_backend = {
    .name = "sqlite",
    .open = sqlite_open,
    .close = sqlite_close,
    .transaction = sqlite_transaction,
    .settle = sqlite_settle,
    .settled = sqlite_settled,
    .purge = sqlite_purge,
    .checkpoints = sqlite_checkpoints,
    .wal_flushes = sqlite_wal_flushes,
    .reader_open = sqlite_reader_open,
    .reader_close = sqlite_reader_close,
    .session_get = sqlite_read_session_get,
    .turns = sqlite_read_turns,
    .turns_of = sqlite_read_turns_of,
    .sessions = sqlite_read_sessions,
    .user_memory = sqlite_read_user_memory,
    .deliveries = sqlite_read_deliveries,
    .outbox_due = sqlite_read_outbox_due,
    .outbox_next = sqlite_read_outbox_next,
    .to_summarize = sqlite_read_to_summarize,
    .summary_next = sqlite_read_summary_next,
    .running_to_summarize = sqlite_read_running_to_summarize,
    .cache_get = sqlite_read_cache_get,
    .to_embed = sqlite_read_to_embed,
    .embed_next = sqlite_read_embed_next,
    .recall_embedded = sqlite_read_recall_embedded,
    .recall = sqlite_read_recall,
    .idle_sessions = sqlite_read_idle_sessions,
};
