#include "proxy/chat/lookup.h"

#include "base/log.h"
#include "base/util.h"
#include "memory/recall.h"
#include "proxy/http/metrics.h"
#include "proxy/http/worker.h"
#include "proxy/upstream/fetch.h"

#include <string.h>

#define LOOKUP_MAX_RESPONSE (1024 * 1024) /* one vector of RECALL_MAX_DIM numbers as text */

struct lookup {
    struct worker *w;
    struct fetch *fx;
    struct event *timer;
    uint64_t t_start;
    lookup_cb cb;
    void *arg;
};

static void lookup_free(struct lookup *l)
{
    fetch_cancel(l->fx);
    event_free(l->timer);
    free(l);
}

/* The one way out: the transfer and the timer go first — the callback may drive curl
 * (relay_start() kicks it), and a late answer finishing in there must find nothing to call —
 * then report. */
static void lookup_end(struct lookup *l, enum metrics_recall outcome, float *query, size_t dim)
{
    fetch_cancel(l->fx);
    l->fx = NULL;
    event_del(l->timer);
    metrics_recall(l->w->metrics, outcome, util_now_us() - l->t_start);
    l->cb(l->arg, query, dim);
    lookup_free(l);
}

static void lookup_answered(void *arg, long status, const char *body, size_t len, const char *err)
{
    struct lookup *l = arg;
    char *why = NULL;
    float *vec = NULL;
    size_t dim = 0;
    l->fx = NULL; /* the fetch frees itself */
    if (*err != '\0' || status < 200 || status >= 300) {
        log_warn("retrieval: the question's embedding failed: %s (HTTP %ld)",
                 *err ? err : "upstream error", status);
    } else if (recall_parse_embeddings(body, len, 1, &vec, &dim, &why) != 0) {
        log_warn("retrieval: the question's embedding is unusable: %s", why);
        free(why);
    }
    lookup_end(l, vec ? METRICS_RECALL_READY : METRICS_RECALL_FAILED, vec, dim);
}

static void lookup_late(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lookup_end(arg, METRICS_RECALL_LATE, NULL, 0);
}

struct lookup *lookup_start(struct worker *w, const struct cfg_profile *p, const char *question,
                            lookup_cb cb, void *arg)
{
    struct lookup *l = xcalloc(1, sizeof(*l));
    struct timeval budget = {p->retrieval_timeout_ms / 1000,
                             (p->retrieval_timeout_ms % 1000) * 1000};
    l->w = w;
    l->cb = cb;
    l->arg = arg;
    l->t_start = util_now_us();
    l->timer = evtimer_new(w->base, lookup_late, l);
    evtimer_add(l->timer, &budget);
    json_t *req = recall_embed_request(p->retrieval_model, &question, 1);
    l->fx = fetch_start(w->up, &w->cfg->upstreams[p->chain[0]], "/embeddings", req,
                        LOOKUP_MAX_RESPONSE, lookup_answered, l);
    json_decref(req);
    return l;
}

void lookup_cancel(struct lookup *l)
{
    if (l != NULL)
        lookup_free(l);
}
