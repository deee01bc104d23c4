#include "memory/turnlist.h"

#include "base/jsize.h"
#include "base/util.h"

#include <string.h>

/* The roles counted by kind; another role is compared by its text. */
enum turnlist_kind { TURNLIST_OTHER, TURNLIST_USER, TURNLIST_ASSISTANT, TURNLIST_TOOL };

/* What the list keeps beside a turn's view (views[i].t is the turn, referenced). */
struct turnlist_item {
    enum turnlist_kind kind;
    size_t bytes; /* jsize_tree(views[i].t) */
};

/* An entry's first allocation, in turns: a working set may hold many short sessions
 * (memory.max_turns counts each as at least one turn). */
#define TURNLIST_FIRST_CAP 4

/* views[start .. start + n) are the turns, items[] beside them: the oldest leave by moving
 * start, so trimming one turn a request (a long call) moves nothing; the arrays are compacted
 * when half of them is free at the front, so each turn is moved at most about once. The
 * views are an array of their own so that a window is matched against them where they are
 * (turnlist_views): copying 256 of them cost a request more than matching did. */
struct turnlist {
    struct reconcile_view *views;
    struct turnlist_item *items;
    size_t start, n, cap;
    size_t bytes;  /* of the turns held */
    int first_cut; /* the first turn's older messages are not held (turnlist_holds_from) */
};

static enum turnlist_kind turnlist_kind_of(const char *role)
{
    if (role == NULL)
        return TURNLIST_OTHER;
    if (strcmp(role, "user") == 0)
        return TURNLIST_USER;
    if (strcmp(role, "assistant") == 0)
        return TURNLIST_ASSISTANT;
    return strcmp(role, "tool") == 0 ? TURNLIST_TOOL : TURNLIST_OTHER;
}

/* Turn t into slot k of the arrays. */
static void turnlist_item_read(struct turnlist *l, size_t k, json_t *t)
{
    struct turnlist_item *it = &l->items[k];
    reconcile_view_read(&l->views[k], json_incref(t));
    it->kind = turnlist_kind_of(l->views[k].role);
    it->bytes = jsize_tree(t);
    l->bytes += it->bytes;
}

struct turnlist *turnlist_create(void)
{
    return xcalloc(1, sizeof(struct turnlist));
}

static void turnlist_clear(struct turnlist *l)
{
    turnlist_keep_last(l, 0);
    l->start = 0;
}

void turnlist_destroy(struct turnlist *l)
{
    if (l == NULL)
        return;
    turnlist_clear(l);
    free(l->views);
    free(l->items);
    free(l);
}

void turnlist_set(struct turnlist *l, json_t *turns, int more)
{
    size_t i;
    json_t *t;
    turnlist_clear(l);
    json_array_foreach(turns, i, t)
        turnlist_append(l, t);
    l->first_cut = more;
}

void turnlist_append(struct turnlist *l, json_t *turn)
{
    if (l->start + l->n == l->cap && l->start > 0 && l->start >= l->n) {
        memmove(l->views, l->views + l->start, l->n * sizeof(*l->views));
        memmove(l->items, l->items + l->start, l->n * sizeof(*l->items));
        l->start = 0;
    }
    if (l->start + l->n == l->cap) { /* from a few: most sessions are short */
        l->cap = l->cap ? l->cap * 2 : TURNLIST_FIRST_CAP;
        l->views = xrealloc(l->views, l->cap * sizeof(*l->views));
        l->items = xrealloc(l->items, l->cap * sizeof(*l->items));
    }
    turnlist_item_read(l, l->start + l->n++, turn);
}

void turnlist_replace(struct turnlist *l, size_t i, json_t *t)
{
    size_t k = l->start + i;
    json_t *old = l->views[k].t;
    l->bytes -= l->items[k].bytes;
    turnlist_item_read(l, k, t);
    json_decref(old);
}

void turnlist_keep_last(struct turnlist *l, size_t keep)
{
    if (l->n <= keep)
        return;
    while (l->n > keep) {
        l->bytes -= l->items[l->start].bytes;
        json_decref(l->views[l->start].t);
        l->start++;
        l->n--;
    }
    l->first_cut = l->n > 0 && l->views[l->start - 1].turn_id == l->views[l->start].turn_id;
}

int turnlist_holds_from(const struct turnlist *l, int64_t oldest)
{
    if (l->n == 0)
        return 0;
    int64_t first = l->views[l->start].turn_id;
    return first < oldest || (first == oldest && !l->first_cut);
}

size_t turnlist_keep_bytes(const struct turnlist *l, size_t max)
{
    size_t keep = l->n, bytes = l->bytes;
    while (keep > 1 && bytes > max)
        bytes -= l->items[l->start + l->n - keep--].bytes;
    return keep;
}

size_t turnlist_bytes(const struct turnlist *l)
{
    return l->bytes;
}

size_t turnlist_size(const struct turnlist *l)
{
    return l->n;
}

json_t *turnlist_get(const struct turnlist *l, size_t i)
{
    return i < l->n ? l->views[l->start + i].t : NULL;
}

int64_t turnlist_turn_id(const struct turnlist *l, size_t i)
{
    return i < l->n ? l->views[l->start + i].turn_id : -1;
}

/* Whether slot k holds a turn of that kind and role. */
static int turnlist_item_is(const struct turnlist *l, size_t k, enum turnlist_kind kind,
                            const char *role)
{
    return l->items[k].kind == kind &&
           (kind != TURNLIST_OTHER || strcmp(l->views[k].role, role) == 0);
}

int turnlist_role_is(const struct turnlist *l, size_t i, const char *role)
{
    return i < l->n && turnlist_item_is(l, l->start + i, turnlist_kind_of(role), role);
}

long turnlist_find_seq(const struct turnlist *l, int64_t seq)
{
    for (size_t i = l->n; i-- > 0;) {
        if (l->views[l->start + i].seq == seq)
            return (long)i;
    }
    return -1;
}

int64_t turnlist_next_idx(const struct turnlist *l, int64_t turn_id, const char *role)
{
    enum turnlist_kind kind = turnlist_kind_of(role);
    int64_t next = 0;
    for (size_t k = l->start; k < l->start + l->n; k++)
        if (l->views[k].turn_id == turn_id && l->views[k].turn_idx >= next &&
            turnlist_item_is(l, k, kind, role))
            next = l->views[k].turn_idx + 1;
    return next;
}

json_t *turnlist_array(const struct turnlist *l)
{
    json_t *out = json_array();
    for (size_t i = 0; i < l->n; i++)
        json_array_append(out, l->views[l->start + i].t);
    return out;
}

const struct reconcile_view *turnlist_views(const struct turnlist *l, size_t *n)
{
    *n = l->n;
    return l->views != NULL ? l->views + l->start : NULL;
}

struct reconcile_view *turnlist_views_from(const struct turnlist *l, int64_t oldest, size_t *n)
{
    struct reconcile_view *out = xmalloc((l->n + 1) * sizeof(*out));
    *n = 0;
    for (size_t k = l->start; k < l->start + l->n; k++) {
        if (l->views[k].turn_id >= oldest)
            out[(*n)++] = l->views[k];
    }
    return out;
}
