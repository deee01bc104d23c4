#include "memory/recall.h"

#include "base/jtext.h"
#include "base/msg.h"
#include "base/tiktoken.h"
#include "base/util.h"
#include "memory/reconcile.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- embeddings on the wire ---- */

/* s cut to at most max bytes, never inside a UTF-8 sequence. */
static json_t *recall_cut(const char *s, size_t max)
{
    size_t len = strlen(s);
    if (len > max) {
        len = max;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
    }
    return json_stringn(s, len);
}

json_t *recall_embed_request(const char *model, const char *const *texts, size_t n)
{
    json_t *input = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(input, recall_cut(texts[i], RECALL_MAX_TEXT));
    return json_pack("{s:s, s:o, s:s}", "model", model, "input", input, "encoding_format", "float");
}

/* One embedding as floats: an array of finite numbers, or base64 float32. Its length, or 0
 * when it is neither (or empty, or too long). */
static size_t recall_vector(json_t *e, float *out)
{
    size_t i, n = 0;
    json_t *v;
    if (json_is_array(e)) {
        if (json_array_size(e) > RECALL_MAX_DIM)
            return 0;
        json_array_foreach(e, i, v) {
            double d = json_number_value(v);
            if (!json_is_number(v) || !isfinite(d) || fabs(d) > 3.4e38)
                return 0;
            out[n++] = (float)d;
        }
        return n;
    }
    const char *b64 = json_string_value(e);
    size_t len = json_string_length(e);
    if (b64 == NULL || len == 0 || len % 4 != 0 || len / 4 * 3 > RECALL_MAX_DIM * sizeof(float))
        return 0;
    int got = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)b64, (int)len);
    size_t pad = (b64[len - 1] == '=') + (b64[len - 2] == '=');
    if (got < 0 || ((size_t)got - pad) % sizeof(float) != 0)
        return 0;
    n = ((size_t)got - pad) / sizeof(float);
    for (i = 0; i < n; i++) {
        if (!isfinite(out[i]))
            return 0;
    }
    return n;
}

/* Put data[k] (for input index) into vecs; the first one sets the dimension. */
static int recall_take(json_t *item, size_t k, size_t n, float *vecs, size_t *dim, char *seen,
                       float *scratch, char **err)
{
    json_t *jidx = json_object_get(item, "index");
    json_int_t idx = jidx == NULL ? (json_int_t)k : json_integer_value(jidx);
    if ((jidx != NULL && !json_is_integer(jidx)) || idx < 0 || (size_t)idx >= n || seen[idx]) {
        *err = xasprintf("data[%zu]: a bad or repeated index", k);
        return -1;
    }
    size_t d = recall_vector(json_object_get(item, "embedding"), scratch);
    if (d == 0 || (*dim != 0 && d != *dim)) {
        *err = xasprintf("data[%zu]: the embedding is not a vector of the answer's size", k);
        return -1;
    }
    *dim = d;
    seen[idx] = 1;
    memcpy(vecs + (size_t)idx * RECALL_MAX_DIM, scratch, d * sizeof(float));
    return 0;
}

int recall_parse_embeddings(const char *body, size_t len, size_t n, float **vecs, size_t *dim,
                            char **err)
{
    int rc = -1;
    size_t k;
    json_t *item, *root = jtext_load(body, len, 0, NULL);
    json_t *data = json_object_get(root, "data");
    char *seen = xcalloc(n ? n : 1, 1);
    float *all = xmalloc((n ? n : 1) * RECALL_MAX_DIM * sizeof(float));
    float *scratch = xmalloc(RECALL_MAX_DIM * sizeof(float) + 4);
    *dim = 0;
    if (n == 0 || n > RECALL_MAX_INPUTS || !json_is_array(data) || json_array_size(data) != n) {
        *err = xasprintf("the answer is not a list of %zu embeddings", n);
        goto out;
    }
    json_array_foreach(data, k, item) {
        if (recall_take(item, k, n, all, dim, seen, scratch, err) != 0)
            goto out;
    }
    *vecs = xmalloc(n * *dim * sizeof(float));
    for (k = 0; k < n; k++) /* rows were laid out RECALL_MAX_DIM apart: pack them */
        memcpy(*vecs + k * *dim, all + k * RECALL_MAX_DIM, *dim * sizeof(float));
    rc = 0;
out:
    free(scratch);
    free(all);
    free(seen);
    json_decref(root);
    return rc;
}

double recall_cosine(const float *a, const float *b, size_t dim)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < dim; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / (sqrt(aa) * sqrt(bb)) : 0;
}

char *recall_query_text(json_t *messages)
{
    json_t *last = json_array_get(messages, json_array_size(messages) - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    if (role == NULL || strcmp(role, "user") != 0)
        return NULL;
    int dropped;
    json_t *text = msg_text(json_object_get(last, "content"), &dropped); /* as it is stored */
    char *out = json_string_length(text) > 0 ? xstrdup(json_string_value(text)) : NULL;
    json_decref(text);
    return out;
}

/* ---- choosing: one pass over the candidates, newest first ---- */

struct recall_item {
    int64_t sid, seq, ts_ms;
    char *role, *content;
    double score; /* relevance: cosine to the question */
};

struct recall_pick {
    struct recall_opts o;
    const float *query; /* or NULL */
    size_t dim;
    json_t *window;
    struct recall_item *recent, *salient, *relevant; /* relevant: most similar first */
    size_t nrecent, nsalient, nrelevant;
    int embedded; /* some candidate had an embedding of the question's size */
};

struct recall_pick *recall_pick_new(const struct recall_opts *o, const float *query, size_t dim,
                                    json_t *window)
{
    struct recall_pick *p = xcalloc(1, sizeof(*p));
    p->o = *o;
    p->query = dim > 0 && dim <= RECALL_MAX_DIM ? query : NULL;
    p->dim = dim;
    p->window = window;
    p->recent = xcalloc(o->recent ? o->recent : 1, sizeof(*p->recent));
    p->salient = xcalloc(RECALL_MAX_SALIENT, sizeof(*p->salient));
    p->relevant = xcalloc(o->relevant ? o->relevant : 1, sizeof(*p->relevant));
    return p;
}

static void recall_item_set(struct recall_item *it, int64_t sid, int64_t seq, const char *role,
                            const char *content, int64_t ts_ms, double score)
{
    *it = (struct recall_item){.sid = sid,
                               .seq = seq,
                               .ts_ms = ts_ms,
                               .role = xstrdup(role),
                               .content = xstrdup(content),
                               .score = score};
}

static void recall_item_clear(struct recall_item *it)
{
    free(it->role);
    free(it->content);
}

static int recall_in_window(const char *content, json_t *window)
{
    size_t i;
    json_t *m;
    json_array_foreach(window, i, m) {
        const char *c = json_string_value(json_object_get(m, "content"));
        if (c != NULL && strcmp(c, content) == 0)
            return 1;
    }
    return 0;
}

/* The relevance leg keeps the `relevant` most similar, in order; an equal score keeps the
 * newer (offered first). */
static void recall_offer_relevant(struct recall_pick *p, const struct recall_item *c)
{
    size_t k = p->nrelevant;
    if (k == p->o.relevant) {
        if (k == 0 || p->relevant[k - 1].score >= c->score)
            return;
        recall_item_clear(&p->relevant[--k]); /* the least similar makes room */
    }
    while (k > 0 && p->relevant[k - 1].score < c->score) {
        p->relevant[k] = p->relevant[k - 1];
        k--;
    }
    recall_item_set(&p->relevant[k], c->sid, c->seq, c->role, c->content, c->ts_ms, c->score);
    p->nrelevant++;
    if (p->nrelevant > p->o.relevant)
        p->nrelevant = p->o.relevant;
}

void recall_pick_offer(struct recall_pick *p, int64_t sid, int64_t seq, const char *role,
                       const char *content, int64_t ts_ms, double importance, const void *vec,
                       size_t vec_bytes)
{
    struct recall_item c = {.sid = sid, .seq = seq, .ts_ms = ts_ms};
    c.role = (char *)role;
    c.content = (char *)content;
    if (recall_in_window(content, p->window))
        return;
    if (p->nrecent < p->o.recent)
        recall_item_set(&p->recent[p->nrecent++], sid, seq, role, content, ts_ms, 0);
    if (importance >= p->o.importance && p->nsalient < RECALL_MAX_SALIENT)
        recall_item_set(&p->salient[p->nsalient++], sid, seq, role, content, ts_ms, 0);
    if (p->query == NULL || vec == NULL || vec_bytes != p->dim * sizeof(float))
        return;
    float v[RECALL_MAX_DIM];
    memcpy(v, vec, vec_bytes); /* the BLOB need not be aligned for floats */
    p->embedded = 1;
    c.score = recall_cosine(p->query, v, p->dim);
    if (c.score >= p->o.similarity)
        recall_offer_relevant(p, &c);
}

/* The chosen turns in keeping order (relevance, salience, recency), each once. */
static size_t recall_chosen(struct recall_pick *p, const struct recall_item **out)
{
    size_t n = 0;
    const struct recall_item *legs[3] = {p->relevant, p->salient, p->recent};
    size_t counts[3] = {p->nrelevant, p->nsalient, p->nrecent};
    for (int l = 0; l < 3; l++) {
        for (size_t i = 0; i < counts[l]; i++) {
            const struct recall_item *it = &legs[l][i];
            size_t k = 0;
            while (k < n && !(out[k]->sid == it->sid && out[k]->seq == it->seq))
                k++;
            if (k == n)
                out[n++] = it;
        }
    }
    return n;
}

static int recall_by_time(const void *a, const void *b)
{
    const struct recall_item *x = *(const struct recall_item *const *)a;
    const struct recall_item *y = *(const struct recall_item *const *)b;
    if (x->ts_ms != y->ts_ms)
        return x->ts_ms < y->ts_ms ? -1 : 1;
    if (x->sid != y->sid)
        return x->sid < y->sid ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One line of the message. */
static char *recall_line(const struct recall_item *it)
{
    char when[32] = "";
    time_t t = (time_t)(it->ts_ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm) != NULL)
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
    return xasprintf("[%s] %s: %s", when, it->role, it->content);
}

/* A line's framing around its role and content: the time, the brackets, the newline. */
#define RECALL_LINE_TOKENS 6

/* A line's tokens (recall_line), counted or else estimated as its characters / 4. */
static size_t recall_cost(const struct recall_opts *o, const struct recall_item *it)
{
    const struct tiktoken *tk = o->tokenizer;
    size_t content = strlen(it->content), role = strlen(it->role);
    if (tk == NULL)
        return (content + role + 24) / 4 + 1;
    return tiktoken_count(tk, it->content, content) + tiktoken_count(tk, it->role, role) +
           RECALL_LINE_TOKENS;
}

json_t *recall_pick_message(struct recall_pick *p, struct recall_stats *st)
{
    static const char head[] = "Earlier messages from conversations with this caller, "
                               "retrieved from memory (oldest first).";
    struct recall_stats local;
    size_t cap = p->nrelevant + p->nsalient + p->nrecent, kept = 0;
    size_t used = p->o.tokenizer != NULL ? tiktoken_count(p->o.tokenizer, head, sizeof(head) - 1)
                                         : sizeof(head) / 4 + 1;
    const struct recall_item **chosen = xcalloc(cap ? cap : 1, sizeof(*chosen));
    size_t n = recall_chosen(p, chosen);
    if (st == NULL)
        st = &local;
    *st = (struct recall_stats){.recent = p->nrecent,
                                .salient = p->nsalient,
                                .relevant = p->nrelevant,
                                .embedded = p->embedded};
    for (size_t i = 0; i < n; i++) { /* keep in order while they fit; a smaller one may */
        size_t cost = recall_cost(&p->o, chosen[i]);
        if (used + cost <= p->o.budget_tokens) {
            chosen[kept++] = chosen[i];
            used += cost;
        }
    }
    qsort(chosen, kept, sizeof(*chosen), recall_by_time);
    char *text = xstrdup("");
    for (size_t i = 0; i < kept; i++) {
        char *line = recall_line(chosen[i]);
        char *joined = xasprintf("%s%s%s", text, i ? "\n" : "", line);
        free(line);
        free(text);
        text = joined;
    }
    st->injected = kept;
    json_t *msg = kept ? msg_memory_message(head, text) : NULL; /* quoted, as msg.h says */
    free(text);
    free(chosen);
    return msg;
}

void recall_pick_free(struct recall_pick *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->nrecent; i++)
        recall_item_clear(&p->recent[i]);
    for (size_t i = 0; i < p->nsalient; i++)
        recall_item_clear(&p->salient[i]);
    for (size_t i = 0; i < p->nrelevant; i++)
        recall_item_clear(&p->relevant[i]);
    free(p->recent);
    free(p->salient);
    free(p->relevant);
    free(p);
}
