#include "memory/memory.h"
#include "memory/memory_types.h"

#include "base/log.h"
#include "base/msg.h"
#include "base/spoken.h"
#include "base/util.h"
#include "memory/cache.h"
#include "memory/callsum.h"
#include "memory/entry.h"
#include "memory/inject.h"
#include "memory/reconcile.h"
#include "memory/store.h"
#include "memory/turnids.h"
#include "memory/turnlist.h"
#include "memory/workset.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

char *memory_key(const char *tenant, const char *id)
{
    return xjoin(tenant, '\x1f', id);
}

/* ---- loading (e->mu held) ---- */

static int64_t memory_int(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static void memory_set_owned(char **field, const char *v)
{
    free(*field);
    *field = v ? xstrdup(v) : NULL;
}

/* Does v change what the session has (NULL never does)? */
static int memory_differs(const char *have, const char *v)
{
    return v != NULL && (have == NULL || strcmp(have, v) != 0);
}

static const char *memory_str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* Queue the client's system messages (NULL: none came) when they changed; in alignment
 * mode (aligned) also the window's fingerprint whenever it changed (struct workset_entry). */
static void memory_system(struct workset_entry *e, struct store_batch *b, json_t *system,
                          uint64_t window_hash, int aligned)
{
    uint64_t h = system != NULL ? entry_system_hash(system) : e->system_hash;
    int changed = h != e->system_hash; /* unchanged, they are not copied and written again */
    if (changed || (aligned && window_hash != e->window_hash))
        store_batch_window(b, changed ? system : NULL, window_hash);
    if (system != NULL && h != e->system_hash) { /* kept for stored mode's later requests */
        json_decref(e->system);
        e->system = json_incref(system);
    }
    e->system_hash = h;
    e->window_hash = window_hash;
}

/* The sync path (SQLite, or no async channel): the entry read in place. */
static void memory_load(struct memory_rec *rec, struct workset_entry *e)
{
    struct memory *m = rec->rd->m;
    entry_read(e, m->st, m->ws, rec->rd->sr, rec->tenant, rec->sid, rec->user, m->session_turns,
               MEMORY_MAX_FACTS);
}

/* What the window is matched against (reconcile_run_views' stored), *n views: the working
 * set's turns — in turn-id mode only those the window reaches back to — after, when a turn-id
 * window reaches further back than the entry holds (turnlist_holds_from: a turn may have lost
 * its oldest messages from the entry), the older turns of the window's turn ids read from the
 * database into *db (the views borrow them: the caller decrefs it; NULL when none were read;
 * MEMORY_MAX_READ). Matched by content, the views are the working set's own (borrowed, *owned
 * NULL); otherwise the array is new and also in *owned (free() it). */
static const struct reconcile_view *memory_stored_for(struct memory_rec *rec,
                                                      struct workset_entry *e,
                                                      const struct reconcile_window *w, size_t *n,
                                                      json_t **db, struct reconcile_view **owned)
{
    int64_t oldest = reconcile_window_oldest(w);
    *db = NULL;
    *owned = NULL;
    if (oldest < 0)
        return turnlist_views(e->turns, n);
    struct reconcile_view *ws = *owned = turnlist_views_from(e->turns, oldest, n);
    json_t *first = turnlist_get(e->turns, 0);
    if (e->complete || turnlist_holds_from(e->turns, oldest))
        return ws;
    if (rec->reach != NULL) { /* read by memory_rec_prepare, off the loop */
        *db = rec->reach;
        rec->reach = NULL;
    } else if (rec->rd->sr == NULL) { /* a replica's serving loop reads nothing in place:
                                         matched against what the entry holds, as after a
                                         failed read (the entry changed since it was prepared),
                                         and the entry read again by the next request */
        *db = json_array();
        workset_mark_stale(rec->rd->m->ws, e);
    } else {
        size_t nids;
        int64_t *ids = reconcile_window_turn_ids(w, &nids);
        *db = store_turns_of(rec->rd->sr, rec->tenant, rec->sid, ids, nids, MEMORY_MAX_READ);
        free(ids);
    }
    atomic_fetch_add_explicit(&rec->rd->m->reach_back, json_array_size(*db), memory_order_relaxed);
    int64_t from = first ? memory_int(first, "seq") : INT64_MAX;
    size_t nd = json_array_size(*db), k = 0;
    struct reconcile_view *out = xmalloc((nd + *n + 1) * sizeof(*out));
    for (size_t i = 0; i < nd; i++) {
        reconcile_view_read(&out[k], json_array_get(*db, i));
        k += out[k].seq < from;
    }
    memcpy(out + k, ws, *n * sizeof(*ws));
    *n += k;
    free(ws);
    *owned = out;
    return out;
}

/* ---- writes ---- */

static void memory_report_free(struct memory_report *r)
{
    free(r->key);
    free(r->tenant);
    free(r);
}

/* On the submitter's thread: whoever waits hears; the store frees the batch here too. */
static void memory_report_done(void *arg, int ok)
{
    struct memory_report *r = arg;
    r->cb(r->arg, ok);
    memory_report_free(r);
}

/* On the writer thread, once the batch is committed or failed: the working set learns of it
 * before anyone's loop runs again, so no request reads a turn the writer failed to store. */
static void memory_settled(void *arg, int ok)
{
    struct memory_report *r = arg;
    workset_settled(r->m->ws, r->e, ok, r->key, r->tenant, r->b->version);
    if (r->cb == NULL)
        memory_report_free(r);
}

void memory_send(struct memory *m, struct store_batch *b, struct memory_report *r)
{
    r->b = b;
    store_batch_on_writer(b, memory_settled, r);
    store_submit(m->st, b, r->base, r->cb ? memory_report_done : NULL, r);
}

/* e->mu held, so batches of one session are submitted in the order their turns are numbered. */
static void memory_submit(struct memory *m, struct workset_entry *e, struct store_batch *b,
                          struct event_base *base, memory_done_cb cb, void *arg)
{
    struct memory_report *r = xcalloc(1, sizeof(*r));
    *r = (struct memory_report){.m = m, .e = e, .base = base, .cb = base ? cb : NULL, .arg = arg};
    workset_pending(m->ws, e);
    memory_send(m, b, r);
}

/* Number t as the session's next turn, keep it in the entry, and queue it. */
static void memory_add_turn(struct workset_entry *e, struct store_batch *b, json_t *t)
{
    json_object_set_new(t, "seq", json_integer(++e->last_seq));
    turnlist_append(e->turns, t);
    e->gen++;
    store_batch_insert(b, t);
}

/* A new turn: t with reconcile's update u applied (turns are replaced, never changed). */
static json_t *memory_updated(json_t *t, json_t *u)
{
    json_t *nt = json_copy(t);
    json_object_update_existing(nt, u);
    json_object_set(nt, "original", json_object_get(u, "original"));
    json_object_set(nt, "interrupt_timestamp", json_object_get(u, "interrupt_timestamp"));
    return nt;
}

/* Apply reconcile's update to the entry's copy of the turn. */
static void memory_apply_update(struct workset_entry *e, json_t *u)
{
    long i = turnlist_find_seq(e->turns, memory_int(u, "seq"));
    if (i < 0)
        return;
    json_t *nt = memory_updated(turnlist_get(e->turns, (size_t)i), u);
    turnlist_replace(e->turns, (size_t)i, nt);
    e->gen++;
    json_decref(nt);
}

/* Stored mode: msg, an assistant message of the turn of a stored reply, says what was heard
 * of that reply (cut short): the reply is updated as a window bringing it back would update
 * it (docs/design.md §6), and nothing is stored again. */
static int memory_append_heard(struct workset_entry *e, struct store_batch *b, json_t *msg,
                               int64_t turn)
{
    long i = turnids_reply(e->turns, turn);
    json_t *u =
        i < 0 ? NULL : reconcile_heard(turnlist_get(e->turns, (size_t)i), msg, util_wall_ms());
    if (u == NULL)
        return 0;
    memory_apply_update(e, u);
    store_batch_update(b, u);
    json_decref(u);
    return 1;
}

/* Stored mode: t (msg normalized, a turn) numbered own by the platform (< 0: not), after
 * turn *turn: stored as the next turn (or own), or taken as the update of a reply it says was
 * cut short. 1 when something changed, 0 when it was stored already under own. */
static int memory_append_turn(struct workset_entry *e, struct store_batch *b, json_t *msg,
                              json_t *t, int64_t own, int64_t *turn)
{
    const char *role = memory_str(t, "role");
    if (strcmp(role, "assistant") == 0 && memory_append_heard(e, b, msg, own >= 0 ? own : *turn))
        return 1;
    if (own >= 0 && turnids_stored(e->turns, t, own)) {
        *turn = own;
        return 0;
    }
    if (own >= 0)
        *turn = own;
    else if (*turn <= 0 || strcmp(role, "user") == 0)
        (*turn)++;
    json_object_set_new(t, "turn_id", json_integer(*turn));
    json_object_set_new(t, "turn_idx", json_integer(turnlist_next_idx(e->turns, *turn, role)));
    memory_add_turn(e, b, t);
    return 1;
}

/* Stored history mode: every message is new, each user message opening the session's next
 * turn. When the platform numbers turns, its numbers are kept, as in a window: a message's
 * own turn_id, and the request's for its newest user message (the turn it asks for, which
 * the reply then shares). A message already stored under its number is not stored again; a
 * request whose messages all were is a retry, and its reply replaces the one recorded. A
 * reply the client says was cut short updates the stored one (memory_append_heard).
 * An assistant message without a number, before the request's first question, speaks of the
 * turn before that question: the session's newest, or when the request is sent again the
 * newest before the turn it is for (whose reply may begin as the heard part does). It takes
 * that turn's number: it updates that turn's reply, or is stored there already (the client's
 * copy of the last reply), and is not taken for the retried turn's own reply. On replicas,
 * when that turn had not reached this one (rec->heard_unplaced: memory_prep_behind waited for it
 * in vain), it is not recorded: the session's newest reply here is an older turn's, which
 * the heard part may begin as well, and the reply it speaks of is recorded by its own replica
 * as memproxy had it, flagged interrupted. */
static void memory_append(struct memory_rec *rec, struct workset_entry *e, struct store_batch *b)
{
    size_t i, changed = 0, again = 0;
    json_t *msg, *system = NULL;
    size_t n = turnlist_size(e->turns);
    int64_t turn = n ? turnlist_turn_id(e->turns, n - 1) : 0, now = util_wall_ms();
    long last_user = turnids_last_user(rec->messages);
    int64_t resent = turnids_resent(e->turns, rec->messages, rec->turn_id);
    int64_t before = resent >= 0 ? turnids_before(e->turns, resent) : n ? turn : -1;
    int asked = 0;                           /* a user message came */
    json_array_foreach(rec->heard, i, msg) { /* memory_history_heard's */
        memory_apply_update(e, msg);
        store_batch_update(b, msg);
        changed++;
    }
    json_array_foreach(rec->messages, i, msg) {
        json_t *t = reconcile_normalize(msg, now);
        const char *role = memory_str(t, "role");
        int64_t own = memory_int(t, "turn_id");
        if (own < 0 && (long)i == last_user)
            own = rec->turn_id;
        else if (own < 0 && !asked && strcmp(role, "assistant") == 0) {
            if (rec->heard_unplaced) { /* of a turn not here yet (memory_prep_behind) */
                json_decref(t);
                continue;
            }
            own = before; /* before any question: of the turn before it (above) */
        }
        asked |= strcmp(role, "user") == 0;
        if (msg_role_is_system(role)) {
            if (system == NULL)
                system = json_array();
            json_array_append_new(system, json_pack("{s:s, s:O}", "role", role, "content",
                                                    json_object_get(t, "content")));
        } else if (t != NULL && memory_append_turn(e, b, msg, t, own, &turn))
            changed++;
        else if (t != NULL)
            again++;
        json_decref(t);
    }
    json_t *last = n ? turnlist_get(e->turns, n - 1) : NULL;
    rec->retry = again > 0 && changed == 0 && last != NULL &&
                 strcmp(memory_str(last, "role"), "assistant") == 0 &&
                 strcmp(memory_str(last, "source"), "llm") == 0;
    memory_system(e, b, system, e->window_hash, 0);
    json_decref(system);
}

/* A turn-id window whose newest turn is older than the session's newest: a late request, or
 * an agent restarted under the same session id, whose turn ids begin again. Messages are
 * identified by their turn ids (docs/design.md §6), so its messages are taken as the stored ones of
 * those ids and a restarted agent's new turns are not recorded: say so, once a session. */
static void memory_turn_ids_back(struct memory_rec *rec, struct workset_entry *e,
                                 const struct reconcile_window *w)
{
    size_t n = turnlist_size(e->turns);
    int64_t newest = reconcile_window_newest(w),
            stored = n ? turnlist_turn_id(e->turns, n - 1) : -1;
    if (e->warned_back || newest < 0 || stored <= newest)
        return;
    e->warned_back = 1;
    log_warn("session %s: a window ends at turn %lld, behind the session's turn %lld; turn "
             "ids identify messages, so its messages are taken as the stored ones of those "
             "ids (an agent restarted under the same session id needs a new one)",
             rec->sid, (long long)newest, (long long)stored);
}

static void memory_reconcile(struct memory_rec *rec, struct workset_entry *e, struct store_batch *b)
{
    rec->asked_turn = -1;
    if (rec->append) {
        memory_append(rec, e, b);
        return;
    }
    struct reconcile_result res;
    size_t i, ns;
    json_t *x, *db;
    struct reconcile_window *w = reconcile_window_read(rec->messages, rec->memo);
    int aligned = reconcile_window_oldest(w) < 0; /* no turn ids: matched by content */
    memory_turn_ids_back(rec, e, w);
    struct reconcile_view *owned;
    const struct reconcile_view *stored = memory_stored_for(rec, e, w, &ns, &db, &owned);
    reconcile_run_views(stored, ns, w, e->window_hash, util_wall_ms(), &res);
    rec->asked_turn = res.reply_turn;
    reconcile_window_free(w);
    free(owned);
    json_decref(db);
    json_t *last = turnlist_get(e->turns, turnlist_size(e->turns) - 1);
    rec->retry = json_array_size(res.inserts) == 0 && last != NULL &&
                 strcmp(memory_str(last, "role"), "assistant") == 0 &&
                 strcmp(memory_str(last, "source"), "llm") == 0;
    if (res.window_hash != e->window_hash)
        memory_system(e, b, res.system, res.window_hash, aligned);
    if (aligned)
        turnids_request_inserts(e->turns, rec->turn_id, res.inserts);
    json_array_foreach(res.inserts, i, x)
        memory_add_turn(e, b, x);
    json_array_foreach(res.updates, i, x) {
        memory_apply_update(e, x);
        store_batch_update(b, x);
    }
    reconcile_result_clear(&res);
}

struct workset_entry *memory_rec_entry(struct memory_rec *rec)
{
    if (rec->e == NULL) {
        char *key = memory_key(rec->tenant, rec->sid);
        rec->e = workset_acquire(rec->rd->m->ws, key, &rec->reload);
        free(key);
    }
    return rec->e;
}

/* The session's entry, referenced (until memory_rec_free) and loaded, with e->mu held. An
 * entry this request was told to read again (stale when it was acquired or prepared) is not
 * read while batches of it are in flight: the read would lack their turns (another request's,
 * numbered and held only by the entry until they commit) and replace the entry's copy of
 * them. Reconciled against it, a window stored those turns again; and a reply of one of their
 * turns, added after the read, made its question look unstored, so the next window stored
 * the question and the reply a second time under the next turn id (a barge-in's request
 * recorded after the next one, test_no_read_over_turns_in_flight). The entry is used as it
 * is, as when memory_rec_prepare waited long enough for them, and read again after they
 * settle. A replica's serving loop never reads in place (it has no connection to wait on,
 * memory_reader_async): an entry memory_rec_prepare gave up reading (its reads kept being
 * overtaken by this process's own writes) is used as it is too, and read by the next
 * request. */
static struct workset_entry *memory_rec_lock(struct memory_rec *rec)
{
    struct workset *ws = rec->rd->m->ws;
    struct workset_entry *e = memory_rec_entry(rec);
    pthread_mutex_lock(&e->mu);
    int in_place = rec->rd->sr != NULL; /* not a replica's serving loop (memory_reader_async) */
    if (!e->loaded && (rec->prepared || !in_place)) { /* the read failed: empty, read later */
        e->loaded = 1;
        workset_mark_stale(ws, e);
    }
    if (e->loaded && rec->reload && (!in_place || workset_in_flight(ws, e)))
        workset_mark_stale(ws, e);
    else if (!e->loaded || rec->reload)
        memory_load(rec, e);
    rec->reload = 0;
    return e;
}

/* The call's own summary: in stored mode in place of the turns it covers; with a window,
 * while none of them is in it (callsum.h). */
static void memory_call_summary(struct memory_rec *rec, struct workset_entry *e,
                                struct memory_context *out)
{
    if (out->history != NULL)
        callsum_drop_covered(out->history, e->call_through);
    else if (callsum_in_messages(e->turns, e->call_through, rec->messages))
        return;
    if (out->inject == NULL)
        out->inject = json_array();
    json_array_append_new(out->inject, callsum_message(e->call_summary));
}

void memory_rec_window(struct memory_rec *rec, int64_t turns)
{
    rec->window_turns = turns;
}

/* With track_window, the window's span when it changed (callsum.h). */
static void memory_window_turns(struct memory_rec *rec, struct workset_entry *e,
                                struct store_batch *b)
{
    if (!rec->track_window)
        return;
    int64_t n = rec->append ? rec->window_turns : callsum_window_turns(rec->messages);
    if (n < 0)
        return;
    int64_t next = callsum_next_span(e->window_span, n);
    e->window_span = n;
    if (next < 0 || next == e->window_turns)
        return;
    store_batch_window_turns(b, next);
    e->window_turns = next;
}

/* Stored mode: the replies the request says were cut short (memory_append_heard) as they
 * will be stored, heard and generated, in history (the entry's turns, in its order): the
 * model is sent what the caller heard, and the client's copy of it, repeating the history's
 * end, is left out of the request (upbody.c). Which reply a message speaks of: as
 * memory_append says; again is the turn the request is sent again for, or -1. */
static void memory_history_heard(struct memory_rec *rec, struct workset_entry *e, json_t *history,
                                 int64_t again)
{
    size_t i, n = turnlist_size(e->turns);
    int64_t newest = n ? turnlist_turn_id(e->turns, n - 1) : -1, now = util_wall_ms();
    int64_t before = again >= 0 ? turnids_before(e->turns, again) : newest;
    int asked = 0;
    json_t *msg;
    json_decref(rec->heard); /* found again if the request's context is asked again */
    rec->heard = NULL;
    json_array_foreach(rec->messages, i, msg) {
        asked |= strcmp(memory_str(msg, "role"), "user") == 0;
        if (strcmp(memory_str(msg, "role"), "assistant") != 0)
            continue;
        int64_t own = msg_turn_id(json_object_get(msg, "turn_id"));
        if (own < 0 && !asked && rec->heard_unplaced)
            continue; /* of a turn not here yet (memory_prep_behind) */
        long at = turnids_reply(e->turns, own >= 0 ? own : asked ? newest : before);
        json_t *u = at < 0 ? NULL : reconcile_heard(turnlist_get(e->turns, (size_t)at), msg, now);
        if (u == NULL)
            continue;
        json_array_set_new(history, (size_t)at,
                           memory_updated(json_array_get(history, (size_t)at), u));
        if (rec->heard == NULL)
            rec->heard = json_array();
        json_array_append_new(rec->heard, u);
    }
}

/* history without its newest turns of turn id turn (< 0: none). */
static void memory_history_before(json_t *history, int64_t turn)
{
    size_t n = json_array_size(history);
    while (turn >= 0 && n > 0 && memory_int(json_array_get(history, n - 1), "turn_id") == turn)
        json_array_remove(history, --n);
}

void memory_rec_context(struct memory_rec *rec, int want_history, struct memory_context *out)
{
    struct workset_entry *e = memory_rec_lock(rec);
    /* new arrays over the entry's own turns and messages, which never change (see
     * memory_context): a deep copy of a full entry was half a stored-mode request's work */
    out->inject = e->inject ? json_copy(e->inject) : NULL;
    out->history = want_history ? turnlist_array(e->turns) : NULL;
    if (out->history != NULL && rec->append) {
        int64_t again = turnids_resent(e->turns, rec->messages, rec->turn_id);
        memory_history_heard(rec, e, out->history, again);
        memory_history_before(out->history, again); /* a retry: asked as the first time */
    }
    if (e->call_summary != NULL)
        memory_call_summary(rec, e, out);
    out->params = e->params ? json_deep_copy(e->params) : NULL;
    out->user_info = json_incref(e->user_info); /* replaced on a read, never changed */
    out->system = want_history && e->system ? json_incref(e->system) : NULL;
    pthread_mutex_unlock(&e->mu);
}

static void memory_rec_question_clear(struct memory_rec *rec)
{
    free(rec->q_model);
    free(rec->q_text);
    free(rec->q_vec);
    rec->q_model = rec->q_text = NULL;
    rec->q_vec = NULL;
}

void memory_rec_question(struct memory_rec *rec, const char *model, const char *text,
                         const float *vec, size_t dim)
{
    if (rec->requested || rec->replied || vec == NULL || dim == 0)
        return; /* its turns are queued already */
    memory_rec_question_clear(rec);
    rec->q_model = xstrdup(model);
    rec->q_text = xstrdup(text);
    rec->q_vec = xmalloc(dim * sizeof(float));
    memcpy(rec->q_vec, vec, dim * sizeof(float));
    rec->q_dim = dim;
}

/* A batch of the rec's session; with retrieval, its turns are queued for their embedding. */
static struct store_batch *memory_rec_batch(struct memory_rec *rec)
{
    struct store_batch *b = store_batch_new(rec->tenant, rec->sid);
    if (rec->embed)
        store_batch_embed(b);
    if (rec->embed && rec->q_vec != NULL) { /* the first batch holds the request's turns */
        store_batch_known_embedding(b, rec->q_model, rec->q_text, rec->q_vec, rec->q_dim);
        memory_rec_question_clear(rec);
    }
    return b;
}

/* The reply's turn: the request's, else its window's question's (reconcile_result), else the
 * latest user turn's, else the latest turn's. */
static int64_t memory_reply_turn_id(const struct memory_rec *rec, struct workset_entry *e)
{
    int64_t latest = -1;
    if (rec->turn_id >= 0)
        return rec->turn_id;
    if (rec->asked_turn >= 0)
        return rec->asked_turn;
    for (size_t i = turnlist_size(e->turns); i-- > 0;) {
        if (turnlist_role_is(e->turns, i, "user"))
            return turnlist_turn_id(e->turns, i);
        if (latest < 0)
            latest = turnlist_turn_id(e->turns, i);
    }
    return latest >= 0 ? latest : 1;
}

void memory_rec_request(struct memory_rec *rec)
{
    struct memory *m = rec->rd->m;
    if (rec->requested)
        return;
    rec->requested = 1;
    store_expect(m->st, 1);
    struct workset_entry *e = memory_rec_lock(rec);
    struct store_batch *b = memory_rec_batch(rec);
    if (!e->exists || memory_differs(e->user, rec->user) ||
        memory_differs(e->profile, rec->profile)) {
        store_batch_session(b, rec->user, rec->profile);
        e->exists = 1;
        if (rec->user)
            memory_set_owned(&e->user, rec->user);
        if (rec->profile)
            memory_set_owned(&e->profile, rec->profile);
    }
    memory_reconcile(rec, e, b);
    rec->reply_turn = memory_reply_turn_id(rec, e); /* before a later request's turns come */
    memory_window_turns(rec, e, b);
    if (store_batch_ops(b) > 0) { /* a retried window with nothing new writes nothing */
        store_batch_defer(b);     /* its reply's commit takes it, under load */
        memory_submit(m, e, b, NULL, NULL, NULL);
    } else
        store_batch_free(b);
    workset_account(m->ws, e);
    pthread_mutex_unlock(&e->mu);
}

/* key: a literal (ASCII, as jansson checks keys for); v: checked */
static void memory_set_str(json_t *t, const char *key, const char *v)
{
    if (v != NULL)
        json_object_set_new_nocheck(t, key, json_string(v));
}

static json_t *memory_reply_turn(const struct memory_reply *rp, int64_t turn_id, int64_t idx)
{
    json_t *t = reconcile_reply_turn(rp->content ? rp->content : "", rp->source, turn_id, idx,
                                     rp->interrupted, util_wall_ms());
    memory_set_str(t, "model", rp->model);
    memory_set_str(t, "finish_reason", rp->finish_reason);
    memory_set_str(json_object_get(t, "metadata"), "refusal", rp->refusal);
    memory_set_str(json_object_get(t, "metadata"), "reasoning", rp->reasoning);
    if (rp->function_call != NULL) /* as a client's copy of it is kept (reconcile_normalize) */
        json_object_set_new_nocheck(json_object_get(t, "metadata"), "function_call",
                                    json_deep_copy(rp->function_call));
    if (rp->audio != NULL) /* the client's copy of it, {audio: {id}}, is this turn (reconcile) */
        json_object_set_new_nocheck(json_object_get(t, "metadata"), "audio",
                                    json_deep_copy(rp->audio));
    /* the turn goes to the writer thread, which must find it unchanged (store.h, Ownership):
     * a reply replaces its usage object whole and never changes one (reply.h), so a reference
     * will do; its tool calls grow chunk by chunk, so they are copied */
    if (rp->usage != NULL)
        json_object_set_nocheck(t, "usage", rp->usage);
    if (rp->tool_calls != NULL)
        json_object_set_new_nocheck(t, "tool_calls", json_deep_copy(rp->tool_calls));
    if (rp->ttft_us >= 0)
        json_object_set_new_nocheck(t, "ttft_us", json_integer(rp->ttft_us));
    json_object_set_new_nocheck(t, "latency_us", json_integer(rp->latency_us));
    return t;
}

/* Is w a copy by reference (msg_audio_ref) of audio reply t? It is then t whole: an audio
 * reference says nothing of what was heard. */
static int memory_same_audio(json_t *t, json_t *w)
{
    const char *ref = msg_audio_ref(w), *id = msg_audio_id(t);
    return ref != NULL && id != NULL && strcmp(id, ref) == 0;
}

/* A later request's window brought this reply's turn before the reply was recorded (the
 * caller barged in while it streamed, and the platform's next request was read before the
 * hang-up): the assistant message stored from that window is what was heard of this reply,
 * when its text begins the reply's, is all of it, or is nothing (the caller barged in before
 * the first word), as spoken (base/spoken.h). memproxy's own replies carry their latency; a
 * window's copy does not. Its position, or -1. */
static long memory_heard_first(const struct workset_entry *e, int64_t turn_id, json_t *reply)
{
    long i = (long)turnlist_size(e->turns), q;
    /* from the newest turn back to the question: a row after it (mostly none: one step) */
    while (i-- > 0 && !(turnlist_turn_id(e->turns, (size_t)i) == turn_id &&
                        (turnlist_role_is(e->turns, (size_t)i, "assistant") ||
                         turnlist_role_is(e->turns, (size_t)i, "user"))))
        ;
    if (i < 0 || !turnlist_role_is(e->turns, (size_t)i, "assistant"))
        return -1;
    json_t *w = turnlist_get(e->turns, (size_t)i);
    const char *source = memory_str(w, "source");
    if (json_is_integer(json_object_get(w, "latency_us")) ||
        (*source != '\0' && strcmp(source, "llm") != 0))
        return -1; /* a reply recorded, or a greeting or prompt of the platform's own */
    for (q = i; q-- > 0 && !(turnlist_turn_id(e->turns, (size_t)q) == turn_id &&
                             turnlist_role_is(e->turns, (size_t)q, "user"));)
        ;
    if (q < 0)
        return -1; /* not after the question this reply answers */
    const char *heard = memory_str(w, "content"), *generated = memory_str(reply, "content");
    if (spoken_empty(heard) && msg_audio_ref(w) != NULL) /* this reply's audio, or another's */
        return memory_same_audio(reply, w) ? i : -1;
    if (spoken_empty(heard)) /* a message that calls tools says nothing and is no copy */
        return msg_calls_tools(w) ? -1 : i;
    return spoken_compare(generated, heard) != SPOKEN_DIFFERENT ? i : -1;
}

/* Reply t, with what was heard of it (w: memory_heard_first): when it was cut short (w's text
 * is not all of it as spoken, or either says so), w's text is its content and the generated text
 * its original, and the first interruption time is kept; heard whole, or w a reference to t's
 * audio, t stays as generated. */
static void memory_reply_heard(json_t *t, json_t *w)
{
    if (memory_same_audio(t, w))
        return; /* an audio reference says nothing of what was heard: t as it was recorded */
    json_t *generated = json_incref(json_object_get(t, "content"));
    int cut =
        spoken_compare(json_string_value(generated), memory_str(w, "content")) != SPOKEN_SAME ||
        json_is_true(json_object_get(w, "interrupted")) ||
        json_is_true(json_object_get(t, "interrupted"));
    json_t *its = json_object_get(w, "interrupt_timestamp");
    if (cut && json_is_integer(its))
        json_object_set(t, "interrupt_timestamp", its);
    else if (cut && !json_is_integer(json_object_get(t, "interrupt_timestamp")))
        json_object_set_new(t, "interrupt_timestamp", json_integer(util_wall_ms()));
    if (cut)
        json_object_set(t, "content", json_object_get(w, "content"));
    json_object_set_new(t, "interrupted", json_boolean(cut));
    json_object_set(t, "original", cut ? generated : json_null());
    json_decref(generated);
}

/* Reply t takes the place of the entry's turn i (its seq), written as a replace. */
static void memory_reply_in_place(struct workset_entry *e, struct store_batch *b, size_t i,
                                  json_t *t)
{
    json_object_set(t, "seq", json_object_get(turnlist_get(e->turns, i), "seq"));
    store_batch_replace(b, t);
    turnlist_replace(e->turns, i, t);
    e->gen++;
}

void memory_rec_reply(struct memory_rec *rec, const struct memory_reply *reply,
                      struct event_base *base, memory_done_cb cb, void *arg)
{
    if (rec->replied)
        return;
    memory_rec_request(rec);
    rec->replied = 1;
    struct workset_entry *e = rec->e;
    struct memory *m = rec->rd->m;
    store_expect(m->st, -1);
    pthread_mutex_lock(&e->mu);
    struct store_batch *b = memory_rec_batch(rec);
    size_t n = turnlist_size(e->turns);
    json_t *last = n ? turnlist_get(e->turns, n - 1) : NULL;
    int64_t turn_id = rec->reply_turn;
    json_t *t =
        memory_reply_turn(reply, turn_id, turnlist_next_idx(e->turns, turn_id, "assistant"));
    long heard;
    if (rec->retry && last != NULL && turnlist_turn_id(e->turns, n - 1) == turn_id &&
        turnlist_role_is(e->turns, n - 1, "assistant")) {
        json_object_set(t, "turn_idx", json_object_get(last, "turn_idx"));
        memory_reply_in_place(e, b, n - 1, t);
    } else if ((heard = memory_heard_first(e, turn_id, t)) >= 0) {
        json_t *w = turnlist_get(e->turns, (size_t)heard);
        json_object_set(t, "turn_idx", json_object_get(w, "turn_idx"));
        memory_reply_heard(t, w);
        memory_reply_in_place(e, b, (size_t)heard, t);
    } else
        memory_add_turn(e, b, t);
    json_decref(t);
    memory_submit(m, e, b, base, cb, arg);
    workset_account(m->ws, e);
    pthread_mutex_unlock(&e->mu);
}

int memory_rec_replied(const struct memory_rec *rec)
{
    return rec->replied;
}

/* ---- lifetime ---- */

struct memory_rec *memory_rec_new(struct memory_reader *r, const struct memory_rec_params *p)
{
    struct memory_rec *rec = xcalloc(1, sizeof(*rec));
    rec->rd = r;
    rec->tenant = xstrdup(p->tenant);
    rec->sid = xstrdup(p->session_id);
    rec->user = p->user_id ? xstrdup(p->user_id) : NULL;
    rec->profile = p->profile ? xstrdup(p->profile) : NULL;
    rec->messages = json_incref(p->messages);
    rec->memo = p->memo;
    rec->turn_id = msg_turn_id(p->turn_id);
    rec->append = p->append;
    rec->embed = p->embed;
    rec->track_window = p->track_window;
    rec->window_turns = -1;
    return rec;
}

void memory_rec_free(struct memory_rec *rec)
{
    if (rec == NULL)
        return;
    if (rec->requested && !rec->replied)
        store_expect(rec->rd->m->st, -1);
    if (rec->e != NULL)
        workset_release(rec->rd->m->ws, rec->e);
    json_decref(rec->messages);
    json_decref(rec->reach);
    json_decref(rec->heard);
    memory_rec_question_clear(rec);
    free(rec->tenant);
    free(rec->sid);
    free(rec->user);
    free(rec->profile);
    free(rec);
}

struct memory *memory_open(const struct memory_opts *o, char **err)
{
    struct store_opts so = {.url = o->url,
                            .statement_timeout_ms = o->statement_timeout_ms,
                            .lease_ms = o->lease_ms,
                            .prepared_statements = o->prepared_statements,
                            .busy_timeout_ms = o->busy_timeout_ms,
                            .retention_ms = (int64_t)o->retention_days * 86400000LL,
                            .touch_ms = o->touch_ms,
                            .commit_delay_us = o->commit_delay_us,
                            .commit_spin_us = o->commit_spin_us,
                            .wal_flush_after = o->wal_flush_after};
    struct store *st = store_open(o->path, &so, err);
    if (st == NULL)
        return NULL;
    struct memory *m = xcalloc(1, sizeof(*m));
    m->st = st;
    struct workset_opts wo = {.session_turns = o->session_turns,
                              .max_turns = o->max_turns,
                              .session_bytes = o->session_bytes ? o->session_bytes : SIZE_MAX,
                              .max_bytes = o->max_bytes ? o->max_bytes : SIZE_MAX,
                              .retention_ms = so.retention_ms};
    m->ws = workset_create(&wo);
    m->session_turns = o->session_turns;
    m->replica_wait_us = o->replica_wait_ms * 1000;
    return m;
}

void memory_stats(struct memory *m, struct memory_stats *out)
{
    struct store_counts c;
    store_counts(m->st, &c);
    out->transactions = c.transactions;
    out->batches_ok = c.ok;
    out->batches_failed = c.failed;
    out->commit_delays = c.delayed;
    out->commit_spins = c.spun;
    out->wal_flushes = c.wal_flushes;
    out->checkpoints = c.checkpoints;
    out->checkpoints_held = c.checkpoints_held;
    out->transaction_time = c.transaction_time;
    out->reach_back_turns = atomic_load_explicit(&m->reach_back, memory_order_relaxed);
    out->replies_pending = c.expected;
    workset_counts(m->ws, &out->sessions, &out->turns, &out->bytes);
}

void memory_drain(struct memory *m)
{
    store_drain(m->st);
}

int memory_attach(struct memory *m, struct event_base *base)
{
    return store_attach(m->st, base);
}

void memory_detach(struct memory *m, struct event_base *base)
{
    store_detach(m->st, base);
}

void memory_close(struct memory *m)
{
    if (m == NULL)
        return;
    store_close(m->st); /* commits what is queued; every report has run */
    workset_destroy(m->ws);
    free(m);
}

struct memory_reader *memory_reader_open(struct memory *m, char **err)
{
    struct store_reader *sr = store_reader_open(m->st, err);
    if (sr == NULL)
        return NULL;
    struct memory_reader *r = xcalloc(1, sizeof(*r));
    r->m = m;
    r->sr = sr;
    return r;
}

int memory_shared(const struct memory *m)
{
    return store_shared(m->st);
}

int memory_reader_failed(const struct memory_reader *r)
{
    return r->sr != NULL && store_reader_failed(r->sr);
}

void memory_reader_clear(struct memory_reader *r)
{
    if (r->sr != NULL)
        store_reader_clear(r->sr);
}

void memory_reader_async(struct memory_reader *r, struct event_base *base, struct readpool *pool)
{
    if (r->as == NULL)
        r->as = store_async_open(r->m->st, base);
    if (r->as != NULL) {
        r->pool = pool;
        r->base = base;
        store_reader_close(r->sr); /* nothing on this loop may wait for the database */
        r->sr = NULL;
    }
}

void memory_reader_close(struct memory_reader *r)
{
    if (r == NULL)
        return;
    store_async_close(r->as);
    store_reader_close(r->sr);
    free(r);
}
