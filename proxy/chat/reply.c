#include "proxy/chat/reply.h"

#include "base/jtext.h"
#include "base/util.h"
#include "proxy/chat/chunkscan.h"
#include "proxy/chat/sse.h"

#include <string.h>

/* A string that grows by doubling, NUL-terminated once anything was put in it (s NULL before).
 * touched: a call's name or arguments that a delta added to (only those are written into the
 * call's JSON, which keeps what a body put there otherwise). full: cut at the cap (it grows no
 * more, so that a later short piece does not land after a gap). */
struct reply_text {
    char *s;
    size_t len, cap;
    int touched, full;
};

static void reply_text_put(struct reply_text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = xrealloc(t->s, t->cap);
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

struct reply_call {
    struct reply_text name, args;
};

struct reply {
    struct reply_text content;
    struct reply_text refusal;   /* the model's refusal (structured outputs), apart: not spoken */
    struct reply_text reasoning; /* a reasoning model's thinking, apart: not spoken */
    char *finish_reason;
    char *model;
    json_t *usage;
    json_t *tool_calls; /* array of {id, type, function:{name, arguments}} */
    /* Per slot of tool_calls, the name and arguments the stream's deltas build, appended in
     * place and written into the slot by reply_tool_calls(). Rebuilt as a new string at each
     * delta, a 100 KB argument sent 5 bytes a chunk held the worker 0.8 s, 400 KB 26 s. */
    struct reply_call *calls;
    size_t ncalls;
    /* OpenAI's older functions API: one function_call, its name and arguments streamed in
     * pieces as a tool call's are; written into function_call by reply_function_call() */
    struct reply_call fcall;
    json_t *function_call;
    /* An audio reply (gpt-4o-audio): its id and expiry; its transcript is the content */
    char *audio_id;
    json_int_t audio_expires_at; /* 0: none seen */
    json_t *audio;
    size_t chunks;
    int truncated;
    char *queue; /* chunks waiting for reply_flush(): [size_t len][bytes]... */
    struct chunkscan_buf scan;
    size_t qlen, qcap;
};

static void reply_calls_clear(struct reply *r)
{
    for (size_t i = 0; i < r->ncalls; i++) {
        free(r->calls[i].name.s);
        free(r->calls[i].args.s);
    }
    free(r->calls);
    r->calls = NULL;
    r->ncalls = 0;
}

struct reply *reply_create(void)
{
    return xcalloc(1, sizeof(struct reply));
}

void reply_destroy(struct reply *r)
{
    if (r == NULL)
        return;
    free(r->queue);
    chunkscan_buf_free(&r->scan);
    free(r->content.s);
    free(r->refusal.s);
    free(r->reasoning.s);
    free(r->finish_reason);
    free(r->model);
    json_decref(r->usage);
    json_decref(r->tool_calls);
    reply_calls_clear(r);
    free(r->fcall.name.s);
    free(r->fcall.args.s);
    json_decref(r->function_call);
    free(r->audio_id);
    json_decref(r->audio);
    free(r);
}

/* s (UTF-8) appended to t (the content, the refusal or the reasoning), within REPLY_MAX_TEXT:
 * cut there on a character's first byte, so the text stays UTF-8 (a turn's content that is
 * not is stored empty: reconcile_reply_turn). */
static void reply_append_to(struct reply *r, struct reply_text *t, const char *s, size_t n)
{
    if (t->full)
        return;
    if (t->len + n > REPLY_MAX_TEXT) {
        r->truncated = t->full = 1;
        n = REPLY_MAX_TEXT - t->len;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    }
    reply_text_put(t, s, n);
}

static void reply_append(struct reply *r, const char *s, size_t n)
{
    reply_append_to(r, &r->content, s, n);
}

/* Every chunk of a stream repeats its model and most end with a null finish_reason: a value
 * unchanged is not copied again. */
static void reply_set_span(char **dst, const char *s, size_t n)
{
    if (*dst != NULL && strlen(*dst) == n && memcmp(*dst, s, n) == 0)
        return;
    free(*dst);
    *dst = xstrndup(s, n);
}

static void reply_set_str(char **dst, json_t *v)
{
    if (json_is_string(v))
        reply_set_span(dst, json_string_value(v), json_string_length(v));
}

/* t (empty) from v: its text when a string, else nothing. */
static void reply_text_set(struct reply_text *t, json_t *v)
{
    *t = (struct reply_text){0};
    reply_text_put(t, json_is_string(v) ? json_string_value(v) : "",
                   json_is_string(v) ? json_string_length(v) : 0);
}

/* Append src's string to t (tool call arguments arrive in parts); a part that would take it
 * past REPLY_MAX_TEXT is left out, and so is every part after it (arguments with a piece
 * missing inside would read as other arguments), and the reply marked truncated. */
static void reply_concat(struct reply *r, struct reply_text *t, json_t *src)
{
    if (!json_is_string(src) || t->full)
        return;
    size_t b = json_string_length(src);
    if (t->len + b > REPLY_MAX_TEXT) {
        r->truncated = t->full = 1;
        return;
    }
    reply_text_put(t, json_string_value(src), b);
    t->touched = 1;
}

/* Slot idx's accumulators, made up to idx from what the slots hold. */
static struct reply_call *reply_call_at(struct reply *r, size_t idx)
{
    if (idx >= r->ncalls) {
        r->calls = xrealloc(r->calls, (idx + 1) * sizeof(*r->calls));
        for (; r->ncalls <= idx; r->ncalls++) {
            json_t *fn = json_object_get(json_array_get(r->tool_calls, r->ncalls), "function");
            reply_text_set(&r->calls[r->ncalls].name, json_object_get(fn, "name"));
            reply_text_set(&r->calls[r->ncalls].args, json_object_get(fn, "arguments"));
        }
    }
    return &r->calls[idx];
}

/* The slot of delta_call's index (made when new), its index in *at; NULL past 128. */
static json_t *reply_tool_slot(struct reply *r, json_t *delta_call, size_t *at)
{
    json_t *jidx = json_object_get(delta_call, "index");
    size_t idx = json_is_integer(jidx) && json_integer_value(jidx) >= 0
                     ? (size_t)json_integer_value(jidx)
                     : json_array_size(r->tool_calls);
    if (r->tool_calls == NULL)
        r->tool_calls = json_array();
    if (idx > 128) /* a model does not make hundreds of parallel calls; refuse to grow */
        return NULL;
    while (json_array_size(r->tool_calls) <= idx)
        json_array_append_new(r->tool_calls,
                              json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", "", "type", "function",
                                        "function", "name", "", "arguments", ""));
    *at = idx;
    return json_array_get(r->tool_calls, idx);
}

static void reply_add_tool_calls(struct reply *r, json_t *calls)
{
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        size_t idx;
        json_t *slot = reply_tool_slot(r, call, &idx);
        if (slot == NULL)
            continue;
        json_t *fn = json_object_get(call, "function");
        if (json_is_string(json_object_get(call, "id")))
            json_object_set(slot, "id", json_object_get(call, "id"));
        if (json_is_string(json_object_get(call, "type")))
            json_object_set(slot, "type", json_object_get(call, "type"));
        struct reply_call *c = reply_call_at(r, idx);
        reply_concat(r, &c->name, json_object_get(fn, "name"));
        reply_concat(r, &c->args, json_object_get(fn, "arguments"));
    }
}

/* A legacy function_call: a delta's pieces appended, a whole message's taking the place of
 * what came before. */
static void reply_take_function_call(struct reply *r, json_t *fc, int whole)
{
    if (!json_is_object(fc))
        return;
    if (whole) {
        r->fcall.name.len = r->fcall.args.len = 0;
        r->fcall.name.touched = r->fcall.args.touched = 0;
    }
    reply_concat(r, &r->fcall.name, json_object_get(fc, "name"));
    reply_concat(r, &r->fcall.args, json_object_get(fc, "arguments"));
    r->fcall.name.touched = 1; /* a call, even with no name yet */
}

/* A reasoning model's thinking: a string (reasoning_content: DeepSeek, vLLM, Groq; reasoning:
 * OpenRouter, newer vLLM; a server that sends both sends the same text twice, so the first
 * is taken), or Mistral's thinking part's text parts. Kept apart from the content: it is not
 * what the caller hears. */
static void reply_take_thinking(struct reply *r, json_t *v)
{
    size_t i;
    json_t *p;
    if (json_is_string(v)) {
        reply_append_to(r, &r->reasoning, json_string_value(v), json_string_length(v));
        return;
    }
    json_array_foreach(v, i, p) {
        json_t *text = json_object_get(p, "text");
        if (json_is_string(text))
            reply_append_to(r, &r->reasoning, json_string_value(text), json_string_length(text));
    }
}

/* Content as an array of parts (Mistral's, and OpenAI's message shape): the text parts' text;
 * other parts are not said (a model's "thinking" part goes to the reasoning, images nowhere). A
 * whole message's parts are joined by a newline, as base/msg.h reads a client's; a delta's are
 * pieces of one stream. */
static void reply_take_parts(struct reply *r, json_t *parts, int whole)
{
    size_t i;
    json_t *p;
    int any = 0;
    json_array_foreach(parts, i, p) {
        json_t *text = json_object_get(p, "text");
        const char *type = json_string_value(json_object_get(p, "type"));
        if (type != NULL && strcmp(type, "thinking") == 0)
            reply_take_thinking(r, json_object_get(p, "thinking"));
        if (!json_is_string(text) || json_string_length(text) == 0 ||
            (type != NULL && strcmp(type, "text") != 0))
            continue;
        if (whole && any)
            reply_append(r, "\n", 1);
        reply_append(r, json_string_value(text), json_string_length(text));
        any = 1;
    }
    r->chunks += any;
}

/* An audio reply's part (a delta's, or a whole message's): its transcript is what the caller
 * hears, so it is the content; the id and expiry are kept for the client's copy of it; the
 * audio's data is not kept. */
static void reply_take_audio(struct reply *r, json_t *audio)
{
    if (!json_is_object(audio))
        return;
    json_t *transcript = json_object_get(audio, "transcript");
    if (json_is_string(transcript) && json_string_length(transcript) > 0) {
        reply_append(r, json_string_value(transcript), json_string_length(transcript));
        r->chunks++;
    }
    reply_set_str(&r->audio_id, json_object_get(audio, "id"));
    json_t *expires = json_object_get(audio, "expires_at");
    if (json_is_integer(expires))
        r->audio_expires_at = json_integer_value(expires);
}

/* Is choice an object of the first choice (index 0, or none)? A request with n > 1 streams
 * its choices' deltas interleaved; the first is the reply recorded, as a whole body's first. */
static int reply_first_choice(json_t *choice)
{
    json_t *index = json_object_get(choice, "index");
    return json_is_object(choice) && (index == NULL || json_is_null(index) ||
                                      (json_is_integer(index) && json_integer_value(index) == 0));
}

/* One choice's delta (stream) or message (body): only choice 0 is the spoken reply. */
static void reply_take_choice(struct reply *r, json_t *choice, const char *part)
{
    json_t *msg = json_object_get(choice, part);
    json_t *content = json_object_get(msg, "content");
    if (json_is_string(content) && json_string_length(content) > 0) {
        reply_append(r, json_string_value(content), json_string_length(content));
        r->chunks++;
    } else if (json_is_array(content)) {
        reply_take_parts(r, content, strcmp(part, "message") == 0);
    }
    json_t *refusal = json_object_get(msg, "refusal");
    if (json_is_string(refusal))
        reply_append_to(r, &r->refusal, json_string_value(refusal), json_string_length(refusal));
    json_t *reasoning = json_object_get(msg, "reasoning_content");
    if (!json_is_string(reasoning) || json_string_length(reasoning) == 0)
        reasoning = json_object_get(msg, "reasoning");
    reply_take_thinking(r, json_is_string(reasoning) ? reasoning : NULL);
    reply_take_function_call(r, json_object_get(msg, "function_call"),
                             strcmp(part, "message") == 0);
    reply_take_audio(r, json_object_get(msg, "audio"));
    json_t *calls = json_object_get(msg, "tool_calls");
    if (json_is_array(calls)) {
        if (strcmp(part, "message") == 0) { /* whole calls, not deltas */
            json_decref(r->tool_calls);
            reply_calls_clear(r);
            r->tool_calls = json_deep_copy(calls);
        } else {
            reply_add_tool_calls(r, calls);
        }
    }
    reply_set_str(&r->finish_reason, json_object_get(choice, "finish_reason"));
}

/* Takes a reference to usage when it is an object (the one it replaces is left unchanged:
 * reply_usage()'s promise). */
static void reply_take_usage(struct reply *r, json_t *usage)
{
    if (json_is_object(usage)) {
        json_decref(r->usage);
        r->usage = json_incref(usage);
    }
}

static void reply_take_common(struct reply *r, json_t *root)
{
    reply_set_str(&r->model, json_object_get(root, "model"));
    reply_take_usage(r, json_object_get(root, "usage"));
}

/* A chunk chunkscan read: what reply_take_common and reply_take_choice take from its tree. */
static void reply_take_scanned(struct reply *r, const struct chunkscan *c)
{
    if (c->model.s != NULL)
        reply_set_span(&r->model, c->model.s, c->model.len);
    if (c->content.len > 0) {
        reply_append(r, c->content.s, c->content.len);
        r->chunks++;
    }
    if (c->finish_reason.s != NULL)
        reply_set_span(&r->finish_reason, c->finish_reason.s, c->finish_reason.len);
}

enum reply_chunk reply_add_chunk(struct reply *r, const char *data, size_t len)
{
    struct chunkscan c;
    if (chunkscan_delta(data, len, &r->scan, &c)) {
        reply_take_scanned(r, &c);
        return REPLY_CHUNK;
    }
    return reply_add_chunk_tree(r, data, len);
}

enum reply_chunk reply_add_chunk_tree(struct reply *r, const char *data, size_t len)
{
    json_t *root = jtext_load(data, len, 0, NULL);
    enum reply_chunk kind = REPLY_CHUNK;
    if (!json_is_object(root)) {
        json_decref(root);
        return REPLY_INVALID;
    }
    json_t *choices = json_object_get(root, "choices");
    if (json_object_get(root, "error") != NULL) {
        kind = REPLY_ERROR;
    } else if (json_is_array(choices) && json_array_size(choices) == 0 &&
               json_is_object(json_object_get(root, "usage"))) {
        kind = REPLY_USAGE_ONLY;
    }
    reply_take_common(r, root);
    json_t *choice = json_array_get(choices, 0);
    if (reply_first_choice(choice))
        reply_take_choice(r, choice, "delta");
    json_decref(root);
    return kind;
}

int reply_set_body(struct reply *r, const char *body, size_t len)
{
    struct chunkscan c;
    if (chunkscan_message(body, len, &r->scan, &c)) {
        reply_take_scanned(r, &c);
        if (c.usage.s != NULL) {
            json_t *usage = jtext_load(c.usage.s, c.usage.len, 0, NULL);
            reply_take_usage(r, usage);
            json_decref(usage);
        }
        return 0;
    }
    return reply_set_body_tree(r, body, len);
}

/* Does body begin as an event stream does (a field or a comment line)? */
static int reply_looks_like_events(const char *body, size_t len)
{
    static const char *const starts[] = {"data:", "event:", "id:", "retry:", ":"};
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    for (size_t k = 0; k < UTIL_ARRAY_LEN(starts); k++) {
        size_t n = strlen(starts[k]);
        if (len - i >= n && memcmp(body + i, starts[k], n) == 0)
            return 1;
    }
    return 0;
}

static int reply_body_event(void *arg, const struct sse_event *ev)
{
    if (ev->data != NULL && !sse_is_done(ev))
        reply_add_chunk(arg, ev->data, ev->data_len);
    return 0;
}

int reply_set_events(struct reply *r, const char *body, size_t len)
{
    if (!reply_looks_like_events(body, len))
        return -1;
    struct sse_parser *p = sse_parser_create(REPLY_MAX_EVENT);
    int rc = sse_parser_feed(p, body, len, reply_body_event, r);
    if (rc == 0 && sse_parser_pending(p) > 0) /* a last event without its blank line */
        rc = sse_parser_feed(p, "\n\n", 2, reply_body_event, r);
    sse_parser_destroy(p);
    return rc;
}

int reply_set_body_tree(struct reply *r, const char *body, size_t len)
{
    json_t *root = jtext_load(body, len, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return -1;
    }
    reply_take_common(r, root);
    json_t *choice = json_array_get(json_object_get(root, "choices"), 0);
    if (json_is_object(choice))
        reply_take_choice(r, choice, "message");
    json_decref(root);
    return 0;
}

const char *reply_refusal(const struct reply *r, size_t *len)
{
    *len = r->refusal.len;
    return r->refusal.s ? r->refusal.s : "";
}

const char *reply_reasoning(const struct reply *r, size_t *len)
{
    *len = r->reasoning.len;
    return r->reasoning.s ? r->reasoning.s : "";
}

int reply_said(const struct reply *r)
{
    return r->content.len > 0 || r->refusal.len > 0 || r->tool_calls != NULL ||
           r->fcall.name.touched;
}

const char *reply_content(const struct reply *r, size_t *len)
{
    *len = r->content.len;
    return r->content.s ? r->content.s : "";
}

const char *reply_finish_reason(const struct reply *r)
{
    return r->finish_reason;
}

const char *reply_model(const struct reply *r)
{
    return r->model;
}

json_t *reply_usage(const struct reply *r)
{
    return r->usage;
}

json_t *reply_tool_calls(struct reply *r)
{
    for (size_t i = 0; i < r->ncalls; i++) {
        json_t *fn = json_object_get(json_array_get(r->tool_calls, i), "function");
        const struct reply_call *c = &r->calls[i];
        /* each part was valid UTF-8 (jtext read it), and so is their concatenation */
        if (json_is_object(fn) && c->name.touched)
            json_object_set_new(fn, "name", json_stringn_nocheck(c->name.s, c->name.len));
        if (json_is_object(fn) && c->args.touched)
            json_object_set_new(fn, "arguments", json_stringn_nocheck(c->args.s, c->args.len));
    }
    return r->tool_calls;
}

json_t *reply_function_call(struct reply *r)
{
    if (!r->fcall.name.touched)
        return NULL;
    json_decref(r->function_call); /* a new object: one handed out before stays unchanged */
    /* each part was valid UTF-8 (jtext read it), and so is their concatenation */
    r->function_call = json_object();
    json_object_set_new_nocheck(
        r->function_call, "name",
        json_stringn_nocheck(r->fcall.name.s ? r->fcall.name.s : "", r->fcall.name.len));
    json_object_set_new_nocheck(
        r->function_call, "arguments",
        json_stringn_nocheck(r->fcall.args.s ? r->fcall.args.s : "", r->fcall.args.len));
    return r->function_call;
}

json_t *reply_audio(struct reply *r)
{
    if (r->audio_id == NULL)
        return NULL;
    json_decref(r->audio); /* a new object: one handed out before stays unchanged */
    r->audio = json_object();
    json_object_set_new_nocheck(r->audio, "id", json_string_nocheck(r->audio_id));
    if (r->audio_expires_at != 0)
        json_object_set_new_nocheck(r->audio, "expires_at", json_integer(r->audio_expires_at));
    return r->audio;
}

size_t reply_chunks(const struct reply *r)
{
    return r->chunks;
}

int reply_truncated(const struct reply *r)
{
    return r->truncated;
}

/* "choices" followed by an empty array, outside any string (a quote inside a JSON string is
 * escaped, so the key's opening quote is never preceded by a backslash). */
static int reply_has_empty_choices(const char *data, size_t len)
{
    static const char key[] = "\"choices\"";
    const char *end = data + len, *p = data;
    while ((p = memmem(p, (size_t)(end - p), key, sizeof(key) - 1)) != NULL) {
        const char *q = p + sizeof(key) - 1;
        int escaped = p > data && p[-1] == '\\';
        p = q;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (escaped || q >= end || *q++ != ':')
            continue;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q >= end || *q++ != '[')
            continue;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
            q++;
        if (q < end && *q == ']')
            return 1;
    }
    return 0;
}

int reply_is_usage_only(const char *data, size_t len)
{
    if (!reply_has_empty_choices(data, len))
        return 0;
    json_t *root = jtext_load(data, len, 0, NULL); /* rare: confirm it */
    json_t *choices = json_object_get(root, "choices");
    int yes = json_is_array(choices) && json_array_size(choices) == 0 &&
              json_is_object(json_object_get(root, "usage"));
    json_decref(root);
    return yes;
}

void reply_queue_chunk(struct reply *r, const char *data, size_t len)
{
    if (r->qlen + sizeof(size_t) + len > REPLY_MAX_QUEUE)
        reply_flush(r);
    if (sizeof(size_t) + len > REPLY_MAX_QUEUE) {
        reply_add_chunk(r, data, len);
        return;
    }
    if (r->qlen + sizeof(size_t) + len > r->qcap) {
        r->qcap = (r->qlen + sizeof(size_t) + len) * 2;
        r->queue = xrealloc(r->queue, r->qcap);
    }
    memcpy(r->queue + r->qlen, &len, sizeof(size_t));
    memcpy(r->queue + r->qlen + sizeof(size_t), data, len);
    r->qlen += sizeof(size_t) + len;
}

void reply_flush(struct reply *r)
{
    size_t off = 0;
    while (off < r->qlen) {
        size_t len;
        memcpy(&len, r->queue + off, sizeof(size_t));
        reply_add_chunk(r, r->queue + off + sizeof(size_t), len);
        off += sizeof(size_t) + len;
    }
    r->qlen = 0;
}

static json_t *reply_usage_zero(void)
{
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", 0, "completion_tokens", 0, "total_tokens",
                     0);
}

/* Append one "data: ..." event for chunk (taken) to *out. */
static void reply_sse(char **out, json_t *chunk)
{
    char *text = jtext_dump(chunk, NULL);
    char *n = xasprintf("%sdata: %s\n\n", *out, text);
    free(text);
    free(*out);
    *out = n;
    json_decref(chunk);
}

static char *reply_stream_text(const char *id, const char *content, const char *model,
                               json_int_t created, int include_usage, size_t *len)
{
    char *out = xstrdup("");
    reply_sse(&out, json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{s:s, s:s}, s:n}]}", "id", id,
                              "object", "chat.completion.chunk", "created", created, "model", model,
                              "choices", "index", 0, "delta", "role", "assistant", "content",
                              content, "finish_reason"));
    reply_sse(&out, json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{}, s:s}]}", "id", id, "object",
                              "chat.completion.chunk", "created", created, "model", model,
                              "choices", "index", 0, "delta", "finish_reason", "stop"));
    if (include_usage)
        reply_sse(&out, json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", id, "object",
                                  "chat.completion.chunk", "created", created, "model", model,
                                  "choices", "usage", reply_usage_zero()));
    char *n = xasprintf("%sdata: [DONE]\n\n", out);
    free(out);
    *len = strlen(n);
    return n;
}

char *reply_synthesize(const char *id, const char *content, const char *model, int stream,
                       int include_usage, size_t *len)
{
    json_int_t created = util_wall_ms() / 1000;
    if (model == NULL)
        model = "";
    if (stream)
        return reply_stream_text(id, content, model, created, include_usage, len);
    json_t *b = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:{s:s, s:s}, s:s}], s:o}", "id", id,
                          "object", "chat.completion", "created", created, "model", model,
                          "choices", "index", 0, "message", "role", "assistant", "content", content,
                          "finish_reason", "stop", "usage", reply_usage_zero());
    char *text = jtext_dump(b, len);
    json_decref(b);
    return text;
}
