#include "base/jmemo.h"

#include "base/jsize.h"
#include "base/util.h"

#include <string.h>

/* A tree the memo holds (an entry's kept tree or the one derived from it), found by its
 * address: what is known of it. */
struct jmemo_tree {
    struct jmemo_tree *next;   /* the next in its address bucket */
    struct jmemo_entry *owner; /* the entry that holds it */
    json_t *v;
    const char *text; /* its compact text once written (the entry's own bytes when equal) */
    size_t len;
    uint64_t note;
    void *aux; /* jmemo_set_aux()'s, freed by aux_free */
    void (*aux_free)(void *);
};

struct jmemo_entry {
    struct jmemo_entry *chain; /* the next in its bucket */
    struct jmemo_entry *newer; /* the next to go when full */
    uint64_t hash, seed;
    size_t flags, cost;
    size_t len;                      /* of text; 0: held (jmemo_hold), found by address only */
    size_t size;                     /* its text's length: len, or a held tree's estimate */
    size_t nest;                     /* its tree's nesting, as jtext counts it */
    struct jmemo_key next;           /* the text that followed it last time (jmemo_set_next) */
    struct jmemo_tree kept, derived; /* derived.v NULL until set */
    char text[];                     /* len bytes */
};

struct jmemo {
    struct jmemo_entry **buckets;
    struct jmemo_tree **trees; /* by address, as many buckets */
    size_t mask;               /* buckets - 1, a power of two less one */
    struct jmemo_entry *oldest, *newest;
    size_t max_bytes, max_text;
    struct jmemo_stats st;
};

/* Found by its text (jmemo_put), not only held: a JSON object's text is never empty. */
static int jmemo_by_text(const struct jmemo_entry *e)
{
    return e->len > 0;
}

/* An entry's share of the budget: its text, its tree's estimate, its bookkeeping. */
static size_t jmemo_cost(size_t len)
{
    return sizeof(struct jmemo_entry) + len * (1 + JMEMO_TREE_FACTOR);
}

struct jmemo *jmemo_create(size_t max_bytes)
{
    if (max_bytes == 0)
        return NULL;
    struct jmemo *m = xcalloc(1, sizeof(*m));
    size_t n = 64;
    while (n < max_bytes / 1024) /* about one bucket for each entry of a 200-byte message */
        n *= 2;
    m->buckets = xcalloc(n, sizeof(*m->buckets));
    m->trees = xcalloc(n, sizeof(*m->trees));
    m->mask = n - 1;
    m->max_bytes = max_bytes;
    m->max_text = max_bytes / 16 / (1 + JMEMO_TREE_FACTOR);
    return m;
}

/* ---- trees by address ---- */

static struct jmemo_tree **jmemo_tree_bucket(struct jmemo *m, const json_t *v)
{
    uint64_t h = (uint64_t)(uintptr_t)v * 0x9e3779b97f4a7c15ULL;
    return &m->trees[(h >> 32) & m->mask];
}

static void jmemo_tree_link(struct jmemo *m, struct jmemo_tree *t)
{
    struct jmemo_tree **b = jmemo_tree_bucket(m, t->v);
    t->next = *b;
    *b = t;
}

static void jmemo_tree_unlink(struct jmemo *m, struct jmemo_tree *t, const char *own_text)
{
    struct jmemo_tree **pp = jmemo_tree_bucket(m, t->v);
    while (*pp != t)
        pp = &(*pp)->next;
    *pp = t->next;
    if (t->text != own_text)
        free((char *)t->text);
    if (t->aux_free != NULL)
        t->aux_free(t->aux);
    json_decref(t->v);
}

struct jmemo_tree *jmemo_find(struct jmemo *m, const json_t *v)
{
    if (m == NULL || v == NULL)
        return NULL;
    struct jmemo_tree *t = *jmemo_tree_bucket(m, v);
    while (t != NULL && t->v != v)
        t = t->next;
    return t;
}

/* Drop the oldest entry. */
static void jmemo_evict(struct jmemo *m)
{
    struct jmemo_entry *e = m->oldest;
    if (jmemo_by_text(e)) {
        struct jmemo_entry **pp = &m->buckets[e->hash & m->mask];
        while (*pp != e)
            pp = &(*pp)->chain;
        *pp = e->chain;
    }
    m->oldest = e->newer;
    if (m->oldest == NULL)
        m->newest = NULL;
    m->st.entries--;
    m->st.bytes -= e->cost;
    m->st.evictions++;
    if (e->derived.v != NULL)
        jmemo_tree_unlink(m, &e->derived, e->text);
    jmemo_tree_unlink(m, &e->kept, e->text);
    free(e);
}

/* The oldest entries go until all fit the budget again, e itself last. */
static void jmemo_fit(struct jmemo *m, const struct jmemo_entry *e)
{
    while (m->st.bytes > m->max_bytes) {
        int last = m->oldest == e;
        jmemo_evict(m);
        if (last)
            return;
    }
}

/* e now costs cost. */
static void jmemo_charge(struct jmemo *m, struct jmemo_entry *e, size_t cost)
{
    m->st.bytes = m->st.bytes - e->cost + cost;
    e->cost = cost;
    jmemo_fit(m, e);
}

void jmemo_destroy(struct jmemo *m)
{
    if (m == NULL)
        return;
    while (m->oldest != NULL)
        jmemo_evict(m);
    free(m->buckets);
    free(m->trees);
    free(m);
}

/* The entry kept for text of this hash and length, seed and flags; NULL when none (for
 * jmemo_get, also when its bytes differ). */
static struct jmemo_entry *jmemo_entry_of(struct jmemo *m, uint64_t hash, size_t len, uint64_t seed,
                                          size_t flags, const char *text)
{
    for (struct jmemo_entry *e = m->buckets[hash & m->mask]; e != NULL; e = e->chain)
        if (e->hash == hash && e->len == len && e->seed == seed && e->flags == flags &&
            (text == NULL || memcmp(e->text, text, len) == 0))
            return e;
    return NULL;
}

json_t *jmemo_get(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len,
                  struct jmemo_key *key)
{
    uint64_t h = util_hash64(seed, text, len);
    struct jmemo_entry *e = jmemo_entry_of(m, h, len, seed, flags, text);
    if (e == NULL) {
        m->st.misses++;
        return NULL;
    }
    m->st.hits++;
    if (key != NULL)
        *key = (struct jmemo_key){.hash = h, .len = len};
    return e->kept.v;
}

/* The entry a key names, or NULL (no text, or evicted since). */
static struct jmemo_entry *jmemo_entry_at(struct jmemo *m, const struct jmemo_key *k, uint64_t seed,
                                          size_t flags)
{
    return k->len > 0 ? jmemo_entry_of(m, k->hash, k->len, seed, flags, NULL) : NULL;
}

json_t *jmemo_next(struct jmemo *m, const struct jmemo_key *prev, uint64_t seed, size_t flags,
                   const char *text, size_t avail, size_t max_nest, struct jmemo_key *key)
{
    struct jmemo_entry *p = jmemo_entry_at(m, prev, seed, flags);
    struct jmemo_entry *e =
        p != NULL && p->next.len <= avail ? jmemo_entry_at(m, &p->next, seed, flags) : NULL;
    if (e == NULL || e->nest > max_nest || memcmp(e->text, text, e->len) != 0)
        return NULL;
    m->st.hits++;
    *key = p->next;
    return e->kept.v;
}

void jmemo_set_next(struct jmemo *m, const struct jmemo_key *prev, uint64_t seed, size_t flags,
                    const struct jmemo_key *next)
{
    struct jmemo_entry *p = jmemo_entry_at(m, prev, seed, flags);
    if (p != NULL)
        p->next = *next;
}

/* e, filled in, becomes the newest entry. */
static void jmemo_add(struct jmemo *m, struct jmemo_entry *e)
{
    e->kept.owner = e;
    jmemo_tree_link(m, &e->kept);
    if (jmemo_by_text(e)) {
        e->chain = m->buckets[e->hash & m->mask];
        m->buckets[e->hash & m->mask] = e;
    }
    if (m->newest != NULL)
        m->newest->newer = e;
    else
        m->oldest = e;
    m->newest = e;
    m->st.entries++;
    m->st.bytes += e->cost;
    jmemo_fit(m, e); /* the older ones make room: e fits (at most max_text) */
}

void jmemo_put(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len,
               json_t *v, size_t nest, struct jmemo_key *key)
{
    *key = (struct jmemo_key){0};
    if (len > m->max_text || jmemo_find(m, v) != NULL)
        return;
    /* the tree as it is, not as its text suggests: a text of small values is a large tree */
    size_t cost = sizeof(struct jmemo_entry) + len + jsize_tree(v);
    if (cost > m->max_bytes / 16)
        return;
    struct jmemo_entry *e = xmalloc(sizeof(*e) + len);
    *e = (struct jmemo_entry){.hash = util_hash64(seed, text, len),
                              .seed = seed,
                              .flags = flags,
                              .len = len,
                              .cost = cost,
                              .size = len,
                              .nest = nest,
                              .kept = {.v = json_incref(v)}};
    memcpy(e->text, text, len);
    *key = (struct jmemo_key){.hash = e->hash, .len = len};
    jmemo_add(m, e);
}

void jmemo_hold(struct jmemo *m, json_t *v, size_t size)
{
    if (m == NULL || v == NULL || size > m->max_text || jmemo_find(m, v) != NULL)
        return;
    size_t cost = jmemo_cost(size);
    struct jmemo_entry *e = xmalloc(sizeof(*e));
    *e = (struct jmemo_entry){.cost = cost, .size = size, .kept = {.v = json_incref(v)}};
    jmemo_add(m, e);
}

json_t *jmemo_derived(const struct jmemo_tree *t)
{
    return t != NULL && t == &t->owner->kept ? t->owner->derived.v : NULL;
}

void jmemo_set_derived(struct jmemo *m, struct jmemo_tree *t, json_t *d)
{
    if (t == NULL || d == NULL || jmemo_find(m, d) != NULL)
        return;
    struct jmemo_entry *e = t->owner;
    if (t != &e->kept || e->derived.v != NULL)
        return; /* t is itself derived, or has its derived tree already */
    e->derived = (struct jmemo_tree){.owner = e, .v = json_incref(d)};
    jmemo_tree_link(m, &e->derived);
    jmemo_charge(m, e, e->cost + e->size); /* a new object sharing its values: about its text */
}

const char *jmemo_text(const struct jmemo_tree *t, size_t *len)
{
    if (t == NULL || t->text == NULL)
        return NULL;
    *len = t->len;
    return t->text;
}

void jmemo_set_text(struct jmemo *m, struct jmemo_tree *t, const char *text, size_t len)
{
    if (t == NULL || t->text != NULL || len > m->max_text)
        return;
    struct jmemo_entry *e = t->owner;
    t->len = len;
    if (t == &e->kept && len == e->len && memcmp(text, e->text, len) == 0) {
        t->text = e->text; /* the bytes it was read from were compact already */
        return;
    }
    char *copy = xmalloc(len ? len : 1);
    memcpy(copy, text, len);
    t->text = copy;
    size_t cost = e->cost + len;
    if (!jmemo_by_text(e) && t == &e->kept) { /* the estimate (text to come and tree) gives way */
        cost = e->cost - e->size * (1 + JMEMO_TREE_FACTOR) + len * (1 + JMEMO_TREE_FACTOR);
        e->size = len;
    }
    jmemo_charge(m, e, cost);
}

void *jmemo_aux(const struct jmemo_tree *t)
{
    return t != NULL ? t->aux : NULL;
}

void jmemo_set_aux(struct jmemo *m, struct jmemo_tree *t, void *aux, size_t cost,
                   void (*aux_free)(void *))
{
    if (t == NULL || t->aux_free != NULL) {
        aux_free(aux);
        return;
    }
    t->aux = aux;
    t->aux_free = aux_free;
    jmemo_charge(m, t->owner, t->owner->cost + cost);
}

uint64_t *jmemo_note(struct jmemo_tree *t)
{
    return t != NULL ? &t->note : NULL;
}

void jmemo_stats(const struct jmemo *m, struct jmemo_stats *out)
{
    if (m == NULL)
        memset(out, 0, sizeof(*out));
    else
        *out = m->st;
}
