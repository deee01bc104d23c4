#include "memory/store_batch.h"

#include "base/util.h"

#include <string.h>

struct store_batch *store_batch_new(const char *tenant, const char *session_id)
{
    struct store_batch *b = xcalloc(1, sizeof(*b));
    b->tenant = xstrdup(tenant);
    b->session_id = session_id ? xstrdup(session_id) : NULL;
    return b;
}

/* data is copied unless shared: then the batch keeps a reference (store.h, Ownership). */
static struct store_op *store_batch_push(struct store_batch *b, enum store_op_kind kind,
                                         json_t *data, int shared)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 8;
        b->ops = xrealloc(b->ops, b->cap * sizeof(*b->ops));
    }
    struct store_op *op = &b->ops[b->n++];
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    if (data != NULL)
        op->data = shared ? json_incref(data) : json_deep_copy(data);
    return op;
}

static struct store_op *store_batch_add(struct store_batch *b, enum store_op_kind kind,
                                        json_t *data)
{
    return store_batch_push(b, kind, data, 0);
}

void store_batch_session(struct store_batch *b, const char *user_id, const char *profile)
{
    struct store_op *op = store_batch_add(b, STORE_OP_SESSION, NULL);
    op->id = user_id ? xstrdup(user_id) : NULL;
    op->profile = profile ? xstrdup(profile) : NULL;
}

void store_batch_window(struct store_batch *b, json_t *system, uint64_t window_hash)
{
    store_batch_add(b, STORE_OP_WINDOW, system)->hash = window_hash;
}

void store_batch_window_turns(struct store_batch *b, int64_t turns)
{
    store_batch_add(b, STORE_OP_WINDOW_TURNS, NULL)->hash = (uint64_t)turns;
}

void store_batch_insert(struct store_batch *b, json_t *turn)
{
    store_batch_push(b, STORE_OP_INSERT, turn, 1);
}

void store_batch_update(struct store_batch *b, json_t *update)
{
    store_batch_push(b, STORE_OP_UPDATE, update, 1);
}

void store_batch_replace(struct store_batch *b, json_t *turn)
{
    store_batch_push(b, STORE_OP_REPLACE, turn, 1);
}

void store_batch_embed(struct store_batch *b)
{
    b->embed = 1;
}

void store_batch_known_embedding(struct store_batch *b, const char *model, const char *text,
                                 const float *vec, size_t dim)
{
    free(b->known_model);
    free(b->known_text);
    free(b->known_vec);
    b->known_model = xstrdup(model);
    b->known_text = xstrdup(text);
    b->known_len = dim * sizeof(float);
    b->known_vec = xmalloc(b->known_len);
    memcpy(b->known_vec, vec, b->known_len);
}

void store_batch_embedding(struct store_batch *b, const struct store_embedding *e)
{
    json_t *d = json_pack("{s:I, s:I, s:s, s:s, s:s?, s:I}", "sid", (json_int_t)e->sid, "seq",
                          (json_int_t)e->seq, "model", e->model, "text", e->text, "error", e->error,
                          "retry_ms", (json_int_t)e->retry_ms);
    struct store_op *op = store_batch_add(b, STORE_OP_EMBEDDING, d);
    json_decref(d);
    if (e->vec != NULL && e->error == NULL && e->retry_ms == 0) {
        op->blob_len = e->dim * sizeof(float);
        op->blob = xmalloc(op->blob_len);
        memcpy(op->blob, e->vec, op->blob_len);
    }
}

void store_batch_existing(struct store_batch *b)
{
    b->existing = 1;
}

void store_batch_stop(struct store_batch *b, json_t *how)
{
    store_batch_add(b, STORE_OP_STOP, how);
}

void store_batch_delete(struct store_batch *b)
{
    store_batch_add(b, STORE_OP_DELETE, NULL);
}

void store_batch_runtime(struct store_batch *b, json_t *system_messages)
{
    store_batch_add(b, STORE_OP_RUNTIME, system_messages);
}

void store_batch_patch(struct store_batch *b, json_t *fields)
{
    store_batch_add(b, STORE_OP_PATCH, fields);
}

void store_batch_import(struct store_batch *b, json_t *snapshot)
{
    store_batch_add(b, STORE_OP_IMPORT, snapshot);
}

void store_batch_user_erase(struct store_batch *b, const char *user_id)
{
    store_batch_add(b, STORE_OP_USER_ERASE, NULL)->id = xstrdup(user_id);
}

void store_batch_user_memory(struct store_batch *b, const char *user_id, json_t *memory)
{
    store_batch_add(b, STORE_OP_USER_MEMORY, memory)->id = xstrdup(user_id);
}

void store_batch_outbox_result(struct store_batch *b, json_t *result)
{
    store_batch_add(b, STORE_OP_OUTBOX_RESULT, result);
}

void store_batch_cache_put(struct store_batch *b, json_t *entry)
{
    store_batch_add(b, STORE_OP_CACHE_PUT, entry);
}

void store_batch_summary(struct store_batch *b, json_t *outcome)
{
    store_batch_add(b, STORE_OP_SUMMARY, outcome);
}

void store_batch_outbox_retry(struct store_batch *b, const char *notice_id)
{
    store_batch_add(b, STORE_OP_OUTBOX_RETRY, NULL)->id = xstrdup(notice_id);
}

void store_batch_defer(struct store_batch *b)
{
    b->deferred = 1;
}

void store_batch_on_writer(struct store_batch *b, store_done_cb cb, void *arg)
{
    b->on_writer = cb;
    b->on_writer_arg = arg;
}

size_t store_batch_ops(const struct store_batch *b)
{
    return b->n;
}

void store_batch_free(struct store_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n; i++) {
        json_decref(b->ops[i].data);
        free(b->ops[i].id);
        free(b->ops[i].profile);
        free(b->ops[i].blob);
    }
    free(b->ops);
    free(b->tenant);
    free(b->session_id);
    free(b->known_model);
    free(b->known_text);
    free(b->known_vec);
    free(b);
}

static int store_batch_cmp(const struct store_batch *a, const struct store_batch *b)
{
    int c = strcmp(a->tenant, b->tenant);
    return c != 0 ? c : strcmp(a->session_id, b->session_id);
}

/* A stable merge sort of session batches (a group under load holds hundreds). */
static struct store_batch *store_batch_sort(struct store_batch *l)
{
    if (l == NULL || l->next == NULL)
        return l;
    struct store_batch *slow = l, *fast = l->next;
    while (fast != NULL && fast->next != NULL) {
        slow = slow->next;
        fast = fast->next->next;
    }
    struct store_batch *r = store_batch_sort(slow->next), *head = NULL, **tail = &head;
    slow->next = NULL;
    l = store_batch_sort(l);
    while (l != NULL && r != NULL) {
        struct store_batch **from = store_batch_cmp(l, r) <= 0 ? &l : &r; /* equals: l's first */
        *tail = *from;
        *from = (*from)->next;
        tail = &(*tail)->next;
    }
    *tail = l != NULL ? l : r;
    return head;
}

struct store_batch *store_batch_order(struct store_batch *list)
{
    struct store_batch *head = NULL, **tail = &head;
    while (list != NULL) {
        struct store_batch *run = list, **end = &run, *rest;
        while (*end != NULL && (*end)->session_id != NULL) /* the session batches up to the next */
            end = &(*end)->next;
        rest = *end; /* a batch of no session, or none */
        *end = NULL;
        for (*tail = store_batch_sort(run); *tail != NULL; tail = &(*tail)->next)
            ;
        list = NULL;
        if (rest != NULL) { /* where it was */
            list = rest->next;
            rest->next = NULL;
            *tail = rest;
            tail = &rest->next;
        }
    }
    return head;
}
