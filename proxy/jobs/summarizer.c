#include "proxy/jobs/summarizer.h"

#include "base/jtext.h"
#include "base/log.h"
#include "base/msg.h"
#include "base/util.h"
#include "memory/memory.h"
#include "proxy/http/metrics.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/hook.h"
#include "proxy/jobs/summary.h"
#include "proxy/jobs/task.h"
#include "proxy/upstream/fetch.h"
#include "proxy/upstream/upstream.h"

#include <event2/event.h>
#include <string.h>

#define SUMMARIZER_MAX_INFLIGHT   4
#define SUMMARIZER_POLL_MS        30000
#define SUMMARIZER_SHARED_POLL_MS 2000 /* replicas: a dead one's summaries show when polled */
#define SUMMARIZER_MAX_RESPONSE   (1024 * 1024)
#define SUMMARIZER_SCAN_MS        1000 /* running sessions are looked at most this often */
#define SUMMARIZER_MAX_TRIES      5    /* a stopped session's summary failing upstream */
#define SUMMARIZER_MAX_FACTS      50   /* the user's facts folded into a summary, most confident */
/* The model when neither the profile nor the session names one. */
#define SUMMARIZER_MODEL "gpt-4o-mini"

struct summarizer_job {
    struct summarizer *s;
    char *tenant, *id, *user;
    json_int_t from_ms, to_ms;
    json_int_t seq;   /* a running call's pass: the last turn it covers; 0 for a stopped session */
    json_int_t after; /* a running call's pass: the turns after this one, up to seq */
    char *call;       /* a running call's pass: its summary so far, or NULL */
    char *made;       /* a running call's pass: the new summary, or NULL */
    json_int_t tries; /* a stopped session's earlier tries that failed upstream */
    long retry_ms;    /* its profile's summary_retry */
    int64_t retry_at; /* set when this try failed upstream and another is due then */
    struct fetch *fx; /* the summary request while it runs */
};

struct summarizer {
    struct worker *w;
    struct task *task; /* runs summarizer_poll: every SUMMARIZER_POLL_MS, or on a wake */
    struct summarizer_job *inflight[SUMMARIZER_MAX_INFLIGHT];
    size_t ninflight;
    int64_t scanned_ms; /* the last look at running sessions */
};

static void summarizer_poll(void *arg);

static void summarizer_job_free(struct summarizer_job *j)
{
    struct summarizer *s = j->s;
    for (size_t i = 0; i < s->ninflight; i++) {
        if (s->inflight[i] == j) {
            s->inflight[i] = s->inflight[--s->ninflight];
            break;
        }
    }
    free(j->tenant);
    free(j->id);
    free(j->user);
    free(j->call);
    free(j->made);
    free(j);
}

static void summarizer_stored(void *arg, int ok)
{
    struct summarizer_job *j = arg;
    struct summarizer *s = j->s;
    if (!ok)
        log_error("session %s: the summary could not be stored", j->id);
    summarizer_job_free(j);
    hook_wake(s->w->hooks); /* the dumps that waited for it */
    worker_release(s->w);
    summarizer_poll(s);
}

/* Store the outcome (mem may be NULL: none made); takes mem. A running call's pass stores its
 * own summary (j->made), never the user's memory. */
static void summarizer_finish(struct summarizer_job *j, json_t *mem)
{
    if (j->seq > 0) {
        const char *text =
            json_string_value(json_object_get(json_object_get(mem, "summary"), "text"));
        j->made = text ? xstrdup(text) : NULL;
        json_decref(mem);
        mem = NULL;
    }
    json_t *outcome =
        json_pack("{s:s, s:s?, s:o, s:I, s:I}", "session_id", j->id, "user_id", j->user, "memory",
                  mem ? mem : json_null(), "from_ms", j->from_ms, "to_ms", j->to_ms);
    if (j->seq > 0)
        json_object_set_new(outcome, "seq", json_integer(j->seq));
    if (j->made != NULL)
        json_object_set_new(outcome, "call_summary", json_string(j->made));
    if (j->retry_at > 0)
        json_object_set_new(outcome, "retry_ms", json_integer(j->retry_at));
    j->fx = NULL;
    worker_hold(j->s->w); /* a draining worker waits for the outcome to be written */
    memory_summary_done(j->s->w->mem, j->tenant, outcome, j->s->w->base, summarizer_stored, j);
    json_decref(outcome);
}

/* The summary in an OpenAI chat completion, or NULL (logged). */
static json_t *summarizer_read(struct summarizer_job *j, const char *body, size_t len)
{
    char *err = NULL;
    json_t *resp = jtext_load(body, len, 0, NULL);
    json_t *msg = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "message");
    json_t *content = json_object_get(msg, "content"), *text = NULL, *mem = NULL;
    int dropped = 0;
    if (json_is_string(content) || json_is_array(content)) /* parts: Mistral's thinking models */
        text = msg_text(content, &dropped);
    if (text == NULL)
        err = xstrdup("the upstream's answer is not a chat completion");
    else
        mem = summary_parse(json_string_value(text), json_string_length(text), &err);
    json_decref(text);
    if (mem == NULL)
        log_warn("session %s: summary not stored: %s", j->id, err);
    free(err);
    json_decref(resp);
    return mem;
}

static void summarizer_answered(void *arg, long status, const char *body, size_t len,
                                const char *err)
{
    struct summarizer_job *j = arg;
    json_t *mem = NULL;
    if (*err == '\0' && status >= 200 && status < 300) {
        mem = summarizer_read(j, body, len);
    } else {
        /* the upstream failed, not the model: a stopped session's summary is tried again */
        if (j->seq == 0 && j->tries + 1 < SUMMARIZER_MAX_TRIES)
            j->retry_at = util_wall_ms() + ((int64_t)j->retry_ms << j->tries);
        log_warn("session %s: summary not made: upstream %s (HTTP %ld)%s", j->id,
                 *err ? err : "failed", status, j->retry_at ? "; it will be tried again" : "");
    }
    metrics_summary(j->s->w->metrics, mem != NULL);
    summarizer_finish(j, mem);
}

/* The model to ask: the profile's summarizer_model, its model, else "" (summarizer_request picks).
 */
static const char *summarizer_model(const struct cfg_profile *p)
{
    return *p->summarizer_model ? p->summarizer_model : p->model;
}

/* The summarizer's request for j's session (summary.h): its turns as the caller heard them,
 * with the user's current summary and facts to fold in; NULL when it has no turns. The model
 * is the profile's, else the one that answered the session last, else SUMMARIZER_MODEL. */
static json_t *summarizer_request(struct summarizer *s, struct summarizer_job *j,
                                  const struct cfg_profile *p)
{
    json_t *turns = memory_turns(s->w->reader, j->tenant, j->id, 0);
    json_t *um = memory_user_known(s->w->reader, j->tenant, j->user, SUMMARIZER_MAX_FACTS);
    const char *prev = json_string_value(json_object_get(json_object_get(um, "summary"), "text"));
    const char *model = summarizer_model(p), *prompt = p->summary_prompt;
    if (prompt == NULL || *prompt == '\0')
        prompt = SUMMARY_DEFAULT_PROMPT;
    for (size_t i = json_array_size(turns); (model == NULL || *model == '\0') && i-- > 0;)
        model = json_string_value(json_object_get(json_array_get(turns, i), "model"));
    if (model == NULL || *model == '\0')
        model = SUMMARIZER_MODEL;
    json_t *body = json_array_size(turns) > 0
                       ? summary_request(model, prompt, turns, prev, json_object_get(um, "facts"),
                                         &p->summary_skip_sources)
                       : NULL;
    json_decref(turns);
    json_decref(um);
    return body;
}

static int summarizer_is_inflight(const struct summarizer *s, const char *tenant, const char *id)
{
    for (size_t i = 0; i < s->ninflight; i++) {
        if (strcmp(s->inflight[i]->id, id) == 0 && strcmp(s->inflight[i]->tenant, tenant) == 0)
            return 1;
    }
    return 0;
}

/* The request for a running call's pass: its turns after j->after up to j->seq, folded into
 * the call's summary so far; NULL when none of them says anything. */
static json_t *summarizer_call_request(struct summarizer *s, struct summarizer_job *j,
                                       const struct cfg_profile *p)
{
    json_t *all = memory_turns(s->w->reader, j->tenant, j->id, 0), *t, *turns = json_array();
    const char *model = summarizer_model(p);
    size_t i;
    json_array_foreach(all, i, t) {
        json_int_t seq = json_integer_value(json_object_get(t, "seq"));
        if (seq > j->after && seq <= j->seq)
            json_array_append(turns, t);
        if ((model == NULL || *model == '\0') && seq <= j->seq)
            model = json_string_value(json_object_get(t, "model"));
    }
    if (model == NULL || *model == '\0')
        model = SUMMARIZER_MODEL;
    json_t *body = json_array_size(turns) > 0
                       ? summary_request(model, SUMMARY_CALL_PROMPT, turns, j->call, NULL,
                                         &p->summary_skip_sources)
                       : NULL;
    json_decref(turns);
    json_decref(all);
    return body;
}

/* Start the summary of one waiting session (a row of memory_to_summarize()). */
static void summarizer_start(struct summarizer *s, json_t *row)
{
    const char *pname = json_string_value(json_object_get(row, "profile"));
    const struct cfg_profile *p = cfg_profile_find(s->w->cfg, pname, strlen(pname));
    const char *user = json_string_value(json_object_get(row, "user_id"));
    struct summarizer_job *j = xcalloc(1, sizeof(*j));
    j->s = s;
    j->tenant = xstrdup(json_string_value(json_object_get(row, "tenant")));
    j->id = xstrdup(json_string_value(json_object_get(row, "id")));
    j->user = user ? xstrdup(user) : NULL;
    j->from_ms = json_integer_value(json_object_get(row, "created_ms"));
    j->seq = json_integer_value(json_object_get(row, "seq"));
    j->tries = json_integer_value(json_object_get(row, "tries"));
    j->retry_ms = p ? p->summary_retry_ms : 60000;
    j->to_ms = json_integer_value(json_object_get(row, j->seq ? "updated_ms" : "stopped_ms"));
    j->after = json_integer_value(json_object_get(row, "after_seq"));
    if (json_is_string(json_object_get(row, "call_summary")))
        j->call = xstrdup(json_string_value(json_object_get(row, "call_summary")));
    s->inflight[s->ninflight++] = j;
    json_t *body = NULL;
    if (p != NULL && p->summarize && j->seq > 0)
        body = summarizer_call_request(s, j, p);
    else if (p != NULL && p->summarize && user != NULL)
        body = summarizer_request(s, j, p);
    if (body == NULL) { /* nothing to summarize, or not wanted: only marked done */
        summarizer_finish(j, NULL);
        return;
    }
    j->fx = fetch_start(s->w->up, &s->w->cfg->upstreams[p->chain[0]], "/chat/completions", body,
                        SUMMARIZER_MAX_RESPONSE, summarizer_answered, j);
    json_decref(body);
}

/* Start the rows' summaries that are not on their way already, within the in-flight cap. */
static void summarizer_start_rows(struct summarizer *s, json_t *rows)
{
    json_t *row;
    size_t i;
    json_array_foreach(rows, i, row) {
        const char *tenant = json_string_value(json_object_get(row, "tenant"));
        const char *id = json_string_value(json_object_get(row, "id"));
        if (s->ninflight == SUMMARIZER_MAX_INFLIGHT)
            break;
        if (tenant == NULL || id == NULL || !json_is_string(json_object_get(row, "profile")))
            log_warn("summaries: a stored session's ids are not text; it is skipped");
        else if (!summarizer_is_inflight(s, tenant, id))
            summarizer_start(s, row);
    }
    json_decref(rows);
}

/* Running calls whose client's window left summary_threshold turns out since their summary's
 * last pass, looked at no more than once per SUMMARIZER_SCAN_MS however often replies wake the
 * summarizer. */
static void summarizer_running(struct summarizer *s)
{
    const struct cfg *cfg = s->w->cfg;
    int64_t since = util_wall_ms() - s->scanned_ms;
    if (since < SUMMARIZER_SCAN_MS) {
        task_within(s->task, SUMMARIZER_SCAN_MS - since);
        return;
    }
    s->scanned_ms += since;
    for (size_t i = 0; i < cfg->nprofiles; i++) {
        const struct cfg_profile *p = &cfg->profiles[i];
        size_t room = SUMMARIZER_MAX_INFLIGHT - s->ninflight; /* what is read is taken */
        if (p->summarize && p->summary_threshold > 0 && room > 0)
            summarizer_start_rows(
                s, memory_running_to_summarize(s->w->reader, p->name, p->summary_threshold, room));
    }
}

static void summarizer_poll(void *arg)
{
    struct summarizer *s = arg;
    int64_t now = util_wall_ms(), retry = memory_summary_next(s->w->reader);
    task_within(s->task, memory_shared(s->w->mem) ? SUMMARIZER_SHARED_POLL_MS : SUMMARIZER_POLL_MS);
    if (retry > now) /* a failed summary's next try (those due now are read below) */
        task_within(s->task, retry - now);
    if (s->w->draining || s->ninflight == SUMMARIZER_MAX_INFLIGHT)
        return;
    /* shared: what is read is taken (leased), so only as much as can start now */
    size_t room = SUMMARIZER_MAX_INFLIGHT - s->ninflight;
    summarizer_start_rows(s, memory_to_summarize(s->w->reader, memory_shared(s->w->mem)
                                                                   ? room
                                                                   : 4 * SUMMARIZER_MAX_INFLIGHT));
    summarizer_running(s);
    upstream_kick(s->w->up);
}

struct summarizer *summarizer_create(struct worker *w)
{
    size_t i = 0;
    while (i < w->cfg->nprofiles && !w->cfg->profiles[i].summarize)
        i++;
    if (i == w->cfg->nprofiles)
        return NULL;
    struct summarizer *s = xcalloc(1, sizeof(*s));
    s->w = w;
    s->task = task_create(w->base, summarizer_poll, s); /* sessions the last run left waiting */
    return s;
}

void summarizer_wake(struct summarizer *s)
{
    if (s != NULL)
        task_wake(s->task);
}

void summarizer_destroy(struct summarizer *s)
{
    if (s == NULL)
        return;
    /* Only requests still on the wire are left (a storing one holds the loop open): their
     * sessions stay waiting and are summarized after the next start. */
    while (s->ninflight > 0) {
        struct summarizer_job *j = s->inflight[0];
        fetch_cancel(j->fx);
        summarizer_job_free(j);
    }
    task_destroy(s->task);
    free(s);
}
