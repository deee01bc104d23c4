#include "memory/reconcile.h"

#include "base/jmemo.h"
#include "base/msg.h"
#include "base/spoken.h"
#include "base/util.h"

#include <stdio.h>
#include <string.h>

/* ---- normalization ---- */

static double reconcile_role_importance(const char *role)
{
    if (strcmp(role, "tool") == 0 || strcmp(role, "function") == 0)
        return 0.3;
    if (msg_role_is_system(role))
        return 0.1;
    return 0.5;
}

/* A message's importance: its own (importance, or metadata.importance: a number from 0 to 1,
 * e.g. a platform flagging what the caller must not be asked again), else its role's. */
static double reconcile_importance(json_t *msg, const char *role)
{
    json_t *v = json_object_get(msg, "importance");
    if (!json_is_number(v))
        v = json_object_get(json_object_get(msg, "metadata"), "importance");
    double d = json_number_value(v);
    if (json_is_number(v) && d >= 0 && d <= 1)
        return d;
    return reconcile_role_importance(role);
}

static void reconcile_set_opt_string(json_t *turn, const char *key, json_t *v)
{
    json_object_set_new_nocheck(turn, key, json_is_string(v) ? json_copy(v) : json_null());
}

/* Lift the voice fields out of the client's metadata; the rest stays in metadata. */
static void reconcile_voice_fields(json_t *turn, json_t *meta)
{
    json_t *rest = json_is_object(meta) ? json_deep_copy(meta) : json_object();
    int64_t its = msg_timestamp_ms(json_object_get(rest, "interrupt_timestamp"));
    reconcile_set_opt_string(turn, "source", json_object_get(rest, "source"));
    reconcile_set_opt_string(turn, "original", json_object_get(rest, "original"));
    json_object_set_new_nocheck(turn, "interrupted",
                                json_boolean(json_is_true(json_object_get(rest, "interrupted"))));
    json_object_set_new_nocheck(turn, "interrupt_timestamp",
                                its > 0 ? json_integer(its) : json_null());
    for (size_t i = 0; i < MSG_VOICE_FIELDS && json_object_size(rest) > 0; i++)
        json_object_del(rest, msg_voice_fields[i]);
    json_object_set_new_nocheck(turn, "metadata", rest);
}

/* Keys are set unchecked: they are this file's literals, valid UTF-8, and checking them cost
 * a recorded message more than a tenth of its normalizing. */
json_t *reconcile_normalize(json_t *msg, int64_t now_ms)
{
    json_t *role = json_object_get(msg, "role");
    if (!json_is_string(role))
        return NULL;
    int dropped = 0;
    int64_t ts = msg_timestamp_ms(json_object_get(msg, "timestamp"));
    json_t *turn = json_object();
    json_object_set_nocheck(turn, "role", role);
    json_object_set_new_nocheck(turn, "content",
                                msg_text(json_object_get(msg, "content"), &dropped));
    json_object_set_new_nocheck(turn, "turn_id",
                                json_integer(msg_turn_id(json_object_get(msg, "turn_id"))));
    reconcile_voice_fields(turn, json_object_get(msg, "metadata"));
    if (dropped > 0)
        json_object_set_new_nocheck(json_object_get(turn, "metadata"), "dropped_parts",
                                    json_integer(dropped));
    /* OpenAI's older functions API: the stored shape has no column for it, so metadata keeps
     * it (msg_calls_tools finds it there: the message said nothing and is no reply's copy) */
    json_t *function_call = json_object_get(msg, "function_call");
    if (json_is_object(function_call))
        json_object_set_nocheck(json_object_get(turn, "metadata"), "function_call", function_call);
    /* an audio reply's copy by reference: its id (not the audio), where the reply keeps it */
    const char *audio_id = msg_audio_ref(msg);
    if (audio_id != NULL)
        json_object_set_new_nocheck(json_object_get(turn, "metadata"), "audio",
                                    json_pack("{s:s}", "id", audio_id));
    json_object_set_new_nocheck(turn, "timestamp", json_integer(ts > 0 ? ts : now_ms));
    json_object_set_new_nocheck(turn, "importance",
                                json_real(reconcile_importance(msg, json_string_value(role))));
    static const char *const copied[] = {"tool_calls", "tool_call_id", "name"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(copied); i++) {
        json_t *v = json_object_get(msg, copied[i]);
        if (v != NULL && !json_is_null(v))
            json_object_set_nocheck(turn, copied[i], v);
    }
    return turn;
}

/* Built key by key: json_pack's format parsing cost more than the turn on every recorded
 * reply. */
json_t *reconcile_reply_turn(const char *content, const char *source, int64_t turn_id,
                             int64_t turn_idx, int interrupted, int64_t now_ms)
{
    json_t *text = json_string(content);
    if (text == NULL) /* content was not UTF-8: keep the turn, lose the text */
        text = json_string("");
    json_t *turn = json_object();
    json_object_set_new_nocheck(turn, "role", json_string_nocheck("assistant"));
    json_object_set_new_nocheck(turn, "content", json_incref(text));
    json_object_set_new_nocheck(turn, "turn_id", json_integer(turn_id));
    json_object_set_new_nocheck(turn, "turn_idx", json_integer(turn_idx));
    json_object_set_new_nocheck(turn, "source", json_string_nocheck(source ? source : "llm"));
    json_object_set_new_nocheck(turn, "interrupted", json_boolean(interrupted));
    json_object_set_new_nocheck(turn, "interrupt_timestamp",
                                interrupted ? json_integer(now_ms) : json_null());
    json_object_set_new_nocheck(turn, "original", interrupted ? json_incref(text) : json_null());
    json_object_set_new_nocheck(turn, "metadata", json_object());
    json_object_set_new_nocheck(turn, "timestamp", json_integer(now_ms));
    json_object_set_new_nocheck(turn, "importance", json_real(0.5));
    json_decref(text);
    return turn;
}

/* ---- matching ---- */

/* A window message as matching sees it, read in place from the client's message: a whole
 * turn object is built (reconcile_normalize) only for a message that is inserted. A 32-message
 * window that is mostly stored already costs 32 of these, not 32 objects and their copies,
 * and a message the worker's memo holds (jmemo.h: it came in an earlier request's window) is
 * read once for all the requests it comes in. */
enum reconcile_kind { RECONCILE_NOT_A_TURN, RECONCILE_TURN, RECONCILE_SYSTEM };

struct reconcile_msg {
    json_t *msg;              /* the client's message */
    enum reconcile_kind kind; /* no string role: neither */
    const char *role;         /* its role */
    json_t *text;             /* its content as stored (msg_text); a reference */
    int64_t turn_id;          /* -1 when it has none */
    int interrupted;          /* metadata.interrupted */
    json_t *original;         /* metadata.original when a string, else NULL */
    int64_t interrupt_ms;     /* metadata.interrupt_timestamp in ms, or -1 */
    const char *audio_id;     /* an audio reply's copy by reference (msg_audio_ref), or NULL */
    uint64_t hash;  /* a turn's share of the window's fingerprint (reconcile_window_read) */
    uint64_t chash; /* of its text, as reconcile_view's */
};

struct reconcile_window {
    struct reconcile_msg *turns, *system; /* in the window's order */
    size_t nturns, nsystem;
    int64_t oldest, newest; /* the oldest and newest turn ids when every turn has one, else -1 */
    uint64_t hash;
};

#define RECONCILE_HASH_SEED 0x6d656d70726f7879ULL /* "memproxy" */

static int64_t reconcile_int_of(json_t *v)
{
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static const char *reconcile_str_of(json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

/* One pass over the turn's fields, cheaper than a lookup each once two are wanted; a stored
 * turn has a dozen, so each key is told apart by its first byte before it is compared. */
static void reconcile_view_field(struct reconcile_view *s, const char *k, json_t *v)
{
    switch (k[0]) {
    case 'r':
        if (strcmp(k, "role") == 0)
            s->role = reconcile_str_of(v);
        break;
    case 'c':
        if (strcmp(k, "content") == 0)
            s->content = reconcile_str_of(v);
        break;
    case 'o':
        if (strcmp(k, "original") == 0)
            s->original = json_string_value(v);
        break;
    case 't':
        if (strcmp(k, "turn_id") == 0)
            s->turn_id = reconcile_int_of(v);
        else if (strcmp(k, "turn_idx") == 0)
            s->turn_idx = reconcile_int_of(v);
        break;
    case 's':
        if (strcmp(k, "seq") == 0)
            s->seq = reconcile_int_of(v);
        break;
    case 'i':
        if (strcmp(k, "interrupted") == 0)
            s->interrupted = json_is_true(v);
        else if (strcmp(k, "interrupt_timestamp") == 0)
            s->its = v;
        break;
    default:
        break;
    }
}

/* (json_object_foreach makes four calls a field, the iterator three.) */
void reconcile_view_read(struct reconcile_view *s, json_t *t)
{
    *s = (struct reconcile_view){
        .t = t, .role = "", .content = "", .turn_id = -1, .turn_idx = -1, .seq = -1};
    for (void *it = json_object_iter(t); it != NULL; it = json_object_iter_next(t, it))
        reconcile_view_field(s, json_object_iter_key(it), json_object_iter_value(it));
    s->chash = util_hash64(RECONCILE_HASH_SEED, s->content, strlen(s->content));
}

static const char *reconcile_content(const struct reconcile_msg *w)
{
    return json_string_value(w->text);
}

/* w is what was heard of s: an assistant reply cut short, its start as the platform sent it
 * back (byte for byte, or as spoken: base/spoken.h); or nothing of it, the caller having
 * barged in before its first word (a message that calls tools says nothing and is none). */
static int reconcile_heard_of(const struct reconcile_view *s, const struct reconcile_msg *w)
{
    const char *wc = reconcile_content(w), *orig = s->original ? s->original : "";
    size_t wl = strlen(wc);
    if (strcmp(s->role, "assistant") != 0)
        return 0;
    if (spoken_empty(wc))
        return !msg_calls_tools(w->msg) && w->audio_id == NULL && !spoken_empty(s->content);
    if ((wl < strlen(s->content) && strncmp(s->content, wc, wl) == 0) ||
        (wl < strlen(orig) && strncmp(orig, wc, wl) == 0))
        return 1;
    return spoken_compare(s->content, wc) == SPOKEN_START ||
           (s->original && spoken_compare(orig, wc) == SPOKEN_START);
}

/* w, a copy of an audio reply by reference (msg_audio_ref), is s: the reply memproxy recorded
 * (its transcript the content) or an earlier copy, stored with the same id in metadata.audio.
 * Looked up only for such a message: no other pays for it. */
static int reconcile_same_audio(const struct reconcile_view *s, const struct reconcile_msg *w)
{
    const char *id = msg_audio_id(s->t);
    return strcmp(s->role, "assistant") == 0 && id != NULL && strcmp(id, w->audio_id) == 0;
}

/* Is w the text of s: the same bytes, or for a reply the same words as spoken (a platform's
 * copy of a reply it said whole)? Most stored turns differ from w, and their content hashes
 * tell them apart without a string compared. */
static int reconcile_same(const struct reconcile_view *s, const struct reconcile_msg *w)
{
    if (w->audio_id != NULL)
        return reconcile_same_audio(s, w);
    if (s->chash == w->chash && strcmp(s->role, w->role) == 0 &&
        strcmp(s->content, reconcile_content(w)) == 0)
        return 1;
    return w->role[0] == 'a' && strcmp(s->role, w->role) == 0 &&
           spoken_compare(s->content, reconcile_content(w)) == SPOKEN_SAME;
}

/* Is w the stored turn s (the same role and text, or what was heard of it)? */
static int reconcile_matches(const struct reconcile_view *s, const struct reconcile_msg *w)
{
    if (reconcile_same(s, w))
        return 1;
    /* only a reply is cut short (heard_of compares the roles) */
    return w->role[0] == 'a' && strcmp(s->role, w->role) == 0 && reconcile_heard_of(s, w);
}

/* The original an update of s by w keeps: the window's, unless what is stored says more of the
 * same text (begins with the window's and goes on). memproxy's record of its own reply is
 * every token the upstream sent before the caller hung up, and a platform's `original` only
 * those it had received: both are what was generated, the longer knows more of it, and the
 * row is the same whichever of the two came first (a barge-in's reply can be recorded
 * before or after the window that brings it back). */
static json_t *reconcile_original(const struct reconcile_view *s, const struct reconcile_msg *w)
{
    json_t *mine = json_object_get(s->t, s->original ? "original" : "content");
    const char *a = json_string_value(mine), *b = json_string_value(w->original);
    if (w->original == NULL ||
        (a != NULL && b != NULL && strlen(a) > strlen(b) && strncmp(a, b, strlen(b)) == 0))
        return mine;
    return w->original;
}

/* The stored turn s came back as w: record an interruption when w says or shows one. */
static void reconcile_update(const struct reconcile_view *s, const struct reconcile_msg *w,
                             int64_t now_ms, json_t *updates)
{
    if (strcmp(s->role, "assistant") != 0 || w->audio_id != NULL)
        return; /* an audio reference says nothing of what was heard */
    int same = reconcile_same(s, w);
    if (same && (s->interrupted || !w->interrupted))
        return;
    if (!same && !w->interrupted && !reconcile_heard_of(s, w))
        return;
    json_t *orig = reconcile_original(s, w);
    int64_t its_ms = json_is_integer(s->its) ? json_integer_value(s->its) /* the first is kept */
                     : w->interrupt_ms > 0   ? w->interrupt_ms
                                             : now_ms;
    json_array_append_new(updates, json_pack("{s:I, s:I, s:I, s:s, s:O, s:O, s:b, s:I}", "seq",
                                             (json_int_t)s->seq, "turn_id", (json_int_t)s->turn_id,
                                             "turn_idx", (json_int_t)s->turn_idx, "role", s->role,
                                             "content", w->text, "original", orig, "interrupted", 1,
                                             "interrupt_timestamp", (json_int_t)its_ms));
}

/* ---- the two modes ---- */

struct reconcile_ctx {
    const struct reconcile_view *stored; /* the stored turns matching may use, in seq order */
    size_t nstored;
    struct reconcile_view *kept; /* turn-id mode: stored, but older turns, when it left some */
    const struct reconcile_msg *turns; /* the window's messages that are turns (not system) */
    size_t nturns;
    char *used; /* per stored turn */
    int64_t next_seq, now_ms;
    struct reconcile_result *out;
    /* The messages of each (turn_id, role), stored and in the window: groups (ngroups of
     * capgroups), found through an open-addressing table of their indices + 1 (nslots, a
     * power of two; 0 a free slot), and per stored turn the next stored turn of its group in
     * seq order (RECONCILE_NONE ends). Why: matching asked "which of the stored turns are this
     * turn's, with this role?" by scanning them all for every message of the window, and
     * counted the inserts by reading each one's JSON: a window of 4,096 messages held the
     * worker's loop 0.3 to 1.7 s. */
    struct reconcile_group *groups;
    size_t ngroups, capgroups;
    uint32_t *slots;
    size_t nslots;
    size_t *snext;
    size_t *wgroup;   /* per window message, its group's index */
    size_t last_user; /* the window's last user message, or nturns (none) */
    int run_exact;    /* reconcile_run_back's pair at window message p is the same text */
};

#define RECONCILE_NONE ((size_t)-1)

struct reconcile_group {
    const char *role;
    int64_t turn_id;
    size_t sfirst, slast; /* its stored turns (reconcile_ctx.snext), RECONCILE_NONE when none */
    int64_t nstored;      /* how many */
    int64_t next_idx;     /* one past their highest turn_idx: the next insert's (turnlist.h) */
    int64_t inserted;     /* inserted by this reconciliation */
    size_t wtotal, wseen; /* the window's messages of it, and those matched so far */
};

/* FNV-1a over the role, seeded by the turn id: roles are a few short words. */
static size_t reconcile_group_hash(int64_t turn_id, const char *role)
{
    uint64_t h = (uint64_t)turn_id * 0x9e3779b97f4a7c15u;
    for (; *role != '\0'; role++)
        h = (h ^ (unsigned char)*role) * 0x100000001b3u;
    return (size_t)(h ^ (h >> 32));
}

/* The group of (turn_id, role), made when absent (there is room: reconcile_groups_init). */
static struct reconcile_group *reconcile_group(struct reconcile_ctx *c, int64_t turn_id,
                                               const char *role)
{
    size_t mask = c->nslots - 1;
    for (size_t i = reconcile_group_hash(turn_id, role) & mask;; i = (i + 1) & mask) {
        if (c->slots[i] == 0) {
            struct reconcile_group *g = &c->groups[c->ngroups++];
            *g = (struct reconcile_group){.role = role,
                                          .turn_id = turn_id,
                                          .sfirst = RECONCILE_NONE,
                                          .slast = RECONCILE_NONE};
            c->slots[i] = (uint32_t)c->ngroups;
            return g;
        }
        struct reconcile_group *g = &c->groups[c->slots[i] - 1];
        if (g->turn_id == turn_id && strcmp(g->role, role) == 0)
            return g;
    }
}

/* The groups of the stored turns and of the window's messages (turn-id mode, only < 0); room
 * for one more group per window message. In alignment mode (only: the stored turns' newest
 * turn id) only the stored turns of that turn: what is new is inserted in it or after it, and
 * the older ones, most of a long call, would be hashed on every request for nothing; nonly:
 * how many of them have that turn id (counted by the caller, in its pass over them). */
static void reconcile_groups_init(struct reconcile_ctx *c, int64_t only, size_t nonly)
{
    size_t n = 16, ns = only < 0 ? c->nstored : nonly;
    c->capgroups = ns + 2 * c->nturns + 1;
    while (n < 2 * c->capgroups)
        n *= 2;
    c->nslots = n;
    c->slots = xcalloc(n, sizeof(*c->slots));
    c->groups = xmalloc(c->capgroups * sizeof(*c->groups));
    c->ngroups = 0;
    /* only a group's members are ever looked up in it: each is set when it joins one */
    c->snext = xmalloc((c->nstored + 1) * sizeof(*c->snext));
    for (size_t i = 0; i < c->nstored; i++) {
        if (only >= 0 && c->stored[i].turn_id != only)
            continue;
        struct reconcile_group *g = reconcile_group(c, c->stored[i].turn_id, c->stored[i].role);
        if (g->slast == RECONCILE_NONE)
            g->sfirst = i;
        else
            c->snext[g->slast] = i;
        c->snext[i] = RECONCILE_NONE;
        g->slast = i;
        g->nstored++;
        if (c->stored[i].turn_idx >= g->next_idx)
            g->next_idx = c->stored[i].turn_idx + 1;
    }
    if (only >= 0)
        return;
    c->wgroup = xmalloc((c->nturns + 1) * sizeof(*c->wgroup));
    for (size_t i = 0; i < c->nturns; i++) {
        struct reconcile_group *g = reconcile_group(c, c->turns[i].turn_id, c->turns[i].role);
        g->wtotal++;
        c->wgroup[i] = (size_t)(g - c->groups);
    }
}

static void reconcile_insert(struct reconcile_ctx *c, const struct reconcile_msg *w,
                             int64_t turn_id)
{
    json_t *t = reconcile_normalize(w->msg, c->now_ms);
    json_object_set_new(t, "turn_id", json_integer(turn_id));
    struct reconcile_group *g =
        reconcile_group(c, turn_id, w->role); /* the next of its turn and role */
    json_object_set_new(t, "turn_idx", json_integer(g->next_idx + g->inserted++));
    json_object_set_new(t, "seq", json_integer(c->next_seq++));
    json_array_append_new(c->out->inserts, t);
}

/* The stored turn matching incoming w, the idx-th of the window's m messages of its turn t
 * and role: the one of that index; in the window's oldest turn, which the window may have
 * cut at its start, the one of the same content, else the one in the same place counted from
 * the turn's end (the window holds the last m of them; when it holds more than are stored,
 * the turn was not cut and the ones past the stored are new). So a reply that came back in
 * other words (a platform's own rendering of it) stays one row when its turn becomes the
 * window's oldest, as it is while the turn is newer. Returns its position or -1. */
static long reconcile_find_by_turn(struct reconcile_ctx *c, const struct reconcile_msg *w,
                                   const struct reconcile_group *g, int64_t idx, int64_t m,
                                   int oldest)
{
    int64_t n = g->nstored; /* stored messages of w's turn and role */
    for (size_t i = g->sfirst; i != RECONCILE_NONE; i = c->snext[i]) {
        if (!c->used[i] &&
            (oldest ? reconcile_matches(&c->stored[i], w) : c->stored[i].turn_idx == idx))
            return (long)i;
    }
    int64_t at = (n > m ? n - m : 0) + idx; /* more in the window than stored: new at its end */
    for (size_t i = g->sfirst; oldest && at < n && i != RECONCILE_NONE; i = c->snext[i]) {
        if (!c->used[i] && c->stored[i].turn_idx == at)
            return (long)i;
    }
    return -1;
}

/* Turn-id mode matches only stored turns of the window's turns: leave out the older ones (the
 * working set gives only those; a caller of reconcile_run may give more). */
static void reconcile_keep_from(struct reconcile_ctx *c, int64_t oldest)
{
    size_t n = 0, i = 0;
    while (i < c->nstored && c->stored[i].turn_id >= oldest)
        i++;
    if (i == c->nstored)
        return;
    c->kept = xmalloc((c->nstored + 1) * sizeof(*c->kept));
    for (i = 0; i < c->nstored; i++) {
        if (c->stored[i].turn_id >= oldest)
            c->kept[n++] = c->stored[i];
    }
    c->stored = c->kept;
    c->nstored = n;
}

static void reconcile_turn_mode(struct reconcile_ctx *c, int64_t oldest)
{
    reconcile_keep_from(c, oldest);
    reconcile_groups_init(c, -1, 0);
    for (size_t i = 0; i < c->nturns; i++) {
        const struct reconcile_msg *w = &c->turns[i];
        int64_t t = w->turn_id;
        struct reconcile_group *g = &c->groups[c->wgroup[i]];
        /* its index among the window's messages of its turn and role; in the oldest turn,
         * which the window may have cut, also how many the window has */
        int64_t idx = (int64_t)g->wseen++, m = t == oldest ? (int64_t)g->wtotal : idx;
        long at = reconcile_find_by_turn(c, w, g, idx, m, t == oldest);
        if (strcmp(w->role, "user") == 0)
            c->out->reply_turn = t;
        if (at < 0) {
            reconcile_insert(c, w, t);
            continue;
        }
        c->used[at] = 1;
        reconcile_update(&c->stored[at], w, c->now_ms, c->out->updates);
    }
}

/* How a window lines up with the stored turns: a run of them (reconcile_run_back) of len
 * messages ends at window message p and stored turn s; the window's turns from new_from on
 * are new. */
struct reconcile_span {
    size_t p, s, len, new_from;
    int exact; /* its pair at p is the same text, not what was heard of a reply */
};

/* At most this many stored replies in a row are passed over in a run: a reply and a prompt
 * or two the client left out. Unbounded, a window against a long stretch of replies would
 * cost its length times theirs. */
#define RECONCILE_SKIP_MAX 4

/* Stored reply s matches w; but the stored replies just before it (within the run's budget
 * of replies to pass over) may hold one of a later turn that w matches too: then that one.
 * On replicas a reply can be recorded after a later turn's (a barge-in's, its stream ended
 * while another replica answered the next request); what was heard of that later reply
 * begins as the late one does ("Answer"), and taken for the late one it would leave the
 * later turn's question (of a greater turn id) no place in the run. */
static size_t reconcile_latest_pair(const struct reconcile_ctx *c, size_t s,
                                    const struct reconcile_msg *w, int64_t turn, size_t skipped)
{
    size_t best = s;
    for (size_t j = s; j-- > 0 && skipped++ < RECONCILE_SKIP_MAX;) {
        const struct reconcile_view *x = &c->stored[j];
        if (x->role[0] != 'a')
            break;
        if (x->turn_id <= turn && x->turn_id > c->stored[best].turn_id && reconcile_matches(x, w))
            best = j;
    }
    return best;
}

/* The run of stored turns up to `end` that ends at window message p, walked back: a stored
 * turn that matches the window's message there pairs with it; a stored reply that does not is
 * passed over (a client may leave out a reply the caller never heard, and a barge-in's reply
 * can be recorded after the next question); anything else ends the run. Paired turns' ids
 * never grow going back: a reply recorded after the next question (turn 9's after question
 * 10) does not pair with a message that follows question 10 in the window, however it
 * begins (what was heard of reply 10, not yet recorded, can begin as reply 9 does). Returns
 * how many window messages it pairs; with update, records each pair's update. */
static size_t reconcile_run_back(struct reconcile_ctx *c, size_t p, size_t end, int update)
{
    size_t k = 0, skipped = 0;
    int64_t turn = INT64_MAX;
    c->run_exact = 0;
    for (size_t s = end + 1; k <= p && s-- > 0;) {
        const struct reconcile_view *v = &c->stored[s];
        const struct reconcile_msg *w = &c->turns[p - k];
        if (v->turn_id <= turn && reconcile_matches(v, w)) {
            if (v->role[0] == 'a') {
                s = reconcile_latest_pair(c, s, w, turn, skipped);
                v = &c->stored[s];
            }
            if (k == 0)
                c->run_exact = reconcile_same(v, w);
            if (update && p - k == c->last_user)
                c->out->reply_turn = v->turn_id;
            if (update)
                reconcile_update(v, w, c->now_ms, c->out->updates);
            turn = v->turn_id;
            k++;
            skipped = 0;
        } else if (v->role[0] != 'a' || ++skipped > RECONCILE_SKIP_MAX) {
            break;
        }
    }
    return k;
}

/* Case 3's and 4's run: the window's messages from p0 on matched against the stored turns
 * from s on, passing over stored replies the window left out as reconcile_run_back does
 * (paired turn ids never shrinking going forward); *last is the stored index of its last
 * pair. */
static size_t reconcile_run_fwd(struct reconcile_ctx *c, size_t s, size_t p0, size_t *last)
{
    size_t k = 0, skipped = 0;
    int64_t turn = INT64_MIN;
    for (; s < c->nstored && p0 + k < c->nturns; s++) {
        const struct reconcile_view *v = &c->stored[s];
        if (v->turn_id >= turn && reconcile_matches(v, &c->turns[p0 + k])) {
            turn = v->turn_id;
            *last = s;
            k++;
            skipped = 0;
        } else if (k == 0 || v->role[0] != 'a' || ++skipped > RECONCILE_SKIP_MAX) {
            break;
        }
    }
    return k;
}

/*
 * 1. Where does the end of what is stored appear in the window? The longest run wins (a
 *    run may pass over stored replies the window left out, reconcile_run_back); on a tie the
 *    earlier position, so an exchange repeated word for word is not mistaken for the one
 *    before it. What follows is new.
 * 2. Otherwise the window may lie wholly inside the stored turns (a request replayed while
 *    its reply was being recorded; on replicas, a request recorded after the next ones,
 *    which other replicas answered meanwhile): nothing is new.
 * 3. Otherwise the longest run of the window's start found anywhere; the rest is new. Cases 2
 *    and 3 are one pass, its runs passing over stored replies the window left out as case
 *    1's do.
 * 4. Otherwise the window may begin before the stored turns (they are the working set's, the
 *    newest only: a client that resends a whole conversation longer than that, whose request
 *    came after the next ones, on replicas): the longest run from the first stored turn,
 *    found at a later window message; what follows it is new, nothing when it reaches the
 *    window's end, as in cases 3 and 2. Without it the whole window would be stored again. Like
 *    case 2, a run that reaches the window's end wins over case 1's when that one pairs its
 *    message with what was heard of the newest reply ("Answer" begins every reply).
 * Case 2 also wins over case 1 when case 1's run pairs its window message p with what was
 * heard of a stored reply, not with its text, and the window lies wholly inside the stored
 * turns: what was heard of an old reply ("Answer") begins the newest reply as well (on
 * replicas, a request recorded after later turns were), and taken for the end of what is
 * stored that one message would store every later message of the window again. Case 3 never
 * does: a run from the window's start that stops short (at a reply the client rewrote in its
 * copy) says less than one from the end of what is stored.
 */
static struct reconcile_span reconcile_align(struct reconcile_ctx *c)
{
    size_t ns = c->nstored, nw = c->nturns;
    struct reconcile_span best = {.new_from = 0};
    for (size_t p = 0; ns > 0 && p < nw; p++) {
        size_t l = reconcile_run_back(c, p, ns - 1, 0);
        if (l > best.len)
            best = (struct reconcile_span){p, ns - 1, l, p + 1, c->run_exact};
    }
    if (nw == 0 || (best.len > 0 && best.exact))
        return best;
    size_t found = best.len; /* case 1's, which only a whole window's run replaces */
    /* Only a reply matches a stored turn of other content (what was heard of it): any other
     * first message can start a run only where the contents hash alike. In a long call whose
     * client sends only its newest message, that is no stored turn, found in one tight pass. */
    int by_hash = c->turns[0].role[0] != 'a';
    uint64_t h = c->turns[0].chash;
    for (size_t i = 0; i < ns; i++) {
        if (by_hash && c->stored[i].chash != h)
            continue;
        size_t last = i, k = reconcile_run_fwd(c, i, 0, &last);
        if (k > best.len && (found == 0 || k == nw))
            best = (struct reconcile_span){k - 1, last, k, k, 1};
    }
    if (best.len > found) /* a run from the window's start: cases 2 and 3 */
        return best;
    struct reconcile_span before = {.new_from = 0}; /* case 4 */
    for (size_t p0 = 1; p0 < nw; p0++) {
        size_t last = 0, k = reconcile_run_fwd(c, 0, p0, &last);
        if (k > before.len && (found == 0 || (p0 + k == nw && k >= found)))
            before = (struct reconcile_span){p0 + k - 1, last, k, p0 + k, 1};
    }
    return before.len > 0 ? before : best;
}

static void reconcile_align_mode(struct reconcile_ctx *c)
{
    size_t i, nturn = 0;
    int64_t turn = 0;
    for (i = 0; i < c->nstored; i++) { /* the newest turn id, and how many turns it has */
        int64_t t = c->stored[i].turn_id;
        nturn = t > turn ? 1 : nturn + (t == turn);
        turn = t > turn ? t : turn;
    }
    reconcile_groups_init(c, turn, nturn);
    c->last_user = c->nturns;
    for (i = c->nturns; i-- > 0 && c->last_user == c->nturns;)
        if (strcmp(c->turns[i].role, "user") == 0)
            c->last_user = i;
    struct reconcile_span sp = reconcile_align(c);
    if (sp.len > 0) /* the same walk again, recording the pairs' updates */
        reconcile_run_back(c, sp.p, sp.s, 1);
    for (i = sp.new_from; i < c->nturns; i++) {
        if (turn == 0 || strcmp(c->turns[i].role, "user") == 0)
            turn++; /* each new user message opens a turn */
        if (i == c->last_user)
            c->out->reply_turn = turn;
        reconcile_insert(c, &c->turns[i], turn);
    }
}

/* The voice fields of a client's metadata, in one pass over it. */
static void reconcile_msg_meta(struct reconcile_msg *w, json_t *meta)
{
    w->interrupt_ms = -1;
    for (void *it = json_object_iter(meta); it != NULL; it = json_object_iter_next(meta, it)) {
        const char *k = json_object_iter_key(it);
        json_t *v = json_object_iter_value(it);
        if (k[0] == 'i' && strcmp(k, "interrupted") == 0)
            w->interrupted = json_is_true(v);
        else if (k[0] == 'o' && strcmp(k, "original") == 0)
            w->original = json_is_string(v) ? v : NULL;
        else if (k[0] == 'i' && strcmp(k, "interrupt_timestamp") == 0)
            w->interrupt_ms = msg_timestamp_ms(v);
    }
}

/* The fields of a client's message that matching reads. */
struct reconcile_msg_fields {
    json_t *role, *content, *meta, *turn_id, *audio;
};

/* One pass over the message, each key told apart by its first byte before it is compared. */
static void reconcile_msg_fields(json_t *m, struct reconcile_msg_fields *f)
{
    *f = (struct reconcile_msg_fields){0};
    for (void *it = json_object_iter(m); it != NULL; it = json_object_iter_next(m, it)) {
        const char *k = json_object_iter_key(it);
        json_t *v = json_object_iter_value(it);
        if (k[0] == 'r' && strcmp(k, "role") == 0)
            f->role = v;
        else if (k[0] == 'c' && strcmp(k, "content") == 0)
            f->content = v;
        else if (k[0] == 'm' && strcmp(k, "metadata") == 0)
            f->meta = v;
        else if (k[0] == 't' && strcmp(k, "turn_id") == 0)
            f->turn_id = v;
        else if (k[0] == 'a' && strcmp(k, "audio") == 0)
            f->audio = v;
    }
}

/* A turn's share of the window's fingerprint: its role, turn_id, interrupted flag and
 * content, chained through util_hash64 (each call takes its length in, so the parts cannot
 * run into each other); reconcile_window_read() chains the turns' shares. Stored with the session
 * (window_hash): a value from a version that hashed otherwise (before 0.1.2: the turns' fields
 * chained directly) only costs that session one full reconciliation. */

static uint64_t reconcile_msg_hash(const struct reconcile_msg *w)
{
    int64_t head[2] = {w->turn_id, w->interrupted};
    uint64_t h = util_hash64(RECONCILE_HASH_SEED, w->role, strlen(w->role));
    h = util_hash64(h, head, sizeof(head));
    if (w->audio_id != NULL) /* its text is no text: the reply it refers to is */
        h = util_hash64(h, w->audio_id, strlen(w->audio_id));
    return util_hash64(h, reconcile_content(w), json_string_length(w->text));
}

/* Read client message m as a window message. */
static void reconcile_msg_read(struct reconcile_msg *w, json_t *m)
{
    struct reconcile_msg_fields f;
    int dropped;
    reconcile_msg_fields(m, &f);
    *w = (struct reconcile_msg){.msg = m, .role = json_string_value(f.role), .turn_id = -1};
    if (w->role == NULL)
        return;
    w->text = json_is_string(f.content) ? json_incref(f.content) : msg_text(f.content, &dropped);
    w->kind = msg_role_is_system(w->role) ? RECONCILE_SYSTEM : RECONCILE_TURN;
    if (w->kind == RECONCILE_SYSTEM)
        return;
    w->turn_id = msg_turn_id(f.turn_id);
    reconcile_msg_meta(w, f.meta);
    if (f.audio != NULL && json_string_length(w->text) == 0)
        w->audio_id = msg_audio_ref(m);
    w->hash = reconcile_msg_hash(w);
    w->chash = util_hash64(RECONCILE_HASH_SEED, reconcile_content(w), strlen(reconcile_content(w)));
}

json_t *reconcile_heard(json_t *stored, json_t *msg, int64_t now_ms)
{
    struct reconcile_view s;
    struct reconcile_msg w;
    json_t *out = json_array();
    reconcile_view_read(&s, stored);
    reconcile_msg_read(&w, msg);
    if (w.kind == RECONCILE_TURN && reconcile_matches(&s, &w))
        reconcile_update(&s, &w, now_ms, out);
    json_decref(w.text);
    json_t *u = json_incref(json_array_get(out, 0));
    json_decref(out);
    return u;
}

static void reconcile_msg_release(void *p)
{
    struct reconcile_msg *w = p;
    json_decref(w->text);
    free(w);
}

/* Message m read, or as it was read before when memo holds it: a kept tree never changes
 * (jmemo.h), and every field read points into it. */
static void reconcile_msg_of(struct jmemo *memo, json_t *m, struct reconcile_msg *w)
{
    struct jmemo_tree *t = jmemo_find(memo, m);
    const struct reconcile_msg *kept = jmemo_aux(t);
    if (kept != NULL) {
        *w = *kept;
        json_incref(w->text);
        return;
    }
    reconcile_msg_read(w, m);
    if (t == NULL)
        return;
    struct reconcile_msg *k = xmalloc(sizeof(*k));
    *k = *w;
    json_incref(k->text);
    jmemo_set_aux(memo, t, k, sizeof(*k), reconcile_msg_release);
}

struct reconcile_window *reconcile_window_read(json_t *incoming, struct jmemo *memo)
{
    size_t i, n = json_array_size(incoming);
    json_t *m;
    struct reconcile_window *w = xcalloc(1, sizeof(*w));
    struct reconcile_msg x;
    uint64_t h = RECONCILE_HASH_SEED;
    int64_t oldest = INT64_MAX, newest = -1;
    w->turns = xmalloc((n + 1) * sizeof(*w->turns));
    w->system = xmalloc((n + 1) * sizeof(*w->system));
    json_array_foreach(incoming, i, m) {
        reconcile_msg_of(memo, m, &x);
        if (x.kind == RECONCILE_SYSTEM)
            w->system[w->nsystem++] = x;
        if (x.kind != RECONCILE_TURN)
            continue;
        w->turns[w->nturns++] = x;
        h = util_hash64(h, &x.hash, sizeof(x.hash));
        oldest = x.turn_id < 0 || oldest < 0 ? -1 : x.turn_id < oldest ? x.turn_id : oldest;
        newest = x.turn_id > newest ? x.turn_id : newest;
    }
    w->hash = h ? h : 1;
    w->oldest = w->nturns > 0 ? oldest : -1;
    w->newest = w->oldest >= 0 ? newest : -1;
    return w;
}

int64_t reconcile_window_oldest(const struct reconcile_window *w)
{
    return w->oldest;
}

int64_t reconcile_window_newest(const struct reconcile_window *w)
{
    return w->newest;
}

static int reconcile_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t *reconcile_window_turn_ids(const struct reconcile_window *w, size_t *count)
{
    int64_t *ids = xmalloc((w->nturns + 1) * sizeof(*ids));
    size_t n = 0;
    for (size_t i = 0; i < w->nturns; i++)
        if (w->turns[i].turn_id >= 0)
            ids[n++] = w->turns[i].turn_id;
    qsort(ids, n, sizeof(*ids), reconcile_cmp_i64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    *count = k;
    return ids;
}

void reconcile_window_free(struct reconcile_window *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->nturns; i++)
        json_decref(w->turns[i].text);
    for (size_t i = 0; i < w->nsystem; i++)
        json_decref(w->system[i].text);
    free(w->turns);
    free(w->system);
    free(w);
}

/* The window's system messages [{role, content}], or NULL when it has none. */
static json_t *reconcile_system(const struct reconcile_window *w)
{
    json_t *out = w->nsystem > 0 ? json_array() : NULL;
    for (size_t i = 0; i < w->nsystem; i++)
        json_array_append_new(
            out, json_pack("{s:s, s:O}", "role", w->system[i].role, "content", w->system[i].text));
    return out;
}

void reconcile_run_views(const struct reconcile_view *stored, size_t ns,
                         const struct reconcile_window *w, uint64_t last_hash, int64_t now_ms,
                         struct reconcile_result *out)
{
    struct reconcile_ctx c = {
        .now_ms = now_ms, .out = out, .next_seq = 1, .turns = w->turns, .nturns = w->nturns};
    memset(out, 0, sizeof(*out));
    out->reply_turn = -1;
    out->inserts = json_array();
    out->updates = json_array();
    out->window_hash = w->hash;
    if (out->window_hash == last_hash) /* the same request again */
        return;
    out->system = reconcile_system(w);
    c.stored = stored;
    c.nstored = ns;
    c.used = xcalloc(ns + 1, 1);
    for (size_t i = ns; i-- > 0;) { /* in seq order: the last one numbered is the highest */
        if (stored[i].seq >= c.next_seq)
            c.next_seq = stored[i].seq + 1;
        if (stored[i].seq >= 0)
            break;
    }
    if (w->oldest >= 0)
        reconcile_turn_mode(&c, w->oldest);
    else
        reconcile_align_mode(&c);
    free(c.groups);
    free(c.slots);
    free(c.snext);
    free(c.wgroup);
    free(c.used);
    free(c.kept);
}

void reconcile_run(json_t *stored, json_t *incoming, uint64_t last_hash, int64_t now_ms,
                   struct reconcile_result *out)
{
    size_t ns = json_array_size(stored);
    struct reconcile_view *v = xmalloc((ns + 1) * sizeof(*v));
    for (size_t i = 0; i < ns; i++)
        reconcile_view_read(&v[i], json_array_get(stored, i));
    struct reconcile_window *w = reconcile_window_read(incoming, NULL);
    reconcile_run_views(v, ns, w, last_hash, now_ms, out);
    reconcile_window_free(w);
    free(v);
}

void reconcile_result_clear(struct reconcile_result *r)
{
    json_decref(r->inserts);
    json_decref(r->updates);
    json_decref(r->system);
    memset(r, 0, sizeof(*r));
}
