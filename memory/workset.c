#include "memory/workset.h"

#include "base/util.h"
#include "memory/turnlist.h"

#include <string.h>

struct workset {
    struct workset_opts o;
    pthread_mutex_t mu; /* the table, the LRU list, and the entries' fields it guards */
    struct workset_entry **buckets;
    size_t nbuckets, nentries, total, total_bytes;
    struct workset_entry *lru_head, *lru_tail;
};

/* ---- the table (m->mu held) ---- */

static uint64_t workset_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void workset_bucket_add(struct workset *m, struct workset_entry *e)
{
    size_t i = e->hash & (m->nbuckets - 1);
    e->hnext = m->buckets[i];
    m->buckets[i] = e;
}

static void workset_grow(struct workset *m)
{
    struct workset_entry **old = m->buckets;
    size_t n = m->nbuckets;
    m->nbuckets *= 2;
    m->buckets = xcalloc(m->nbuckets, sizeof(*m->buckets));
    for (size_t i = 0; i < n; i++) {
        for (struct workset_entry *e = old[i], *next; e != NULL; e = next) {
            next = e->hnext;
            workset_bucket_add(m, e);
        }
    }
    free(old);
}

static void workset_lru_unlink(struct workset *m, struct workset_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        m->lru_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        m->lru_tail = e->prev;
    e->prev = e->next = NULL;
}

static void workset_lru_front(struct workset *m, struct workset_entry *e)
{
    e->next = m->lru_head;
    if (m->lru_head)
        m->lru_head->prev = e;
    m->lru_head = e;
    if (m->lru_tail == NULL)
        m->lru_tail = e;
}

static void workset_entry_free(struct workset_entry *e)
{
    turnlist_destroy(e->turns);
    json_decref(e->inject);
    json_decref(e->params);
    json_decref(e->user_info);
    json_decref(e->system);
    free(e->call_summary);
    free(e->user);
    free(e->profile);
    pthread_mutex_destroy(&e->mu);
    free(e->key);
    free(e);
}

static void workset_remove(struct workset *m, struct workset_entry *e)
{
    struct workset_entry **pp = &m->buckets[e->hash & (m->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    workset_lru_unlink(m, e);
    m->nentries--;
    m->total -= e->counted;
    m->total_bytes -= e->counted_bytes;
    workset_entry_free(e);
}

/* Drop least recently used entries nobody uses until the totals fit. */
static void workset_evict(struct workset *m)
{
    struct workset_entry *e = m->lru_tail;
    while ((m->total > m->o.max_turns || m->total_bytes > m->o.max_bytes) && e != NULL) {
        struct workset_entry *prev = e->prev;
        if (e->refs == 0 && e->pending == 0)
            workset_remove(m, e);
        e = prev;
    }
}

static struct workset_entry *workset_find(struct workset *m, const char *key, uint64_t h)
{
    struct workset_entry *e = m->buckets[h & (m->nbuckets - 1)];
    while (e != NULL && (e->hash != h || strcmp(e->key, key) != 0))
        e = e->hnext;
    return e;
}

struct workset_entry *workset_acquire(struct workset *m, const char *key, int *reload)
{
    uint64_t h = workset_hash(key);
    int64_t now = util_wall_ms();
    pthread_mutex_lock(&m->mu);
    struct workset_entry *e = workset_find(m, key, h);
    if (e == NULL) {
        e = xcalloc(1, sizeof(*e));
        e->key = xstrdup(key);
        e->hash = h;
        e->turns = turnlist_create();
        pthread_mutex_init(&e->mu, NULL);
        if (++m->nentries > m->nbuckets)
            workset_grow(m);
        workset_bucket_add(m, e);
    } else {
        workset_lru_unlink(m, e);
    }
    workset_lru_front(m, e);
    if (m->o.retention_ms > 0 && e->used_ms > 0 && e->used_ms < now - m->o.retention_ms)
        e->stale = 1; /* the database may have purged it meanwhile */
    *reload = e->stale && e->pending == 0;
    if (*reload)
        e->stale = 0;
    e->refs++;
    e->used_ms = now;
    pthread_mutex_unlock(&m->mu);
    return e;
}

void workset_release(struct workset *m, struct workset_entry *e)
{
    pthread_mutex_lock(&m->mu);
    e->refs--;
    workset_evict(m);
    pthread_mutex_unlock(&m->mu);
}

/* e->mu held: keep the newest `keep` of the entry's turns, and of those the newest within the
 * session's bytes. */
static void workset_trim(struct workset *m, struct workset_entry *e, size_t keep)
{
    size_t by_bytes = turnlist_keep_bytes(e->turns, m->o.session_bytes);
    keep = by_bytes < keep ? by_bytes : keep;
    if (turnlist_size(e->turns) <= keep)
        return;
    turnlist_keep_last(e->turns, keep);
    e->complete = 0;
}

/* e->mu held: bound the entry's turns and account for them (at least 1 per entry, so
 * sessions without turns count too). */
void workset_account(struct workset *m, struct workset_entry *e)
{
    workset_trim(m, e, m->o.session_turns);
    size_t n = turnlist_size(e->turns), bytes = turnlist_bytes(e->turns);
    pthread_mutex_lock(&m->mu);
    m->total = m->total - e->counted + (n ? n : 1);
    e->counted = n ? n : 1;
    m->total_bytes = m->total_bytes - e->counted_bytes + bytes;
    e->counted_bytes = bytes;
    workset_evict(m);
    pthread_mutex_unlock(&m->mu);
}

void workset_pending(struct workset *m, struct workset_entry *e)
{
    pthread_mutex_lock(&m->mu);
    e->pending++;
    pthread_mutex_unlock(&m->mu);
}

void workset_settled(struct workset *m, struct workset_entry *e, int ok, const char *key,
                     const char *tenant, int64_t version)
{
    struct workset_entry *forget = NULL;
    pthread_mutex_lock(&m->mu);
    if (e != NULL) {
        e->pending--;
        if (!ok)
            e->stale = 1;
        if (ok && version > 0 && version == e->version + 1)
            e->version = version;
        else if (ok && version > 0 && version != e->version)
            e->stale = 1; /* another replica wrote the session meanwhile */
    }
    if (key != NULL && (forget = workset_find(m, key, workset_hash(key))) != NULL)
        forget->stale = 1; /* read again before its next request */
    size_t tlen = tenant ? strlen(tenant) : 0;
    for (struct workset_entry *x = m->lru_head; tenant != NULL && x != NULL; x = x->next) {
        if (strncmp(x->key, tenant, tlen) == 0 && x->key[tlen] == '\x1f')
            x->stale = 1;
    }
    pthread_mutex_unlock(&m->mu);
}

void workset_set_version(struct workset *m, struct workset_entry *e, int64_t version)
{
    pthread_mutex_lock(&m->mu);
    e->version = version;
    if (e->pending == 0) /* it holds the database's session now: nothing to read again */
        e->stale = 0;
    pthread_mutex_unlock(&m->mu);
}

void workset_mark_stale(struct workset *m, struct workset_entry *e)
{
    pthread_mutex_lock(&m->mu);
    e->stale = 1;
    pthread_mutex_unlock(&m->mu);
}

int64_t workset_check_version(struct workset *m, struct workset_entry *e)
{
    pthread_mutex_lock(&m->mu);
    int64_t v = e->pending == 0 && !e->stale ? e->version : -1;
    pthread_mutex_unlock(&m->mu);
    return v;
}

int workset_in_flight(struct workset *m, struct workset_entry *e)
{
    pthread_mutex_lock(&m->mu);
    int busy = e->pending > 0;
    pthread_mutex_unlock(&m->mu);
    return busy;
}

void workset_counts(struct workset *m, uint64_t *sessions, uint64_t *turns, uint64_t *bytes)
{
    pthread_mutex_lock(&m->mu);
    *sessions = m->nentries;
    *turns = m->total;
    *bytes = m->total_bytes;
    pthread_mutex_unlock(&m->mu);
}

struct workset *workset_create(const struct workset_opts *o)
{
    struct workset *m = xcalloc(1, sizeof(*m));
    m->o = *o;
    m->nbuckets = 1024;
    m->buckets = xcalloc(m->nbuckets, sizeof(*m->buckets));
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void workset_destroy(struct workset *m)
{
    if (m == NULL)
        return;
    while (m->lru_head != NULL)
        workset_remove(m, m->lru_head);
    free(m->buckets);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
