/*
 * Fuzz reconciliation with client windows. The input is JSON [stored, incoming]: stored
 * messages are normalized and numbered as the store would keep them, then the incoming window
 * is reconciled. Invariants: updates name stored rows only, inserts get fresh increasing seqs
 * and keys (turn_id, role, turn_idx) no row has (the store drops an insert whose key is
 * taken as a repeat), and the same window again (with its fingerprint, as the store passes
 * it) changes nothing.
 * Without the fingerprint, alignment alone decides; it leans toward keeping a turn when a
 * window repeats itself word for word, so no count is asserted there (only no crash).
 * Reconciling against the views the working set keeps (turnlist.h), and with the window's
 * readings kept in a memo (jmemo.h), gives the same result as against the stored turns
 * themselves.
 */
#include "base/jmemo.h"
#include "base/spoken.h"
#include "fuzz.h"
#include "memory/reconcile.h"
#include "memory/turnlist.h"

#include <stdlib.h>
#include <string.h>

static json_int_t fuzz_rec_int(json_t *t, const char *key)
{
    json_t *v = json_object_get(t, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* Whether a and b are of the same turn and role. */
static int fuzz_rec_same_group(json_t *a, json_t *b)
{
    return fuzz_rec_int(a, "turn_id") == fuzz_rec_int(b, "turn_id") &&
           json_equal(json_object_get(a, "role"), json_object_get(b, "role"));
}

/* Whether a and b have the same key (turn_id, role, turn_idx). */
static int fuzz_rec_same_key(json_t *a, json_t *b)
{
    return fuzz_rec_same_group(a, b) && fuzz_rec_int(a, "turn_idx") == fuzz_rec_int(b, "turn_idx");
}

/* The next turn_idx of t's turn and role in store, as the store numbers them. */
static json_int_t fuzz_rec_next_idx(json_t *store, json_t *t)
{
    size_t i;
    json_t *s;
    json_int_t next = 0;
    json_array_foreach(store, i, s) {
        if (fuzz_rec_same_group(s, t) && fuzz_rec_int(s, "turn_idx") >= next)
            next = fuzz_rec_int(s, "turn_idx") + 1;
    }
    return next;
}

static json_t *fuzz_rec_store(json_t *msgs)
{
    size_t i;
    json_t *m, *store = json_array();
    json_array_foreach(msgs, i, m) {
        json_t *t = reconcile_normalize(m, 1000);
        if (t == NULL)
            continue;
        json_object_set_new(t, "seq", json_integer((json_int_t)json_array_size(store) + 1));
        json_object_set_new(t, "turn_idx", json_integer(fuzz_rec_next_idx(store, t)));
        json_array_append_new(store, t);
    }
    return store;
}

static void fuzz_rec_apply(json_t *store, struct reconcile_result *r)
{
    size_t i, j;
    json_t *u, *s;
    json_int_t max = (json_int_t)json_array_size(store);
    json_array_foreach(r->updates, i, u) {
        json_int_t seq = json_integer_value(json_object_get(u, "seq"));
        if (seq < 1 || seq > max)
            abort();
        json_array_foreach(store, j, s)
            if (json_integer_value(json_object_get(s, "seq")) == seq)
                json_object_update(s, u);
    }
    json_array_foreach(r->inserts, i, s) {
        if (json_integer_value(json_object_get(s, "seq")) != max + 1 + (json_int_t)i)
            abort();
        json_t *o;
        json_array_foreach(store, j, o)
            if (fuzz_rec_same_key(o, s))
                abort();
        json_array_append(store, s); /* so the next inserts are checked against it too */
    }
}

/* The same reconciliation through a turnlist's views, and with the window read through a
 * memo that holds its messages (the first reading kept with each, the second taken from
 * there; a small memo, so that readings are evicted too), must say the same. */
static void fuzz_rec_same_by_views(json_t *store, json_t *incoming,
                                   const struct reconcile_result *want)
{
    static struct jmemo *memo;
    if (memo == NULL)
        memo = jmemo_create(16 * 1024);
    size_t i, n;
    json_t *m;
    json_array_foreach(incoming, i, m)
        jmemo_hold(memo, m, 64);
    struct turnlist *l = turnlist_create();
    turnlist_set(l, store, 0);
    const struct reconcile_view *v = turnlist_views(l, &n);
    for (int pass = 0; pass < 3; pass++) {
        struct reconcile_window *w = reconcile_window_read(incoming, pass > 0 ? memo : NULL);
        struct reconcile_result r;
        reconcile_run_views(v, n, w, 0, 2000, &r);
        reconcile_window_free(w);
        if (r.window_hash != want->window_hash || !json_equal(r.inserts, want->inserts) ||
            !json_equal(r.updates, want->updates) ||
            (r.system != want->system && !json_equal(r.system, want->system)))
            abort();
        reconcile_result_clear(&r);
    }
    turnlist_destroy(l); /* v is the list's */
}

/* Stored mode's check of a client message against a stored reply (reconcile_heard): an
 * update names that reply, carries the message's text as heard, which is nothing or begins (as
 * spoken, base/spoken.h) the generated text it keeps or the reply's own (a stored reply need not
 * begin its original), and comes for a reply only. */
static void fuzz_rec_heard(json_t *store, json_t *incoming)
{
    size_t i, j;
    json_t *m, *s;
    json_array_foreach(incoming, i, m) {
        json_array_foreach(store, j, s) {
            json_t *u = reconcile_heard(s, m, 4000);
            if (u == NULL)
                continue;
            const char *role = json_string_value(json_object_get(s, "role"));
            const char *heard = json_string_value(json_object_get(u, "content"));
            const char *orig = json_string_value(json_object_get(u, "original"));
            if (role == NULL || strcmp(role, "assistant") != 0 || heard == NULL || orig == NULL ||
                !json_equal(json_object_get(u, "seq"), json_object_get(s, "seq")) ||
                (!spoken_empty(heard) && spoken_compare(orig, heard) == SPOKEN_DIFFERENT &&
                 spoken_compare(json_string_value(json_object_get(s, "content")), heard) ==
                     SPOKEN_DIFFERENT &&
                 !json_is_string(json_object_get(json_object_get(m, "metadata"), "original"))))
                abort();
            json_decref(u);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    json_t *stored = json_array_get(root, 0), *incoming = json_array_get(root, 1);
    if (!json_is_array(stored) || !json_is_array(incoming)) {
        json_decref(root);
        return 0;
    }
    json_t *store = fuzz_rec_store(stored);
    fuzz_rec_heard(store, incoming);
    struct reconcile_result r;
    reconcile_run(store, incoming, 0, 2000, &r);
    fuzz_rec_same_by_views(store, incoming, &r);
    uint64_t h = r.window_hash;
    fuzz_rec_apply(store, &r);
    reconcile_result_clear(&r);
    reconcile_run(store, incoming, h, 3000, &r);
    if (json_array_size(r.inserts) + json_array_size(r.updates) != 0)
        abort(); /* a replayed window writes nothing */
    reconcile_result_clear(&r);
    reconcile_run(store, incoming, 0, 3000, &r);
    fuzz_rec_apply(store, &r);
    reconcile_result_clear(&r);
    json_decref(store);
    json_decref(root);
    return 0;
}
