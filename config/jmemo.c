#include "jmemo.h"

#include "util.h"

#include <string.h>

struct jmemo_entry {
    struct jmemo_entry *chain; /* the next in its bucket */
    struct jmemo_entry *newer; /* the next to go when full */
    uint64_t hash, seed;
    size_t flags, len, cost;
    json_t *v;
    char text[]; /* len bytes */
};

struct jmemo {
    struct jmemo_entry **buckets;
    size_t mask; /* buckets - 1, a power of two less one */
    struct jmemo_entry *oldest, *newest;
    size_t max_bytes, max_text;
    struct jmemo_stats st;
};

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
    m->mask = n - 1;
    m->max_bytes = max_bytes;
    m->max_text = max_bytes / 16 / (1 + JMEMO_TREE_FACTOR);
    return m;
}

/* Drop the oldest entry. */
static void jmemo_evict(struct jmemo *m)
{
    struct jmemo_entry *e = m->oldest, **pp = &m->buckets[e->hash & m->mask];
    while (*pp != e)
        pp = &(*pp)->chain;
    *pp = e->chain;
    m->oldest = e->newer;
    if (m->oldest == NULL)
        m->newest = NULL;
    m->st.entries--;
    m->st.bytes -= e->cost;
    m->st.evictions++;
    json_decref(e->v);
    free(e);
}

void jmemo_destroy(struct jmemo *m)
{
    if (m == NULL)
        return;
    while (m->oldest != NULL)
        jmemo_evict(m);
    free(m->buckets);
    free(m);
}

json_t *jmemo_get(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len)
{
    uint64_t h = util_hash64(seed, text, len);
    for (struct jmemo_entry *e = m->buckets[h & m->mask]; e != NULL; e = e->chain) {
        if (e->hash == h && e->len == len && e->seed == seed && e->flags == flags &&
            memcmp(e->text, text, len) == 0) {
            m->st.hits++;
            return e->v;
        }
    }
    m->st.misses++;
    return NULL;
}

void jmemo_put(struct jmemo *m, uint64_t seed, size_t flags, const char *text, size_t len,
               json_t *v)
{
    if (len > m->max_text)
        return;
    size_t cost = jmemo_cost(len);
    while (m->oldest != NULL && m->st.bytes + cost > m->max_bytes)
        jmemo_evict(m);
    struct jmemo_entry *e = xmalloc(sizeof(*e) + len);
    *e = (struct jmemo_entry){.hash = util_hash64(seed, text, len),
                              .seed = seed,
                              .flags = flags,
                              .len = len,
                              .cost = cost,
                              .v = json_incref(v)};
    memcpy(e->text, text, len);
    e->chain = m->buckets[e->hash & m->mask];
    m->buckets[e->hash & m->mask] = e;
    if (m->newest != NULL)
        m->newest->newer = e;
    else
        m->oldest = e;
    m->newest = e;
    m->st.entries++;
    m->st.bytes += cost;
}

void jmemo_stats(const struct jmemo *m, struct jmemo_stats *out)
{
    if (m == NULL)
        memset(out, 0, sizeof(*out));
    else
        *out = m->st;
}
