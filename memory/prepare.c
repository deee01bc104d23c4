/* memory_rec_prepare() (memory.h): a recorded request's session entry made current before
 * it is used; on a replica, without the loop waiting for the database. */
#include "base/util.h"
#include "memory/entry.h"
#include "memory/memory.h"
#include "memory/memory_types.h"
#include "memory/readpool.h"
#include "memory/reconcile.h"
#include "memory/turnids.h"
#include "memory/turnlist.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Replicas (a shared store): whether another one wrote the session since e was read (its
 * version in the database is not the one e holds). One read per recorded request; a failed
 * read goes by what e holds. */
static int memory_written_behind(struct memory_rec *rec, struct workset_entry *e)
{
    struct memory *m = rec->rd->m;
    if (!store_shared(m->st))
        return 0;
    int64_t have = workset_check_version(m->ws, e);
    if (have < 0)
        return 0;
    int64_t now = store_session_version(rec->rd->sr, rec->tenant, rec->sid);
    return now >= 0 && now != have;
}

/* No async channel: the check made in place (a shared store only). */
static void memory_prep_in_place(struct memory_rec *rec)
{
    struct workset_entry *e = memory_rec_entry(rec);
    pthread_mutex_lock(&e->mu);
    if (e->loaded && !rec->reload && memory_written_behind(rec, e))
        rec->reload = 1;
    pthread_mutex_unlock(&e->mu);
}

struct memory_prep {
    struct memory_rec *rec;
    void (*cb)(void *arg);
    void *arg;
    int64_t have; /* the version the entry holds */
    uint64_t gen; /* its turns' generation when the read went out */
    int64_t *ids; /* the window's turn ids, while the turns they reach back to are read */
    size_t nids;
    struct event *poll; /* while the entry's own batches are in flight (memory_prep_wait) */
    int64_t waited_us;
    int reads;         /* of the session, dropped because the entry changed meanwhile */
    int64_t behind_us; /* waited for another replica's turns (memory_prep_behind) */
};

static void memory_prep_done(struct memory_prep *p);
static void memory_prep_start(struct memory_prep *p);

/* On a pool thread: the window's turns older than the entry holds (memory_stored_for). */
static void memory_prep_read_reach(struct memory_reader *r, void *arg)
{
    struct memory_prep *p = arg;
    struct memory_rec *rec = p->rec;
    rec->reach = store_turns_of(r->sr, rec->tenant, rec->sid, p->ids, p->nids, MEMORY_MAX_READ);
    if (rec->reach == NULL) /* unanswered: matched against what the entry holds */
        rec->reach = json_array();
}

static void memory_prep_reached(void *arg, int failed)
{
    struct memory_prep *p = arg;
    (void)failed; /* nothing read: reconciled with what the entry holds, as SQLite would be */
    memory_prep_done(p);
}

/* Whether the window's turn ids reach back further than the entry holds (memory_stored_for
 * would read those turns in place): then they are read off the loop first (1). */
static int memory_prep_reach(struct memory_prep *p)
{
    struct memory_rec *rec = p->rec;
    struct workset_entry *e = rec->e;
    if (rec->reached || rec->append || rec->rd->pool == NULL || e == NULL)
        return 0;
    rec->reached = 1;
    pthread_mutex_lock(&e->mu);
    int complete = e->complete;
    pthread_mutex_unlock(&e->mu);
    if (complete) /* it holds the whole session: nothing to reach back to (the common case) */
        return 0;
    struct reconcile_window *w = reconcile_window_read(rec->messages, rec->memo);
    int64_t oldest = reconcile_window_oldest(w);
    pthread_mutex_lock(&e->mu);
    int reach = oldest >= 0 && !turnlist_holds_from(e->turns, oldest);
    pthread_mutex_unlock(&e->mu);
    if (reach)
        p->ids = reconcile_window_turn_ids(w, &p->nids);
    reconcile_window_free(w);
    if (!reach)
        return 0;
    readpool_run(rec->rd->pool, READPOOL_CALL, rec->rd->base, memory_prep_read_reach,
                 memory_prep_reached, p);
    return 1;
}

static int memory_prep_behind(struct memory_prep *p);

static void memory_prep_done(struct memory_prep *p)
{
    if (memory_prep_reach(p))
        return; /* done again once the older turns are read */
    if (memory_prep_behind(p))
        return; /* done again once the turn it speaks of is read, or waited for long enough */
    p->rec->prepared = 1;
    p->cb(p->arg);
    if (p->poll != NULL)
        event_free(p->poll);
    free(p->ids);
    free(p);
}

/* The session as read: into the entry, unless a request of this process wrote the entry
 * while it was read (a barge-in's reply, recorded at the hang-up), or a batch of the entry is
 * still in flight (submitted between memory_prep_start's look and the read: the read may
 * have gone out before its commit). Then neither is whole: the read may lack that write, and
 * the entry lacks what other replicas wrote since it was read (why it is read). Reconciling
 * against it would store the window's turns a second time. So it is prepared again: its own
 * write settles, then it is read again, at most MEMORY_PREP_READS times in all; past that it
 * is used as it is and read by the next request (memory.c's memory_rec_lock: a replica's
 * serving loop never reads in place). A failed read leaves it as it is. */
#define MEMORY_PREP_READS 4
static void memory_prep_loaded(void *arg, const struct store_loaded *l)
{
    struct memory_prep *p = arg;
    struct memory_rec *rec = p->rec;
    struct workset_entry *e = rec->e;
    int again = 0;
    pthread_mutex_lock(&e->mu);
    if (l != NULL && e->gen == p->gen && !workset_in_flight(rec->rd->m->ws, e))
        entry_fill(e, rec->rd->m->ws, l, rec->rd->m->session_turns);
    else if (l != NULL && ++p->reads < MEMORY_PREP_READS)
        again = rec->reload = 1;
    pthread_mutex_unlock(&e->mu);
    if (again)
        memory_prep_start(p);
    else
        memory_prep_done(p);
}

static void memory_prep_load(struct memory_prep *p)
{
    struct memory_rec *rec = p->rec;
    store_async_load(rec->rd->as, rec->tenant, rec->sid, rec->user, rec->rd->m->session_turns,
                     MEMORY_MAX_FACTS, memory_prep_loaded, p);
}

static void memory_prep_versioned(void *arg, int64_t version)
{
    struct memory_prep *p = arg;
    if (version < 0 || version == p->have) /* current (or unknown: go by what it holds) */
        memory_prep_done(p);
    else
        memory_prep_load(p); /* another replica wrote the session since */
}

int memory_rec_warm(struct memory_rec *rec)
{
    if (rec->rd->as == NULL)
        return 0;
    struct workset_entry *e = memory_rec_entry(rec);
    pthread_mutex_lock(&e->mu);
    int warm = e->loaded && !rec->reload;
    pthread_mutex_unlock(&e->mu);
    return warm;
}

static void memory_prep_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    memory_prep_start(arg);
}

/* memory_prep_start again in us microseconds, on the request's loop: 1 when set. */
static int memory_prep_after(struct memory_prep *p, long us)
{
    const struct timeval tv = {0, us};
    if (p->rec->rd->base == NULL)
        return 0;
    if (p->poll == NULL)
        p->poll = event_new(p->rec->rd->base, -1, 0, memory_prep_poll, p);
    return p->poll != NULL && event_add(p->poll, &tv) == 0;
}

/* The entry's own batches are in flight (the previous request's: a barge-in's reply, recorded
 * when the caller hung up, while the next request came at once). Its version can be checked
 * only once they settle: until then another replica's writes go unseen, and a request sent to
 * this replica after one answered by another (a retry, the next turn) was reconciled against
 * turns without them. So wait for them, polled on the loop (they take a commit round trip,
 * about a millisecond), for at most MEMORY_PREP_WAIT_US; past that the entry is used as it
 * is. 1 while waiting. */
#define MEMORY_PREP_POLL_US 200
#define MEMORY_PREP_WAIT_US 50000
static int memory_prep_wait(struct memory_prep *p)
{
    if (p->waited_us >= MEMORY_PREP_WAIT_US || !memory_prep_after(p, MEMORY_PREP_POLL_US))
        return 0;
    p->waited_us += MEMORY_PREP_POLL_US;
    return 1;
}

/* Stored mode: the turn the request's first message (after system ones) speaks of when it is
 * what the caller heard of a reply (an assistant message): its turn id, else (*inferred set)
 * the turn before the request's; else -1. */
static int64_t memory_prep_heard_turn(const struct memory_rec *rec, int *inferred)
{
    size_t i;
    json_t *msg;
    json_array_foreach(rec->messages, i, msg) {
        const char *role = json_string_value(json_object_get(msg, "role"));
        if (role != NULL && strcmp(role, "system") == 0)
            continue;
        if (role == NULL || strcmp(role, "assistant") != 0)
            return -1;
        json_t *turn = json_object_get(msg, "turn_id");
        *inferred = !json_is_integer(turn);
        return *inferred ? rec->turn_id - 1 : json_integer_value(turn);
    }
    return -1;
}

/* Stored mode on replicas: a request that begins with what the caller heard of a reply of a
 * turn the entry has not got to (its newest turn is older). That turn is another replica's,
 * whose question or reply is not committed yet: the caller barged in on a reply that one
 * is still streaming, and the platform's next request came here at once. Recorded now, the
 * heard part would go to the entry's newest turn's reply (replacing what was heard of it), or
 * before the question it answers. So the session is checked again (a version read; read
 * again when it changed) every MEMORY_PREP_BEHIND_TICK_US, for at most storage.replica_wait.
 * Past that (the other replica's commit is slower than that: an overloaded database), a heard
 * part of no turn id is not recorded (rec->heard_unplaced, memory.c's memory_append): the reply it
 * speaks of stays as its replica records it at the hang-up, what memproxy had sent, flagged
 * interrupted; no other turn's reply takes it. Only such requests wait, and when the heard
 * part has no turn id, only where the platform numbers turns one by one (turnids_by_one).
 * 1 while waiting. */
#define MEMORY_PREP_BEHIND_TICK_US 2000
static int memory_prep_behind(struct memory_prep *p)
{
    struct memory_rec *rec = p->rec;
    struct workset_entry *e = rec->e;
    int inferred = 0;
    if (!rec->append || e == NULL || !store_shared(rec->rd->m->st))
        return 0;
    int64_t heard = memory_prep_heard_turn(rec, &inferred);
    if (heard < 1)
        return 0;
    pthread_mutex_lock(&e->mu);
    size_t n = turnlist_size(e->turns);
    int behind = (n ? turnlist_turn_id(e->turns, n - 1) : 0) < heard &&
                 (!inferred || turnids_by_one(e->turns));
    pthread_mutex_unlock(&e->mu);
    if (!behind)
        return 0;
    if (p->behind_us < rec->rd->m->replica_wait_us &&
        memory_prep_after(p, MEMORY_PREP_BEHIND_TICK_US)) {
        p->behind_us += MEMORY_PREP_BEHIND_TICK_US;
        return 1;
    }
    rec->heard_unplaced = inferred;
    return 0;
}

/* The entry's own batches first (memory_prep_wait); then its version checked against the
 * database's (one read), or the session read when the entry is not loaded, is to be read
 * again, or went stale while its batches settled (another replica wrote it meanwhile). */
static void memory_prep_start(struct memory_prep *p)
{
    struct memory_rec *rec = p->rec;
    struct memory *m = rec->rd->m;
    struct workset_entry *e = memory_rec_entry(rec);
    int busy = workset_in_flight(m->ws, e);
    if (busy && memory_prep_wait(p))
        return;
    if (busy) { /* waited long enough: what this process wrote, as it holds it */
        memory_prep_done(p);
        return;
    }
    pthread_mutex_lock(&e->mu);
    int loaded = e->loaded && !rec->reload;
    p->gen = e->gen;
    pthread_mutex_unlock(&e->mu);
    if (loaded && (p->have = workset_check_version(m->ws, e)) < 0)
        loaded = 0; /* stale */
    rec->reload = 0;
    if (loaded)
        store_async_version(rec->rd->as, rec->tenant, rec->sid, memory_prep_versioned, p);
    else
        memory_prep_load(p);
}

void memory_rec_prepare(struct memory_rec *rec, void (*cb)(void *arg), void *arg)
{
    if (rec->rd->as == NULL) { /* reads in place (SQLite; a shared store's: checked here) */
        memory_prep_in_place(rec);
        cb(arg);
        return;
    }
    struct memory_prep *p = xcalloc(1, sizeof(*p));
    *p = (struct memory_prep){.rec = rec, .cb = cb, .arg = arg, .have = -1};
    memory_prep_start(p);
}
