#include "proxy/jobs/embedder.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/memory.h"
#include "memory/recall.h"
#include "proxy/http/metrics.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/task.h"
#include "proxy/upstream/fetch.h"

#include <string.h>

#define EMBEDDER_BATCH        64
#define EMBEDDER_POLL_MS      30000
#define EMBEDDER_MAX_TRIES    8
#define EMBEDDER_MAX_BACKOFF  (600 * 1000LL)
#define EMBEDDER_MAX_RESPONSE (32 * 1024 * 1024) /* 64 vectors of 4096 numbers as text */

struct embedder {
    struct worker *w;
    struct task *task;
    struct fetch *fx;               /* the request on its way */
    json_t *rows;                   /* its turns (memory_to_embed()'s rows) */
    const struct cfg_profile *prof; /* theirs */
    int storing;                    /* their outcomes are being written */
};

static void embedder_stored(void *arg, int ok)
{
    struct embedder *e = arg;
    if (!ok)
        log_error("embeddings could not be stored");
    e->storing = 0;
    worker_release(e->w);
    task_after(e->task, 0); /* more may wait */
}

/* Write one outcome per row (vecs: a vector per row, or NULL with why, or retry). */
static void embedder_store(struct embedder *e, const float *vecs, size_t dim, const char *why,
                           int retry)
{
    size_t n = json_array_size(e->rows), i;
    struct memory_embedding *out = xcalloc(n, sizeof(*out));
    int64_t now = util_wall_ms();
    enum metrics_embed outcome = vecs ? METRICS_EMBED_STORED : METRICS_EMBED_FAILED;
    json_t *row;
    json_array_foreach(e->rows, i, row) {
        json_int_t tries = json_integer_value(json_object_get(row, "attempts")) + 1;
        out[i] = (struct memory_embedding){.sid = json_integer_value(json_object_get(row, "sid")),
                                           .seq = json_integer_value(json_object_get(row, "seq")),
                                           .model = e->prof ? e->prof->retrieval_model : "",
                                           .text = json_string_value(json_object_get(row, "text")),
                                           .vec = vecs ? vecs + i * dim : NULL,
                                           .dim = dim,
                                           .error = vecs ? NULL : why};
        if (retry && tries < EMBEDDER_MAX_TRIES) {
            int64_t wait = 1000LL << tries; /* tries < EMBEDDER_MAX_TRIES: no overflow */
            out[i].retry_ms = now + (wait < EMBEDDER_MAX_BACKOFF ? wait : EMBEDDER_MAX_BACKOFF);
            outcome = METRICS_EMBED_RETRY;
        }
    }
    metrics_embed(e->w->metrics, outcome, n);
    e->storing = 1;
    worker_hold(e->w); /* a draining worker waits for the outcomes to be written */
    memory_embedded(e->w->mem, out, n, e->w->base, embedder_stored, e);
    free(out);
    json_decref(e->rows);
    e->rows = NULL;
}

static void embedder_answered(void *arg, long status, const char *body, size_t len, const char *err)
{
    struct embedder *e = arg;
    char *why = NULL;
    float *vecs = NULL;
    size_t dim = 0;
    int retry = 0;
    e->fx = NULL;
    if (*err != '\0' || status < 200 || status >= 300) {
        why = xasprintf("upstream: %s (HTTP %ld)", *err ? err : "failed", status);
        log_warn("embeddings not made: %s", why);
        retry = 1;
    } else if (recall_parse_embeddings(body, len, json_array_size(e->rows), &vecs, &dim, &why) !=
               0) {
        log_warn("embeddings not stored: %s", why);
    }
    embedder_store(e, vecs, dim, why, retry);
    free(vecs);
    free(why);
}

/* Ask for the embeddings of the due rows that share the first one's profile. Takes due. */
static void embedder_start(struct embedder *e, json_t *due)
{
    const char *pname = json_string_value(json_object_get(json_array_get(due, 0), "profile"));
    const char *texts[EMBEDDER_BATCH];
    size_t i, n = 0;
    json_t *row;
    e->prof = cfg_profile_find(e->w->cfg, pname, strlen(pname));
    e->rows = json_array();
    json_array_foreach(due, i, row) {
        if (strcmp(json_string_value(json_object_get(row, "profile")), pname) != 0)
            continue;
        texts[n++] = json_string_value(json_object_get(row, "text"));
        json_array_append(e->rows, row);
    }
    json_decref(due);
    if (e->prof == NULL || !e->prof->retrieval) {
        embedder_store(e, NULL, 0, "the session's profile does not retrieve", 0);
        return;
    }
    json_t *req = recall_embed_request(e->prof->retrieval_model, texts, n);
    e->fx = fetch_start(e->w->up, &e->w->cfg->upstreams[e->prof->chain[0]], "/embeddings", req,
                        EMBEDDER_MAX_RESPONSE, embedder_answered, e);
    json_decref(req);
    upstream_kick(e->w->up);
}

static void embedder_poll(void *arg)
{
    struct embedder *e = arg;
    if (e->w->draining || e->fx != NULL || e->storing)
        return; /* the running pass plans the next */
    int64_t now = util_wall_ms();
    json_t *due = memory_to_embed(e->w->reader, now, EMBEDDER_BATCH);
    if (json_array_size(due) > 0) {
        embedder_start(e, due);
        return;
    }
    json_decref(due);
    int64_t next = memory_embed_next(e->w->reader), wait = next - now;
    if (next < 0 || wait > EMBEDDER_POLL_MS)
        wait = EMBEDDER_POLL_MS;
    task_after(e->task, wait < 10 ? 10 : wait);
}

struct embedder *embedder_create(struct worker *w)
{
    size_t i = 0;
    while (i < w->cfg->nprofiles && !w->cfg->profiles[i].retrieval)
        i++;
    if (i == w->cfg->nprofiles)
        return NULL;
    struct embedder *e = xcalloc(1, sizeof(*e));
    e->w = w;
    e->task = task_create(w->base, embedder_poll, e); /* turns the last run left queued */
    return e;
}

void embedder_wake(struct embedder *e)
{
    if (e != NULL)
        task_wake(e->task);
}

void embedder_destroy(struct embedder *e)
{
    if (e == NULL)
        return;
    /* a request still on the wire: its turns stay queued and are embedded after the restart */
    fetch_cancel(e->fx);
    json_decref(e->rows);
    task_destroy(e->task);
    free(e);
}
