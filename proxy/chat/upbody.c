#include "proxy/chat/upbody.h"

#include "base/jmemo.h"
#include "base/msg.h"
#include "base/spoken.h"
#include "base/util.h"
#include "config/cfg.h"
#include "memory/cache.h"
#include "memory/callsum.h"
#include "memory/memory.h"
#include "memory/recall.h"
#include "proxy/chat/chatreq.h"
#include "transforms/tx.h"

#include <event2/keyvalq_struct.h>
#include <string.h>

struct upbody {
    struct upbody_in in;
    struct memory_context mc;
    json_t *up, *msgs;
    size_t history_n;
    struct recall_pick *pick; /* retrieval's, filled by its read */
};

/* A stored turn's fields other than its text, for the memo's estimate of its size. */
#define UPBODY_TURN_FIELDS 256

/* The stored turns never change (memory.h) and come again with every request: the worker's
 * memo holds them, so that the transforms' work on a turn and its text are made once. The
 * same for the session's injected messages (its runtime system messages, the caller's summary
 * and facts): inject_memory counts their tokens once, not on every request. */
static void upbody_hold(struct jmemo *memo, json_t *messages)
{
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (memo != NULL && jmemo_find(memo, m) == NULL)
            jmemo_hold(memo, m, tx_tokens(NULL, m) * TX_CHARS_PER_TOKEN + UPBODY_TURN_FIELDS);
    }
}

/* Do message m and stored turn t say the same (role and text; a reply's text as spoken: a
 * platform sends back its text-to-speech's words, base/spoken.h)? */
static int upbody_same_turn(json_t *m, json_t *t)
{
    int dropped = 0;
    if (strcmp(msg_role(m), msg_role(t)) != 0)
        return 0;
    json_t *a = msg_text(json_object_get(m, "content"), &dropped);
    json_t *b = msg_text(json_object_get(t, "content"), &dropped);
    int same = json_equal(a, b) ||
               (strcmp(msg_role(t), "assistant") == 0 &&
                spoken_compare(json_string_value(b), json_string_value(a)) == SPOKEN_SAME);
    json_decref(a);
    json_decref(b);
    return same;
}

/* Stored mode, a client that resends its window anyway: the leading non-system messages that
 * repeat the end of the stored history are taken out of the request, so neither the upstream
 * nor the record gets them twice. The longest such overlap wins. Only as many of the
 * history's last turns as the request has messages are looked at (one, for a client that
 * sends only its new message), not the whole history. */
static void upbody_drop_resent(json_t *messages, json_t *history)
{
    json_t *mine = json_array(), *theirs = json_array(), *m;
    size_t i, k, nm;
    json_array_foreach(messages, i, m) {
        if (!msg_role_is_system(msg_role(m)))
            json_array_append(mine, m);
    }
    nm = json_array_size(mine);
    for (i = json_array_size(history); i-- > 0 && json_array_size(theirs) < nm;) {
        m = json_array_get(history, i);
        if (!msg_role_is_system(msg_role(m)))
            json_array_insert(theirs, 0, m);
    }
    size_t nh = json_array_size(theirs);
    for (k = nh; k > 0; k--) {
        size_t j = 0;
        while (j < k &&
               upbody_same_turn(json_array_get(mine, j), json_array_get(theirs, nh - k + j)))
            j++;
        if (j == k)
            break;
    }
    for (i = 0; k > 0 && i < json_array_size(messages);) {
        if (msg_role_is_system(msg_role(json_array_get(messages, i)))) {
            i++;
            continue;
        }
        json_array_remove(messages, i);
        k--;
    }
    json_decref(mine);
    json_decref(theirs);
}

/* What the model is sent, before the transforms: the profile's system messages, then the
 * client's messages — in stored mode with the session's history between the client's system
 * messages (or, when it sent none, the ones it sent last: system) and its new ones. *history
 * gets the number of stored messages put in. */
static json_t *upbody_messages(const struct upbody_in *in, json_t *history, json_t *system,
                               size_t *history_n)
{
    const struct cfg_profile *prof = in->prof;
    json_t *out = json_array(), *m;
    size_t i;
    int own = 0;
    for (i = 0; i < prof->system_messages.n; i++)
        json_array_append_new(
            out, json_pack("{s:s, s:s}", "role", "system", "content", prof->system_messages.v[i]));
    if (history == NULL) {
        json_array_extend(out, in->creq->messages);
        return out;
    }
    json_array_foreach(in->creq->messages, i, m)
        if (msg_role_is_system(msg_role(m)))
            json_array_append(out, m), own = 1;
    if (!own && system != NULL) /* the session's system prompt, from an earlier request */
        json_array_extend(out, system);
    upbody_hold(in->memo, history);
    json_array_extend(out, history);
    *history_n = json_array_size(history);
    json_array_foreach(in->creq->messages, i, m)
        if (!msg_role_is_system(msg_role(m)))
            json_array_append(out, m);
    return out;
}

/* Retrieval's pick for the messages being sent (the candidates are read next). */
static struct recall_pick *upbody_recall_pick(const struct upbody_in *in, json_t *msgs)
{
    const struct cfg_profile *p = in->prof;
    struct recall_opts o = {.recent = (size_t)p->retrieval_recent,
                            .importance = p->retrieval_importance,
                            .similarity = p->retrieval_similarity,
                            .relevant = (size_t)p->retrieval_relevant,
                            .budget_tokens = (size_t)p->retrieval_budget,
                            .tokenizer = p->tokenizer};
    return recall_pick_new(&o, in->query, in->qdim, msgs);
}

/* The retrieved turns' system message, put last among the injected ones; the number of turns
 * it holds. */
static size_t upbody_recalled_message(struct upbody *b)
{
    struct recall_stats st;
    json_t *m = recall_pick_message(b->pick, &st);
    recall_pick_free(b->pick);
    b->pick = NULL;
    if (m == NULL)
        return st.injected;
    if (b->mc.inject == NULL)
        b->mc.inject = json_array();
    json_array_append_new(b->mc.inject, m);
    return st.injected;
}

/* The remembered memory among what inject_memory adds (msg.h's marked messages): the key may
 * not have it. The operator's runtime system messages stay. */
static void upbody_drop_memory(json_t *inject)
{
    for (size_t i = json_array_size(inject); i-- > 0;) {
        if (json_object_get(json_array_get(inject, i), MSG_MEMORY_KEY) != NULL)
            json_array_remove(inject, i);
    }
}

/* X-Memproxy-Context: "messages=N; history=N; trimmed=N; injected=N[; recalled=N][;
 * tokens=N]", the counts whose bit is set in which (written by hand: it is on every request,
 * and printf is slow). */
static void upbody_context_header(struct evhttp_request *req, const size_t *counts, unsigned which)
{
    static const char *const names[] = {
        "messages=", "; history=", "; trimmed=", "; injected=", "; recalled=", "; tokens="};
    char v[192], *p = v;
    for (size_t i = 0; i < UTIL_ARRAY_LEN(names); i++) {
        if (!(which & 1u << i))
            continue;
        size_t k = strlen(names[i]);
        memcpy(p, names[i], k);
        p = util_put_u64(p + k, counts[i]);
    }
    *p = '\0';
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Memproxy-Context", v);
}

struct upbody *upbody_begin(const struct upbody_in *in)
{
    struct upbody *b = xcalloc(1, sizeof(*b));
    b->in = *in;
    if (in->rec != NULL)
        memory_rec_context(in->rec, in->stored, &b->mc);
    upbody_hold(in->memo, b->mc.inject);
    b->up = chatreq_upstream(in->creq, in->prof->model);
    chatreq_apply_params(b->up, b->mc.params);
    if (b->mc.history != NULL)
        upbody_drop_resent(in->creq->messages, b->mc.history);
    b->msgs = upbody_messages(in, b->mc.history, b->mc.system, &b->history_n);
    if (in->recall)
        b->pick = upbody_recall_pick(in, b->msgs);
    return b;
}

struct recall_pick *upbody_pick(struct upbody *b)
{
    return b->pick;
}

char *upbody_end(struct upbody *b, struct evhttp_request *req, char key[65], size_t *len)
{
    const struct upbody_in *in = &b->in;
    const struct cfg_profile *prof = in->prof;
    size_t recalled = b->pick != NULL ? upbody_recalled_message(b) : 0, history_n = b->history_n;
    if (in->no_memory)
        upbody_drop_memory(b->mc.inject);
    struct tx_ctx tx = {.prof = prof,
                        .body = b->up,
                        .inject = b->mc.inject,
                        .user_id = in->user,
                        .user_info = b->mc.user_info,
                        .memo = in->memo};
    tx_run(&tx, b->msgs);
    if (in->rec != NULL && b->mc.history != NULL) /* the stored turns kept, and the new ones */
        memory_rec_window(in->rec,
                          (int64_t)(history_n - (tx.trimmed < history_n ? tx.trimmed : history_n)) +
                              callsum_window_turns(in->creq->messages));
    json_object_set_new(b->up, "messages", b->msgs);
    b->msgs = NULL;
    key[0] = '\0';
    if (prof->cache && cache_key(in->tenant, prof->name, b->up, key) != 0)
        key[0] = '\0'; /* it depends on earlier context */
    if (prof->context_header) {
        size_t counts[] = {json_array_size(json_object_get(b->up, "messages")),
                           history_n,
                           tx.trimmed,
                           tx.injected,
                           recalled,
                           tx.tokens};
        upbody_context_header(req, counts,
                              0xfu | (prof->retrieval ? 0x10u : 0) | (tx.tokens ? 0x20u : 0));
    }
    return chatreq_dump(b->up, in->memo, len);
}

void upbody_free(struct upbody *b)
{
    if (b == NULL)
        return;
    json_decref(b->up);
    json_decref(b->msgs);
    json_decref(b->mc.history);
    json_decref(b->mc.inject);
    json_decref(b->mc.params);
    json_decref(b->mc.user_info);
    json_decref(b->mc.system);
    recall_pick_free(b->pick);
    free(b);
}
