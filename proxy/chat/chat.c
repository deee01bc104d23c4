#include "proxy/chat/chat.h"

#include "base/jmemo.h"
#include "base/log.h"
#include "base/util.h"
#include "memory/memory.h"
#include "memory/recall.h"
#include "proxy/chat/chatreq.h"
#include "proxy/chat/lookup.h"
#include "proxy/chat/relay.h"
#include "proxy/chat/reply.h"
#include "proxy/chat/session.h"
#include "proxy/chat/upbody.h"
#include "proxy/http/access.h"
#include "proxy/http/auth.h"
#include "proxy/http/metrics.h"
#include "proxy/http/respond.h"
#include "proxy/http/worker.h"
#include "proxy/jobs/embedder.h"
#include "proxy/jobs/summarizer.h"
#include "proxy/upstream/upstream.h"

#include <event2/keyvalq_struct.h>
#include <string.h>

struct chat {
    struct worker *w;
    struct chatreq creq;
    struct reply *reply;
    struct memory_rec *rec; /* NULL: the request names no session */
    int record_pending;     /* the request is still to be recorded (after the transfer starts) */
    struct relay *relay;    /* while its end waits for a commit */
    const struct cfg_profile *prof;
    const char *tenant; /* the client key's (the config's string) */
    char *user;         /* the request's user id, or NULL */
    int no_memory;      /* its key may not have remembered memory injected (inject_memory) */
    /* its access line (proxy/http/access.h), written when the chat ends */
    char path[128];
    char *session;
    int status;
    long long bytes;
    int64_t ttft_us;
    const char *upstream, *cache, *ended;
    enum metrics_route route;
    uint64_t t_start;
    char *recall_sid;               /* retrieval's session (NULL: no retrieval) */
    struct lookup *lookup;          /* the question's embedding on its way */
    struct evhttp_request *waiting; /* the request, while the session's read
                                       (memory_rec_prepare), the lookup or its body's reads run */
    char *prep_sid;                 /* the session id, while its read runs */
    char *question;                 /* the question's text, while its lookup runs */
    float *query;                   /* the question's embedding, or NULL */
    size_t qdim;
    char cache_key[65];   /* set when the turn may be answered from the cache */
    struct upbody *build; /* the upstream body while it waits for a read */
    char *up_body;        /* the body built, while the cache is read for it */
    size_t up_len;
    json_t *hit;    /* the cache's answer read for this turn, or NULL */
    int cache_read; /* the cache was read for it (chat_read_cache) */
    int embedded;   /* retrieval: some earlier turn of the caller has an embedding */
    struct evhttp_request *hit_req; /* a cache hit waiting for its turn's commit */
    char *hit_text;
    size_t hit_len;
    uint64_t t_commit; /* when the reply's commit was asked for */
    uint64_t t_late;   /* when the reply was whole before the session's check */
    uint64_t t_said;   /* when the streamed reply first said something (reply_said), or 0 */
    int refs;          /* the relay's, and one while a commit is awaited */
    /* replicas: the session's version is checked while the upstream answers (chat_prepare);
     * a reply that ends (or a caller who leaves) before that check is done waits for it */
    int prep_late;            /* the check goes after the transfer has started */
    int preparing;            /* ... and is on its way */
    struct relay *late_relay; /* the relay whose reply waits for it */
    int late_whole;           /* ... whose caller left before its end went out: the reply
                                 was whole all the same (late_ttft, late_total) */
    int late_gone;            /* the caller left before it was done */
    const char *late_why;     /* the upstream failed before it was done (chat_release) */
    int64_t late_ttft, late_total;
};

/* The chat's access line: what the client got, and from where. */
static void chat_access(struct chat *c)
{
    struct access_line a = {.method = "POST",
                            .path = c->path,
                            .status = c->status ? c->status : 499,
                            .dur_us = (int64_t)(util_now_us() - c->t_start),
                            .ttft_us = c->ttft_us,
                            .bytes = c->bytes,
                            .tenant = c->tenant,
                            .session = c->session,
                            .user = c->user,
                            .profile = c->prof ? c->prof->name : NULL,
                            .upstream = c->upstream,
                            .model = c->reply ? reply_model(c->reply) : NULL,
                            .cache = c->cache,
                            .ended = c->ended};
    if (a.model == NULL)
        a.model = json_string_value(json_object_get(c->creq.body, "model"));
    access_write(c->w->cfg, &a);
}

static void chat_unref(struct chat *c)
{
    if (--c->refs > 0)
        return;
    chat_access(c);
    free(c->session);
    memory_rec_free(c->rec);
    lookup_cancel(c->lookup);
    free(c->recall_sid);
    free(c->prep_sid);
    free(c->question);
    free(c->query);
    free(c->user);
    free(c->hit_text);
    json_decref(c->hit);
    upbody_free(c->build);
    free(c->up_body);
    chatreq_clear(&c->creq);
    reply_destroy(c->reply);
    free(c);
}

/* ---- recording ---- */

static void chat_record_request(struct chat *c)
{
    if (!c->record_pending)
        return; /* done already, or no session */
    c->record_pending = 0;
    memory_rec_request(c->rec);
}

/* The relay's times, the first token's being the reply's first word (or call) when the stream
 * was read: a reasoning model thinks aloud for seconds before it, and the caller hears
 * nothing of that. Else the first event's (relay_times). */
static void chat_times(const struct chat *c, const struct relay *r, int64_t *ttft_us,
                       int64_t *total_us)
{
    relay_times(r, ttft_us, total_us);
    if (c->t_said != 0)
        *ttft_us = (int64_t)(c->t_said - c->t_start);
}

/* s, or NULL when it is empty. */
static const char *chat_unless_empty(const char *s, size_t len)
{
    return len > 0 ? s : NULL;
}

/* What the reply said (content, refusal, reasoning, calls, audio), its model, finish reason
 * and usage; no timings. */
static void chat_reply_said(struct chat *c, struct memory_reply *mr)
{
    size_t len = 0;
    memset(mr, 0, sizeof(*mr));
    mr->content = reply_content(c->reply, &len);
    mr->refusal = reply_refusal(c->reply, &len);
    mr->refusal = chat_unless_empty(mr->refusal, len);
    mr->reasoning = reply_reasoning(c->reply, &len);
    mr->reasoning = chat_unless_empty(mr->reasoning, len);
    mr->tool_calls = reply_tool_calls(c->reply);
    mr->function_call = reply_function_call(c->reply);
    mr->audio = reply_audio(c->reply);
    mr->model = reply_model(c->reply);
    mr->finish_reason = reply_finish_reason(c->reply);
    mr->usage = reply_usage(c->reply);
}

static void chat_reply_of(struct chat *c, struct relay *r, struct memory_reply *mr)
{
    chat_reply_said(c, mr);
    chat_times(c, r, &mr->ttft_us, &mr->latency_us);
}

/* The reply's commit is reported: now the end of the response may go. */
static void chat_committed(void *arg, int ok)
{
    struct chat *c = arg;
    struct relay *r = c->relay;
    c->relay = NULL;
    metrics_commit_wait(c->w->metrics, util_now_us() - c->t_commit);
    if (r == NULL) {
        worker_release(c->w); /* the client left meanwhile */
    } else if (ok) {
        relay_finish(r);
        if (c->prof->summarize && c->prof->summary_threshold > 0) /* a turn more to count */
            summarizer_wake(c->w->summarizer);
        if (c->prof->retrieval) /* turns to embed */
            embedder_wake(c->w->embedder);
    } else {
        struct apierr e;
        log_error("a turn could not be stored; ending the response with an error");
        apierr_set(&e, APIERR_STORAGE, NULL, "the turn could not be stored");
        relay_error(r, &e);
    }
    chat_unref(c);
}

/* ---- relay hooks ---- */

/* The reply is read only to be recorded or cached: otherwise it is never parsed. */
static int chat_keeps_reply(const struct chat *c)
{
    return c->rec != NULL || c->cache_key[0] != '\0';
}

/* On the forwarding path: decide cheaply, parse later (chat_after_send). */
static int chat_on_event(void *arg, const struct sse_event *ev)
{
    struct chat *c = arg;
    int usage_only = reply_is_usage_only(ev->data, ev->data_len);
    if (chat_keeps_reply(c))
        reply_queue_chunk(c->reply, ev->data, ev->data_len);
    return !(usage_only && !c->creq.include_usage);
}

static void chat_after_send(void *arg)
{
    struct chat *c = arg;
    reply_flush(c->reply);
    if (c->t_said == 0 && reply_said(c->reply))
        c->t_said = util_now_us();
}

/* A complete, plain-text answer to a cacheable turn goes into the cache. */
static void chat_cache_keep(struct chat *c, const struct memory_reply *mr)
{
    const char *fin = mr->finish_reason;
    if (c->cache_key[0] == '\0' || mr->content == NULL || *mr->content == '\0' ||
        mr->tool_calls != NULL || fin == NULL || strcmp(fin, "stop") != 0)
        return;
    memory_cache_put(c->w->mem, c->tenant, c->user, c->cache_key, mr->content, mr->model,
                     c->prof->cache_ttl_ms);
}

static void chat_record_reply(struct chat *c, struct relay *r);

static void chat_on_complete(void *arg, struct relay *r, const char *body, size_t len)
{
    struct chat *c = arg;
    struct memory_reply mr;
    if (!chat_keeps_reply(c)) {
        relay_finish(r);
        return;
    }
    reply_flush(c->reply);
    if (body != NULL && reply_set_body(c->reply, body, len) != 0 &&
        reply_set_events(c->reply, body, len) != 0)
        log_warn("upstream answered 2xx with a body that is neither a JSON object nor an event "
                 "stream");
    if (c->rec == NULL) {
        chat_reply_of(c, r, &mr);
        chat_cache_keep(c, &mr);
        relay_finish(r);
        return;
    }
    if (c->preparing) { /* recorded once the session's check is done (chat_prepared_late) */
        c->late_relay = r;
        c->t_late = util_now_us();
        return;
    }
    chat_record_reply(c, r);
}

/* The request's turns, then the reply's; the response's end goes when it is committed. */
static void chat_record_reply(struct chat *c, struct relay *r)
{
    struct memory_reply mr;
    chat_record_request(c);
    chat_reply_of(c, r, &mr);
    chat_cache_keep(c, &mr);
    c->relay = r;
    c->refs++;
    c->t_commit = util_now_us();
    memory_rec_reply(c->rec, &mr, c->w->base, chat_committed, c);
}

/* The relay whose reply waits for the session's check (late_relay) is going (its caller
 * left, or a shutdown ends it): the reply it held was whole, and is recorded so once the
 * check is done, without it (chat_prepared_late). */
static void chat_late_whole(struct chat *c, struct relay *r)
{
    c->late_relay = NULL;
    c->late_whole = 1;
    chat_times(c, r, &c->late_ttft, &c->late_total);
}

static void chat_on_client_gone(void *arg, struct relay *r)
{
    struct chat *c = arg;
    struct memory_reply mr;
    reply_flush(c->reply);
    if (c->rec == NULL || memory_rec_replied(c->rec))
        return;
    if (c->late_relay == r) { /* its reply came whole; only its end waited for the check */
        chat_late_whole(c, r);
        return;
    }
    if (c->preparing) { /* recorded once the session's check is done (chat_prepared_late) */
        c->late_gone = 1;
        chat_times(c, r, &c->late_ttft, &c->late_total);
        return;
    }
    chat_record_request(c);
    chat_reply_of(c, r, &mr);
    mr.interrupted = 1;
    mr.finish_reason = "client_disconnected";
    memory_rec_reply(c->rec, &mr, NULL, NULL, NULL);
    c->ended = "client_disconnected";
}

/* The relay is going. A reply cut short by an upstream failure (or a shutdown) after its
 * request was recorded is still what the caller heard: record it, with why it ended. */
static void chat_release(void *arg, struct relay *r, const char *why)
{
    struct chat *c = arg;
    size_t len = 0;
    int64_t total = 0;
    if (c->status == 0) { /* not answered in the relay's place (a fallback_reply) */
        c->status = relay_final_status(r);
        c->bytes = relay_sent(r);
    }
    c->upstream = relay_upstream(r);
    chat_times(c, r, &c->ttft_us, &total);
    if (c->ended == NULL && why != NULL)
        c->ended = why;
    if (why == NULL)
        why = "upstream_error";
    if (c->relay != NULL) { /* its commit is still awaited: the loop must wait for it */
        c->relay = NULL;
        worker_hold(c->w);
    }
    if (c->late_relay == r) /* never used after this: chat_prepared_late records without it */
        chat_late_whole(c, r);
    reply_content(c->reply, &len);
    if (c->preparing && len > 0) /* recorded once the session's check is done */
        c->late_why = why;
    if (c->rec != NULL && !c->record_pending && !memory_rec_replied(c->rec) && len > 0) {
        struct memory_reply mr = {.content = reply_content(c->reply, &len),
                                  .model = reply_model(c->reply),
                                  .finish_reason = why,
                                  .ttft_us = -1};
        memory_rec_reply(c->rec, &mr, NULL, NULL, NULL);
    }
    chat_unref(c);
}

static void chat_fallback(void *arg, struct evhttp_request *req);

static const struct relay_hooks chat_hooks = {
    .on_event = chat_on_event,
    .on_complete = chat_on_complete,
    .on_client_gone = chat_on_client_gone,
    .fallback = chat_fallback,
    .release = chat_release,
    .after_send = chat_after_send,
};

/* ---- the request ---- */

static int chat_stored_mode(const struct cfg_profile *prof)
{
    return strcmp(prof->history, "stored") == 0;
}

static int chat_session(struct chat *c, struct evhttp_request *req, const struct request_ctx *rc,
                        const struct cfg_profile *prof, struct session_ids *ids, struct apierr *e)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct session_input si = {.h_session = evhttp_find_header(in, "X-Session-Id"),
                               .h_user = evhttp_find_header(in, "X-User-Id"),
                               .query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req)),
                               .body = c->creq.body,
                               .id_fields = &c->w->cfg->session_id_fields,
                               .user_fields = &c->w->cfg->session_user_fields,
                               .id_pattern = c->w->cfg->session_id_regex};
    if (session_resolve(&si, ids, e) != 0)
        return -1;
    if (!auth_user_allowed(rc->key, ids->user_id)) {
        apierr_set(e, APIERR_FORBIDDEN, "user",
                   "this key may act only for the user ids '%s' covers; name one of them",
                   rc->key->user);
        return -1;
    }
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    if (ids->session_id == NULL && c->w->cfg->sessions_require) {
        apierr_set(e, APIERR_INVALID_REQUEST, "session_id",
                   "a session id is required: send X-Session-Id, ?session_id= or session_id");
        return -1;
    }
    evhttp_add_header(out, "X-Memproxy-Session", ids->session_id ? ids->session_id : "none");
    c->session = ids->session_id ? xstrdup(ids->session_id) : NULL;
    if (ids->session_id != NULL) {
        struct memory_rec_params p = {.tenant = rc->tenant,
                                      .session_id = ids->session_id,
                                      .user_id = ids->user_id,
                                      .profile = prof->name,
                                      .messages = c->creq.messages,
                                      .memo = c->w->memo,
                                      .turn_id = json_object_get(c->creq.body, "turn_id"),
                                      .append = chat_stored_mode(prof),
                                      .embed = prof->retrieval,
                                      .track_window =
                                          prof->summarize && prof->summary_threshold > 0};
        c->rec = memory_rec_new(c->w->reader, &p);
        c->record_pending = 1; /* recorded once chat_forward() has started the transfer */
    }
    session_strip(c->creq.body, &c->w->cfg->session_id_fields);
    return 0;
}

/* On a pool thread with a shared store (worker_read): touches only the pick. */
static void chat_read_recall(struct memory_reader *r, void *arg)
{
    struct chat *c = arg;
    memory_recall(r, c->tenant, c->user, c->recall_sid, (size_t)c->prof->retrieval_scan,
                  upbody_pick(c->build));
}

/* Send a cache hit's answer; the chat is done. */
static void chat_cache_send(struct chat *c, struct evhttp_request *req)
{
    c->status = 200;
    c->bytes = (long long)c->hit_len;
    c->w->access_quiet++; /* the chat's own access line */
    respond_send(c->w, METRICS_ROUTE_CHAT, req, 200, c->creq.stream ? "text/event-stream" : NULL,
                 c->hit_text, c->hit_len);
    c->w->access_quiet--;
    chat_unref(c);
}

/* A hit's turn is committed: now its answer goes, as a reply's end would. */
static void chat_cache_committed(void *arg, int ok)
{
    struct chat *c = arg;
    struct worker *w = c->w;
    metrics_commit_wait(w->metrics, util_now_us() - c->t_commit);
    if (ok) {
        chat_cache_send(c, c->hit_req);
    } else {
        struct apierr e;
        apierr_set(&e, APIERR_STORAGE, NULL, "the turn could not be stored");
        c->status = apierr_status(e.kind);
        w->access_quiet++;
        respond_error(w, METRICS_ROUTE_CHAT, c->hit_req, &e);
        w->access_quiet--;
        chat_unref(c);
    }
    worker_release(w);
}

/* Every upstream failed before the first token: the profile's fallback_reply goes out as an
 * ordinary completion (200), recorded with source llm_failure, once its turn is committed as
 * a reply's end would be. The relay ends after this; a reference keeps c. */
static void chat_fallback(void *arg, struct evhttp_request *req)
{
    struct chat *c = arg;
    const char *text = c->prof->fallback_reply;
    const char *model = json_string_value(json_object_get(c->creq.body, "model"));
    c->refs++;
    c->ended = "llm_failure";
    free(c->hit_text);
    c->hit_text = reply_synthesize("chatcmpl-fallback", text, model ? model : "", c->creq.stream,
                                   c->creq.include_usage, &c->hit_len);
    if (c->rec == NULL) {
        chat_cache_send(c, req);
        return;
    }
    struct memory_reply mr = {
        .content = text, .model = model, .finish_reason = "stop", .source = "llm_failure"};
    chat_record_request(c);
    c->hit_req = req;
    c->t_commit = util_now_us();
    worker_hold(c->w); /* a draining worker waits for the answer */
    memory_rec_reply(c->rec, &mr, c->w->base, chat_cache_committed, c);
}

/* Answer from the cache when it held this turn (c->hit, read by chat_read_cache; 1:
 * answered, the chat is taken); the turn is recorded like any other, its reply with the
 * cached model. */
static int chat_cache_lookup(struct chat *c, struct evhttp_request *req)
{
    json_t *hit = c->hit;
    c->hit = NULL;
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Memproxy-Cache",
                      hit ? "hit" : "miss");
    c->cache = hit ? "hit" : "miss";
    metrics_cache(c->w->metrics, hit != NULL);
    if (hit == NULL)
        return 0;
    const char *content = json_string_value(json_object_get(hit, "content"));
    const char *model = json_string_value(json_object_get(hit, "model"));
    char id[48];
    snprintf(id, sizeof(id), "chatcmpl-cache-%.24s", c->cache_key);
    c->hit_text =
        reply_synthesize(id, content, model, c->creq.stream, c->creq.include_usage, &c->hit_len);
    if (c->rec == NULL) {
        chat_cache_send(c, req);
    } else {
        struct memory_reply mr = {.content = content, .model = model, .finish_reason = "stop"};
        chat_record_request(c);
        c->hit_req = req;
        c->t_commit = util_now_us();
        worker_hold(c->w); /* a draining worker waits for the answer */
        memory_rec_reply(c->rec, &mr, c->w->base, chat_cache_committed, c);
    }
    json_decref(hit);
    return 1;
}

/* The session's check (replicas) is done: the request's turns are recorded, and a reply
 * that ended meanwhile (or a caller who left) is recorded after them. */
static void chat_prepared_late(void *arg)
{
    struct chat *c = arg;
    struct worker *w = c->w;
    struct relay *r = c->late_relay;
    c->preparing = 0;
    c->late_relay = NULL;
    if (r != NULL) {
        metrics_check_wait(w->metrics, util_now_us() - c->t_late);
        chat_record_reply(c, r);
    } else if ((c->late_whole || c->late_gone) && !memory_rec_replied(c->rec)) {
        struct memory_reply mr;
        chat_record_request(c);
        chat_reply_said(c, &mr);
        mr.ttft_us = c->late_ttft;
        mr.latency_us = c->late_total;
        mr.interrupted = !c->late_whole; /* whole: only its end did not go out */
        mr.finish_reason = c->late_whole ? reply_finish_reason(c->reply) : "client_disconnected";
        memory_rec_reply(c->rec, &mr, NULL, NULL, NULL);
        c->ended = "client_disconnected";
    } else {
        if (c->late_why == NULL) /* the check came first: the response's end waits for none */
            metrics_check_wait(w->metrics, 0);
        chat_record_request(c);
        size_t len = 0;
        if (c->late_why != NULL && !memory_rec_replied(c->rec)) { /* as chat_release would */
            struct memory_reply mr = {.content = reply_content(c->reply, &len),
                                      .model = reply_model(c->reply),
                                      .finish_reason = c->late_why,
                                      .ttft_us = -1};
            memory_rec_reply(c->rec, &mr, NULL, NULL, NULL);
        }
    }
    chat_unref(c);
    worker_release(w);
}

static void chat_prepare_late(struct chat *c)
{
    c->refs++;
    worker_hold(c->w);
    memory_rec_prepare(c->rec, chat_prepared_late, c);
}

/* Send the built upstream request (or answer from the cache). The chat is taken. */
static void chat_send(struct chat *c)
{
    struct evhttp_request *req = c->waiting;
    struct relay_params p = {.profile = c->prof,
                             .path = "/chat/completions",
                             .stream = c->creq.stream,
                             .route = c->route,
                             .t_start = c->t_start,
                             .body = c->up_body,
                             .body_len = c->up_len};
    c->up_body = NULL; /* the relay's now */
    c->waiting = NULL;
    if (c->cache_read && chat_cache_lookup(c, req)) {
        free(p.body);
        return;
    }
    /* The request is recorded once the transfer has started (relay_start sends the request
     * on a pooled connection, or starts connecting), so storage never delays it; no loop
     * turn is spent in between. relay_start may end the relay and release c: a reference
     * keeps c. If the relay has ended already, its hooks recorded the request, or no
     * upstream could be started and it is recorded now, as after a later failure. */
    c->refs++;
    c->preparing = c->prep_late; /* before the start: its hooks may run inside it */
    relay_start(c->w, req, &p, &chat_hooks, c);
    if (c->preparing)
        chat_prepare_late(c);
    else
        chat_record_request(c);
    chat_unref(c);
}

/* On a pool thread with a shared store (worker_read): touches only c->hit. */
static void chat_read_cache(struct memory_reader *r, void *arg)
{
    struct chat *c = arg;
    c->hit = memory_cache_get(r, c->cache_key);
}

/* The cache was read (a failed read is a miss): the request goes on. */
static void chat_cache_read(void *arg, int failed)
{
    struct chat *c = arg;
    (void)failed;
    c->cache_read = 1;
    chat_send(c);
}

/* Retrieval's candidates are read (a failed read recalls nothing): the body is built, then
 * the cache is read for it unless the client asked for a fresh answer (Cache-Control:
 * no-cache; the fresh answer is still kept). */
static void chat_recalled(void *arg, int failed)
{
    struct chat *c = arg;
    struct evhttp_request *req = c->waiting;
    (void)failed;
    c->up_body = upbody_end(c->build, req, c->cache_key, &c->up_len);
    upbody_free(c->build);
    c->build = NULL;
    const char *cc = evhttp_find_header(evhttp_request_get_input_headers(req), "Cache-Control");
    if (c->cache_key[0] != '\0' && (cc == NULL || strstr(cc, "no-cache") == NULL))
        worker_read_call(c->w, chat_read_cache, chat_cache_read, c);
    else
        chat_send(c);
}

/* Build the upstream request and send it (or answer from the cache), after the reads it
 * needs, which never make the loop wait (worker_read). The chat is taken. */
static void chat_forward(struct chat *c, struct evhttp_request *req)
{
    struct upbody_in in = {.prof = c->prof,
                           .creq = &c->creq,
                           .rec = c->rec,
                           .memo = c->w->memo,
                           .tenant = c->tenant,
                           .user = c->user,
                           .stored = chat_stored_mode(c->prof),
                           .no_memory = c->no_memory,
                           .recall = c->recall_sid != NULL,
                           .query = c->query,
                           .qdim = c->qdim};
    c->waiting = req;
    c->build = upbody_begin(&in);
    if (upbody_pick(c->build) != NULL)
        worker_read_call(c->w, chat_read_recall, chat_recalled, c);
    else
        chat_recalled(c, 0);
}

/* The lookup is over (query NULL: late or failed): the request goes on. */
static void chat_looked_up(void *arg, float *query, size_t dim)
{
    struct chat *c = arg;
    struct worker *w = c->w;
    struct evhttp_request *req = c->waiting;
    c->lookup = NULL;
    c->waiting = NULL;
    c->query = query;
    c->qdim = dim;
    if (query != NULL) /* the question's turn takes this embedding: not embedded twice */
        memory_rec_question(c->rec, c->prof->retrieval_model, c->question, query, dim);
    chat_forward(c, req);
    worker_release(w); /* after: the relay now keeps a drain waiting */
}

/* Retrieval (its candidates are read when the upstream body is built): when some earlier
 * turn of the caller has an embedding, the question's is asked for and the request waits for
 * it (1), at most the profile's retrieval_timeout. Without any, relevance could find nothing:
 * no wait (0). */
static int chat_lookup(struct chat *c, struct evhttp_request *req)
{
    if (!c->embedded)
        return 0;
    c->question = recall_query_text(c->creq.messages);
    if (c->question == NULL)
        return 0;
    c->waiting = req;
    worker_hold(c->w); /* a draining worker waits for the request to go on */
    c->lookup = lookup_start(c->w, c->prof, c->question, chat_looked_up, c);
    return 1;
}

/* On a pool thread with a shared store (worker_read). */
static void chat_read_embedded(struct memory_reader *r, void *arg)
{
    struct chat *c = arg;
    c->embedded = memory_recall_embedded(r, c->tenant, c->user, c->recall_sid);
}

/* Whether the caller has embedded turns is known (a failed read: not): the lookup, or on. */
static void chat_embedded(void *arg, int failed)
{
    struct chat *c = arg;
    struct evhttp_request *req = c->waiting;
    (void)failed;
    c->waiting = NULL;
    if (chat_lookup(c, req))
        upstream_kick(c->w->up); /* the lookup's request on the wire now (it may end inside) */
    else
        chat_forward(c, req);
}

/* The session's entry is current (memory_rec_prepare): retrieval, then the request goes on. */
static void chat_go_on(struct chat *c, struct evhttp_request *req, const char *session_id)
{
    if (!c->prof->retrieval || c->rec == NULL || c->no_memory) {
        chat_forward(c, req);
        return;
    }
    c->recall_sid = xstrdup(session_id);
    c->waiting = req;
    worker_read_call(c->w, chat_read_embedded, chat_embedded, c);
}

static void chat_prepared(void *arg)
{
    struct chat *c = arg;
    struct worker *w = c->w;
    struct evhttp_request *req = c->waiting;
    char *sid = c->prep_sid;
    c->waiting = NULL;
    c->prep_sid = NULL;
    chat_go_on(c, req, sid);
    free(sid);
    worker_release(w); /* after: the relay now keeps a drain waiting */
}

/* With replicas the session's entry is made current by a read that the loop does not wait
 * for (memory_rec_prepare); the request goes on when it is done, or at once. */
static void chat_prepare(struct chat *c, struct evhttp_request *req, const char *session_id)
{
    if (c->rec == NULL) {
        chat_go_on(c, req, session_id);
        return;
    }
    /* What the upstream is sent comes from the client's window and what the entry held
     * already (injected memory, runtime params: changed only by rare REST calls): the check
     * can wait until the transfer has started, off the time to the first token. Not in
     * stored mode (the entry's turns are the history sent), nor with the answer cache or
     * retrieval (their reads come first), nor for an entry this replica has not read. */
    if (!chat_stored_mode(c->prof) && !c->prof->retrieval && !c->prof->cache &&
        memory_rec_warm(c->rec)) {
        c->prep_late = 1;
        chat_go_on(c, req, session_id);
        return;
    }
    c->waiting = req;
    c->prep_sid = xstrdup(session_id);
    worker_hold(c->w); /* a draining worker waits for the request to go on */
    memory_rec_prepare(c->rec, chat_prepared, c);
}

/* Whose messages the memo keeps: one tenant's are never another's. */
static uint64_t chat_memo_seed(const char *tenant)
{
    return tenant != NULL ? util_hash64(0, tenant, strlen(tenant)) : 0;
}

static void chat_memo_report(struct worker *w)
{
    struct jmemo_stats st;
    if (w->memo == NULL)
        return;
    jmemo_stats(w->memo, &st);
    metrics_memo(w->metrics, st.hits, st.misses, st.bytes);
}

void chat_handle(struct worker *w, struct evhttp_request *req, const struct request_ctx *rc)
{
    struct apierr e;
    struct chatreq_opts opt = {.max_depth = (size_t)w->cfg->max_json_depth,
                               .max_messages = (size_t)w->cfg->max_messages,
                               .memo = w->memo,
                               .memo_seed = chat_memo_seed(rc->tenant)};
    struct session_ids ids = {0};
    struct chat *c = xcalloc(1, sizeof(*c));
    c->w = w;
    c->refs = 1;
    c->reply = reply_create();
    c->route = rc->route;
    c->t_start = rc->t_start;
    c->ttft_us = -1;
    util_copy(c->path, sizeof(c->path), rc->target, rc->target_len);

    if (rc->body == NULL) {
        apierr_set(&e, APIERR_INVALID_REQUEST, NULL, "the request body is empty");
        goto fail;
    }
    int parsed = chatreq_parse(rc->body, rc->body_len, &opt, &c->creq, &e);
    chat_memo_report(w);
    if (parsed != 0)
        goto fail;
    const struct cfg_profile *prof = request_profile(w->cfg, req, rc, c->creq.profile, &e);
    if (prof == NULL || chat_session(c, req, rc, prof, &ids, &e) != 0)
        goto fail;
    c->prof = prof;
    c->tenant = rc->tenant;
    c->no_memory = rc->key != NULL && !rc->key->inject_memory;
    c->user = ids.user_id ? xstrdup(ids.user_id) : NULL;
    chat_prepare(c, req, ids.session_id);
    session_ids_clear(&ids);
    return;
fail:
    session_ids_clear(&ids);
    c->status = apierr_status(e.kind);
    chat_unref(c); /* writes the access line */
    w->access_quiet++;
    respond_error(w, rc->route, req, &e);
    w->access_quiet--;
}
