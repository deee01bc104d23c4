/*
 * mock_upstream: an OpenAI-compatible LLM server for tests, benchmarks and the demo mode.
 *
 * Answers POST /v1/chat/completions (streaming and not), GET /v1/models and POST
 * /v1/embeddings (float or base64). Its behaviour is set by flags at start and changed at run
 * time with POST /_mock/config (a JSON object with any of the fields below); GET /_mock/stats
 * tells what it saw. It is single-threaded and listens on loopback. --idle-timeout-ms N makes
 * it close a kept-alive connection after N ms without a request (evhttp's timeout), as real
 * servers do.
 *
 *   reply            the assistant text (split into tokens at spaces)
 *   ttft_ms          delay before the first token (and before a non-streaming answer)
 *   token_delay_ms   delay between tokens
 *   fail_status      answer every chat request with this HTTP status and an OpenAI error body
 *   hang             never answer (no headers at all)
 *   function_call    a name: the reply is a call of that function in OpenAI's older functions
 *                    API (function_call, the reply's text its arguments), content null
 *   refusal          the reply is a refusal (OpenAI's structured outputs): its text comes as
 *                    delta.refusal / message.refusal, with content null
 *   reasoning        a text: the model thinks it first (DeepSeek's reasoning models): streamed
 *                    as delta.reasoning_content pieces (a word each) before the reply's tokens,
 *                    the first of them token_delay_ms later, and which then carry
 *                    "reasoning_content": null; message.reasoning_content
 *   thinking_parts   a whole (not streamed) reply's content is an array of parts as Mistral's
 *                    thinking models answer: a "thinking" part, then the text as a "text" part
 *   audio            the reply is audio (gpt-4o-audio's modalities): content null, its text
 *                    the audio's transcript (message.audio / delta.audio pieces), with an id
 *                    "audio_<the response's id>", a little data and an expires_at
 *   always_stream    answer every chat request as a stream, "stream": false or not (as a
 *                    server that ignores the field does)
 *   drop_after       close the connection abruptly after this many tokens (-1 = never)
 *   stall_after      after this many tokens (-1 = never) send nothing for stall_ms, then go on
 *   stall_ms         how long that silence lasts
 *   retry_after      a Retry-After header on fail_status answers ("" = none)
 *   echo             the reply is the JSON of the messages received, so a test sees what
 *                    the upstream was sent
 *   seeded           a request with an integer `seed` (an OpenAI field memproxy forwards) is
 *                    answered "Answer <seed>: " and then the reply, so concurrent tests each
 *                    know their own reply and tell a retry's from the first
 *   summaries        a summarizer's request (a user message with a "Conversation:" line) is
 *                    answered with {"summary": "..."}: its earlier summary (unless none) and
 *                    its conversation's lines joined by " | ", so a test sees exactly which
 *                    turns a summary covers
 *   embed_words      embeddings from the words of each input (64 dimensions: every word of 4
 *                    letters or more counted in a hashed slot, normalized), so texts sharing
 *                    words are similar; else 8 fixed numbers per input
 *   embed_delay_ms   delay before an embeddings answer
 *   embed_status     answer embeddings requests with this HTTP status and an error body
 *
 * Stats: requests, chat_requests, streams_completed, streams_closed_early (the client hung up
 * before the end), last_close_ns (CLOCK_MONOTONIC of that hang-up, for latency checks),
 * last_body, last_authorization and last_target (the request line's target: a path, or a
 * whole URL when the mock is used as an HTTP proxy) of any request, embedding_requests,
 * embedding_inputs, embeddings_dropped (the client left before a delayed answer).
 *
 * As an HTTP proxy (a request for "http://host/path") it answers for that host itself, by the
 * path: tests that memproxy honours the proxy environment point http_proxy at it.
 *
 * It reads bodies with memproxy's own JSON reader and a memo of the messages it has read
 * (config/jtext.h, jmemo.h), not with json_loadb: the benchmarks' "instant upstream" must
 * not spend more on a 32-message window than memproxy does (jansson's reader took ~80 us of
 * the mock's CPU per window, and the proxied throughput runs were the mock's, not memproxy's).
 */
#include <ctype.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/jmemo.h"
#include "base/jtext.h"

struct mock_config {
    char *reply;
    long ttft_ms, token_delay_ms, fail_status, drop_after, stall_after, stall_ms;
    char *retry_after;
    char *function_call; /* NULL: none */
    char *reasoning;     /* NULL: none */
    int hang, echo, seeded, summaries, always_stream, refusal, audio, thinking_parts;
    int embed_words;
    long embed_delay_ms, embed_status;
};

struct mock_stats {
    long requests, chat_requests, streams_completed, streams_closed_early;
    long embedding_requests, embedding_inputs, embeddings_dropped;
    uint64_t last_close_ns;
    char *last_body, *last_authorization, *last_target;
};

static struct mock_config mock_cfg = {.drop_after = -1, .stall_after = -1};
static struct mock_stats mock_stats;
static struct event_base *mock_base;
static long mock_seq;
static struct jmemo *mock_memo; /* the messages of bodies read before (never changed) */

/* One response in progress (delays, streams). */
struct mock_resp {
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct event *timer, *hup;
    json_t *tokens; /* array of strings */
    size_t next;
    int stream, include_usage, headers_sent;
    char id[48], model[64];
    long prompt_tokens;
    json_t *answer; /* a delayed embeddings answer, sent as JSON when the timer fires */
};

static uint64_t mock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void mock_send_json(struct evhttp_request *req, int status, json_t *body)
{
    char *s = json_dumps(body, JSON_COMPACT);
    struct evbuffer *b = evbuffer_new();
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evbuffer_add(b, s, strlen(s));
    evhttp_send_reply(req, status, NULL, b);
    evbuffer_free(b);
    free(s);
    json_decref(body);
}

static json_t *mock_tokenize(const char *text)
{
    json_t *arr = json_array();
    const char *p = text;
    while (*p) {
        const char *q = p + 1;
        while (*q && *q != ' ')
            q++;
        json_array_append_new(arr, json_stringn(p, (size_t)(q - p)));
        p = q;
    }
    return arr;
}

static void mock_resp_free(struct mock_resp *r)
{
    if (r->timer)
        event_free(r->timer);
    if (r->hup)
        event_free(r->hup);
    if (r->evcon)
        evhttp_connection_set_closecb(r->evcon, NULL, NULL);
    json_decref(r->tokens);
    json_decref(r->answer);
    free(r);
}

/* Stop watching the client: the response is ending normally. */
static void mock_unwatch(struct mock_resp *r)
{
    if (r->hup) {
        event_free(r->hup);
        r->hup = NULL;
    }
    evhttp_connection_set_closecb(r->evcon, NULL, NULL);
    r->evcon = NULL;
}

/* Answer with body (taken) and free r. */
static void mock_finish_json(struct mock_resp *r, json_t *body)
{
    mock_unwatch(r);
    mock_send_json(r->req, 200, body);
    mock_resp_free(r);
}

static void mock_client_gone(struct mock_resp *r)
{
    if (r->answer != NULL) {
        mock_stats.embeddings_dropped++;
        return;
    }
    mock_stats.streams_closed_early++;
    mock_stats.last_close_ns = mock_now_ns();
}

static void mock_conn_closed(struct evhttp_connection *evcon, void *arg)
{
    struct mock_resp *r = arg;
    if (r->req && evhttp_request_get_connection(r->req) == NULL)
        evhttp_request_free(r->req);
    r->evcon = NULL;
    mock_client_gone(r);
    mock_resp_free(r);
}

static void mock_hup_cb(evutil_socket_t fd, short what, void *arg)
{
    struct mock_resp *r = arg;
    struct evhttp_connection *evcon = r->evcon;
    mock_client_gone(r);
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    r->evcon = NULL;
    mock_resp_free(r);
    evhttp_connection_free(evcon);
}

#define MOCK_AUDIO_EXPIRES 1900000000 /* an audio reply's expires_at (seconds) */

static void mock_chunk(struct mock_resp *r, struct evbuffer *out, json_t *delta, const char *finish)
{
    json_t *c = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:o, s:o}]}", "id", r->id, "object",
                          "chat.completion.chunk", "created", (json_int_t)time(NULL), "model",
                          r->model, "choices", "index", 0, "delta", delta, "finish_reason",
                          finish ? json_string(finish) : json_null());
    if (r->include_usage)
        json_object_set_new(c, "usage", json_null());
    char *s = json_dumps(c, JSON_COMPACT);
    evbuffer_add_printf(out, "data: %s\n\n", s);
    free(s);
    json_decref(c);
}

static json_t *mock_usage(struct mock_resp *r)
{
    long completion = (long)json_array_size(r->tokens);
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", (int)r->prompt_tokens, "completion_tokens",
                     (int)completion, "total_tokens", (int)(r->prompt_tokens + completion));
}

/* The reply's shape: text, a refusal, an older functions API call or audio (mock_cfg). */
static json_t *mock_first_delta(struct mock_resp *r)
{
    if (mock_cfg.refusal)
        return json_pack("{s:s, s:n, s:s}", "role", "assistant", "content", "refusal", "");
    if (mock_cfg.function_call)
        return json_pack("{s:s, s:n, s:{s:s, s:s}}", "role", "assistant", "content",
                         "function_call", "name", mock_cfg.function_call, "arguments", "");
    if (mock_cfg.audio)
        return json_pack("{s:s, s:n, s:{s:s+}}", "role", "assistant", "content", "audio", "id",
                         "audio_", r->id);
    return json_pack("{s:s, s:s}", "role", "assistant", "content", "");
}

/* The reasoning's pieces, a word each (its space kept), before the reply's first token. */
static void mock_reasoning(struct mock_resp *r, struct evbuffer *out)
{
    const char *p = mock_cfg.reasoning;
    while (p != NULL && *p != '\0') {
        size_t n = strcspn(p, " ");
        n += p[n] == ' ';
        json_t *piece = json_stringn(p, n);
        mock_chunk(r, out, json_pack("{s:o}", "reasoning_content", piece), NULL);
        p += n;
    }
}

static json_t *mock_token_delta(json_t *token)
{
    if (mock_cfg.reasoning)
        return json_pack("{s:O, s:n}", "content", token, "reasoning_content");
    if (mock_cfg.function_call)
        return json_pack("{s:{s:O}}", "function_call", "arguments", token);
    if (mock_cfg.audio) /* a transcript piece, then a piece of the audio, as OpenAI sends */
        return json_pack("{s:{s:O, s:s}}", "audio", "transcript", token, "data", "UklGRg==");
    return json_pack("{s:O}", mock_cfg.refusal ? "refusal" : "content", token);
}

static json_t *mock_whole_message(struct mock_resp *r, json_t *text)
{
    if (mock_cfg.refusal)
        return json_pack("{s:s, s:n, s:o}", "role", "assistant", "content", "refusal", text);
    if (mock_cfg.function_call)
        return json_pack("{s:s, s:n, s:{s:s, s:o}}", "role", "assistant", "content",
                         "function_call", "name", mock_cfg.function_call, "arguments", text);
    if (mock_cfg.audio)
        return json_pack("{s:s, s:n, s:{s:s+, s:s, s:i, s:o}}", "role", "assistant", "content",
                         "audio", "id", "audio_", r->id, "data", "UklGRg==", "expires_at",
                         MOCK_AUDIO_EXPIRES, "transcript", text);
    if (mock_cfg.reasoning)
        return json_pack("{s:s, s:o, s:s}", "role", "assistant", "content", text,
                         "reasoning_content", mock_cfg.reasoning);
    if (mock_cfg.thinking_parts)
        return json_pack("{s:s, s:[{s:s, s:[{s:s, s:s}]}, {s:s, s:o}]}", "role", "assistant",
                         "content", "type", "thinking", "thinking", "type", "text", "text",
                         "Let me think. {\"draft\": true}", "type", "text", "text", text);
    return json_pack("{s:s, s:o}", "role", "assistant", "content", text);
}

static void mock_stream_end(struct mock_resp *r, struct evbuffer *out)
{
    if (mock_cfg.audio)
        mock_chunk(r, out, json_pack("{s:{s:i}}", "audio", "expires_at", MOCK_AUDIO_EXPIRES), NULL);
    mock_chunk(r, out, json_object(), "stop");
    if (r->include_usage) {
        json_t *u = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", r->id, "object",
                              "chat.completion.chunk", "created", (json_int_t)time(NULL), "model",
                              r->model, "choices", "usage", mock_usage(r));
        char *s = json_dumps(u, JSON_COMPACT);
        evbuffer_add_printf(out, "data: %s\n\n", s);
        free(s);
        json_decref(u);
    }
    evbuffer_add_printf(out, "data: [DONE]\n\n");
}

/* Emit tokens: all remaining ones when there is no per-token delay, else one per tick. */
static void mock_stream_step(struct mock_resp *r)
{
    struct evbuffer *out = evbuffer_new();
    if (!r->headers_sent) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
        evhttp_add_header(h, "Content-Type", "text/event-stream");
        evhttp_send_reply_start(r->req, 200, "OK");
        r->headers_sent = 1;
        mock_chunk(r, out, mock_first_delta(r), NULL);
        mock_reasoning(r, out);
        if (mock_cfg.reasoning && mock_cfg.token_delay_ms > 0) { /* the thinking takes a tick */
            evhttp_send_reply_chunk(r->req, out);
            evbuffer_free(out);
            struct timeval tv = {mock_cfg.token_delay_ms / 1000,
                                 (mock_cfg.token_delay_ms % 1000) * 1000};
            evtimer_add(r->timer, &tv);
            return;
        }
    }
    size_t n = json_array_size(r->tokens);
    do {
        if (mock_cfg.drop_after >= 0 && (long)r->next >= mock_cfg.drop_after) {
            evhttp_send_reply_chunk(r->req, out);
            evbuffer_free(out);
            struct evhttp_connection *evcon = r->evcon;
            evhttp_connection_set_closecb(evcon, NULL, NULL);
            r->evcon = NULL;
            mock_resp_free(r);
            evhttp_connection_free(evcon); /* abrupt: no chunk terminator */
            return;
        }
        if (r->next < n)
            mock_chunk(r, out, mock_token_delta(json_array_get(r->tokens, r->next)), NULL);
        r->next++;
        if (mock_cfg.stall_after >= 0 && (long)r->next == mock_cfg.stall_after)
            break; /* the silence: the next tokens after stall_ms */
    } while (mock_cfg.token_delay_ms == 0 && r->next < n);
    if (r->next >= n) {
        mock_stream_end(r, out);
        evhttp_send_reply_chunk(r->req, out);
        evbuffer_free(out);
        mock_unwatch(r);
        evhttp_send_reply_end(r->req);
        mock_stats.streams_completed++;
        mock_resp_free(r);
        return;
    }
    evhttp_send_reply_chunk(r->req, out);
    evbuffer_free(out);
    long ms = mock_cfg.stall_after >= 0 && (long)r->next == mock_cfg.stall_after
                  ? mock_cfg.stall_ms
                  : mock_cfg.token_delay_ms;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(r->timer, &tv);
}

static void mock_complete(struct mock_resp *r)
{
    json_t *text = json_string("");
    for (size_t i = 0; i < json_array_size(r->tokens); i++) {
        const char *t = json_string_value(json_array_get(r->tokens, i));
        char *joined = NULL;
        if (asprintf(&joined, "%s%s", json_string_value(text), t) < 0)
            abort();
        json_string_set(text, joined);
        free(joined);
    }
    json_t *message = mock_whole_message(r, text);
    json_t *body = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:o, s:s}], s:o}", "id", r->id,
                             "object", "chat.completion", "created", (json_int_t)time(NULL),
                             "model", r->model, "choices", "index", 0, "message", message,
                             "finish_reason", "stop", "usage", mock_usage(r));
    mock_finish_json(r, body);
}

static void mock_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct mock_resp *r = arg;
    json_t *answer = r->answer;
    r->answer = NULL;
    if (answer)
        mock_finish_json(r, answer);
    else if (r->stream)
        mock_stream_step(r);
    else
        mock_complete(r);
}

static void mock_watch(struct mock_resp *r)
{
    r->evcon = evhttp_request_get_connection(r->req);
    evhttp_connection_set_closecb(r->evcon, mock_conn_closed, r);
    evutil_socket_t fd = bufferevent_getfd(evhttp_connection_get_bufferevent(r->evcon));
    r->hup = event_new(mock_base, fd, EV_CLOSED, mock_hup_cb, r);
    event_add(r->hup, NULL);
}

/* The summaries mode's answer to a summarizer's request, or NULL when msgs is not one. */
static char *mock_summary(json_t *msgs)
{
    const char *text = json_string_value(
        json_object_get(json_array_get(msgs, json_array_size(msgs) - 1), "content"));
    const char *conv = text ? strstr(text, "\nConversation:\n") : NULL;
    if (conv == NULL)
        return NULL;
    const char *earlier = strstr(text, "Earlier summary: ");
    size_t cap = strlen(text) * 2 + 16, n = 0;
    char *sum = calloc(1, cap);
    if (earlier != NULL && strncmp(earlier + 17, "(none)", 6) != 0)
        n += (size_t)snprintf(sum, cap, "%.*s", (int)strcspn(earlier + 17, "\n"), earlier + 17);
    for (const char *p = conv + 15; *p;) {
        size_t len = strcspn(p, "\n");
        if (len > 0)
            n += (size_t)snprintf(sum + n, cap - n, "%s%.*s", n ? " | " : "", (int)len, p);
        p += len + (p[len] == '\n');
    }
    json_t *answer = json_pack("{s:s}", "summary", sum);
    char *out = json_dumps(answer, JSON_COMPACT);
    json_decref(answer);
    free(sum);
    return out;
}

static void mock_chat(struct evhttp_request *req, json_t *body)
{
    mock_stats.chat_requests++;
    if (mock_cfg.fail_status > 0) {
        if (mock_cfg.retry_after != NULL && *mock_cfg.retry_after)
            evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
                              mock_cfg.retry_after);
        mock_send_json(req, (int)mock_cfg.fail_status,
                       json_pack("{s:{s:s, s:s, s:n, s:s}}", "error", "message", "injected failure",
                                 "type", "server_error", "param", "code", "mock_failure"));
        return;
    }
    struct mock_resp *r = calloc(1, sizeof(*r));
    r->req = req;
    r->stream = json_is_true(json_object_get(body, "stream")) || mock_cfg.always_stream;
    r->include_usage =
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage"));
    snprintf(r->id, sizeof(r->id), "chatcmpl-mock-%ld", ++mock_seq);
    const char *model = json_string_value(json_object_get(body, "model"));
    snprintf(r->model, sizeof(r->model), "%s", model ? model : "mock-model");
    json_t *msgs = json_object_get(body, "messages");
    r->prompt_tokens = (long)json_array_size(msgs) * 8;
    char *echo = mock_cfg.summaries ? mock_summary(msgs) : NULL;
    if (echo == NULL && mock_cfg.echo)
        echo = json_dumps(msgs, JSON_COMPACT);
    json_t *seed = json_object_get(body, "seed");
    if (echo == NULL && mock_cfg.seeded && json_is_integer(seed) &&
        asprintf(&echo, "Answer %lld: %s", (long long)json_integer_value(seed), mock_cfg.reply) < 0)
        abort();
    r->tokens = mock_tokenize(echo ? echo : mock_cfg.reply);
    free(echo);
    r->timer = evtimer_new(mock_base, mock_timer_cb, r);
    mock_watch(r);
    if (mock_cfg.hang)
        return; /* the client gives up; mock_conn_closed/mock_hup_cb free r */
    struct timeval tv = {mock_cfg.ttft_ms / 1000, (mock_cfg.ttft_ms % 1000) * 1000};
    if (mock_cfg.ttft_ms == 0)
        mock_timer_cb(-1, 0, r);
    else
        evtimer_add(r->timer, &tv);
}

/* A text's word vector (embed_words): words of 4+ letters or digits, lowercased, each
 * counted in slot FNV-1a(word) % 64, then normalized. */
static void mock_word_vector(const char *text, float v[64])
{
    double norm = 0;
    memset(v, 0, 64 * sizeof(float));
    for (const char *p = text; *p;) {
        while (*p && !isalnum((unsigned char)*p))
            p++;
        const char *w = p;
        uint32_t h = 2166136261u;
        while (*p && isalnum((unsigned char)*p))
            h = (h ^ (uint32_t)tolower((unsigned char)*p++)) * 16777619u;
        if (p - w >= 4)
            v[h % 64] += 1;
    }
    for (int k = 0; k < 64; k++)
        norm += (double)v[k] * v[k];
    for (int k = 0; norm > 0 && k < 64; k++)
        v[k] = (float)(v[k] / sqrt(norm));
}

/* Input i's vector: from its words, or 8 fixed numbers ((i+1)(k+1)/16). */
static int mock_vector(json_t *input, size_t i, float v[64])
{
    if (!mock_cfg.embed_words) {
        for (int k = 0; k < 8; k++)
            v[k] = (float)((i + 1) * (k + 1)) / 16.0f;
        return 8;
    }
    json_t *t = json_is_array(input) ? json_array_get(input, i) : input;
    mock_word_vector(json_is_string(t) ? json_string_value(t) : "", v);
    return 64;
}

static void mock_embeddings(struct evhttp_request *req, json_t *body)
{
    json_t *input = json_object_get(body, "input");
    size_t n = json_is_array(input) ? json_array_size(input) : 1;
    int b64 = json_is_string(json_object_get(body, "encoding_format")) &&
              strcmp(json_string_value(json_object_get(body, "encoding_format")), "base64") == 0;
    mock_stats.embedding_requests++;
    mock_stats.embedding_inputs += (long)n;
    if (mock_cfg.embed_status > 0) {
        mock_send_json(req, (int)mock_cfg.embed_status,
                       json_pack("{s:{s:s, s:s}}", "error", "message", "injected failure", "type",
                                 "server_error"));
        return;
    }
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++) {
        float v[64];
        int dim = mock_vector(input, i, v);
        json_t *vec = json_array();
        for (int k = 0; k < dim; k++)
            json_array_append_new(vec, json_real(v[k]));
        if (b64) {
            unsigned char enc[4 * 64 / 3 + 8];
            EVP_EncodeBlock(enc, (const unsigned char *)v, dim * (int)sizeof(float));
            json_decref(vec);
            vec = json_string((const char *)enc);
        }
        json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index",
                                              (int)i, "embedding", vec));
    }
    json_t *answer = json_pack("{s:s, s:o, s:s, s:{s:i, s:i}}", "object", "list", "data", data,
                               "model", "mock-embedding", "usage", "prompt_tokens", (int)n * 4,
                               "total_tokens", (int)n * 4);
    if (mock_cfg.embed_delay_ms <= 0) {
        mock_send_json(req, 200, answer);
        return;
    }
    struct mock_resp *r = calloc(1, sizeof(*r));
    struct timeval tv = {mock_cfg.embed_delay_ms / 1000, (mock_cfg.embed_delay_ms % 1000) * 1000};
    r->req = req;
    r->answer = answer;
    r->timer = evtimer_new(mock_base, mock_timer_cb, r);
    mock_watch(r);
    evtimer_add(r->timer, &tv);
}

static void mock_set_config(json_t *c)
{
    json_t *v;
    if ((v = json_object_get(c, "reply")) && json_is_string(v)) {
        free(mock_cfg.reply);
        mock_cfg.reply = strdup(json_string_value(v));
    }
    if ((v = json_object_get(c, "ttft_ms")))
        mock_cfg.ttft_ms = (long)json_integer_value(v);
    if ((v = json_object_get(c, "token_delay_ms")))
        mock_cfg.token_delay_ms = (long)json_integer_value(v);
    if ((v = json_object_get(c, "fail_status")))
        mock_cfg.fail_status = (long)json_integer_value(v);
    if ((v = json_object_get(c, "drop_after")))
        mock_cfg.drop_after = (long)json_integer_value(v);
    if ((v = json_object_get(c, "stall_after")))
        mock_cfg.stall_after = (long)json_integer_value(v);
    if ((v = json_object_get(c, "stall_ms")))
        mock_cfg.stall_ms = (long)json_integer_value(v);
    if ((v = json_object_get(c, "retry_after")) && json_is_string(v)) {
        free(mock_cfg.retry_after);
        mock_cfg.retry_after = strdup(json_string_value(v));
    }
    if ((v = json_object_get(c, "hang")))
        mock_cfg.hang = json_is_true(v);
    if ((v = json_object_get(c, "always_stream")))
        mock_cfg.always_stream = json_is_true(v);
    if ((v = json_object_get(c, "refusal")))
        mock_cfg.refusal = json_is_true(v);
    if ((v = json_object_get(c, "thinking_parts")))
        mock_cfg.thinking_parts = json_is_true(v);
    if ((v = json_object_get(c, "audio")))
        mock_cfg.audio = json_is_true(v);
    if ((v = json_object_get(c, "reasoning"))) {
        free(mock_cfg.reasoning);
        mock_cfg.reasoning = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
    }
    if ((v = json_object_get(c, "function_call"))) {
        free(mock_cfg.function_call);
        mock_cfg.function_call = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
    }
    if ((v = json_object_get(c, "echo")))
        mock_cfg.echo = json_is_true(v);
    if ((v = json_object_get(c, "seeded")))
        mock_cfg.seeded = json_is_true(v);
    if ((v = json_object_get(c, "summaries")))
        mock_cfg.summaries = json_is_true(v);
    if ((v = json_object_get(c, "embed_words")))
        mock_cfg.embed_words = json_is_true(v);
    if ((v = json_object_get(c, "embed_delay_ms")))
        mock_cfg.embed_delay_ms = (long)json_integer_value(v);
    if ((v = json_object_get(c, "embed_status")))
        mock_cfg.embed_status = (long)json_integer_value(v);
}

static json_t *mock_stats_json(void)
{
    json_t *st = json_pack(
        "{s:i, s:i, s:i, s:i, s:I, s:s?, s:s?}", "requests", (int)mock_stats.requests,
        "chat_requests", (int)mock_stats.chat_requests, "streams_completed",
        (int)mock_stats.streams_completed, "streams_closed_early",
        (int)mock_stats.streams_closed_early, "last_close_ns", (json_int_t)mock_stats.last_close_ns,
        "last_body", mock_stats.last_body, "last_authorization", mock_stats.last_authorization);
    if (mock_stats.last_target != NULL)
        json_object_set_new(st, "last_target", json_string(mock_stats.last_target));
    json_object_set_new(st, "embedding_requests", json_integer(mock_stats.embedding_requests));
    json_object_set_new(st, "embedding_inputs", json_integer(mock_stats.embedding_inputs));
    json_object_set_new(st, "embeddings_dropped", json_integer(mock_stats.embeddings_dropped));
    return st;
}

static void mock_record(struct evhttp_request *req, struct evbuffer *in)
{
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    free(mock_stats.last_authorization);
    mock_stats.last_authorization = auth ? strdup(auth) : NULL;
    free(mock_stats.last_body);
    free(mock_stats.last_target);
    mock_stats.last_target = strdup(evhttp_request_get_uri(req));
    size_t len = evbuffer_get_length(in);
    mock_stats.last_body = malloc(len + 1);
    evbuffer_copyout(in, mock_stats.last_body, len);
    mock_stats.last_body[len] = '\0';
}

static void mock_handle(struct evhttp_request *req, void *arg)
{
    const char *uri = evhttp_request_get_uri(req);
    if (strncmp(uri, "http://", 7) == 0) { /* asked as a proxy: the path decides */
        const char *path = strchr(uri + 7, '/');
        uri = path != NULL ? path : "/";
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    json_t *body = jtext_load_memo((const char *)evbuffer_pullup(in, -1), evbuffer_get_length(in),
                                   0, JTEXT_MAX_DEPTH, mock_memo, 0, NULL);
    if (strcmp(uri, "/_mock/stats") == 0) {
        mock_send_json(req, 200, mock_stats_json());
    } else if (strcmp(uri, "/_mock/config") == 0 && json_is_object(body)) {
        mock_set_config(body);
        mock_send_json(req, 200, json_pack("{s:b}", "ok", 1));
    } else {
        mock_stats.requests++;
        mock_record(req, in);
        if (strcmp(uri, "/v1/chat/completions") == 0 && json_is_object(body))
            mock_chat(req, body);
        else if (strcmp(uri, "/v1/models") == 0)
            mock_send_json(req, 200,
                           json_pack("{s:s, s:[{s:s, s:s, s:i, s:s}]}", "object", "list", "data",
                                     "id", "mock-model", "object", "model", "created", 0,
                                     "owned_by", "memproxy-mock"));
        else if (strcmp(uri, "/v1/embeddings") == 0 && json_is_object(body))
            mock_embeddings(req, body);
        else
            mock_send_json(req, 404, json_pack("{s:{s:s}}", "error", "message", "no such route"));
    }
    json_decref(body);
}

static void mock_sigterm(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopbreak(mock_base);
}

int main(int argc, char **argv)
{
    const char *listen_host = "127.0.0.1", *port_file = NULL;
    int port = 0, c;
    long idle_ms = 0;
    static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
                                         {"port-file", required_argument, NULL, 'f'},
                                         {"ttft-ms", required_argument, NULL, 't'},
                                         {"token-delay-ms", required_argument, NULL, 'd'},
                                         {"reply", required_argument, NULL, 'r'},
                                         {"idle-timeout-ms", required_argument, NULL, 'i'},
                                         {NULL, 0, NULL, 0}};
    mock_memo = jmemo_create(4 * 1024 * 1024);
    mock_cfg.reply =
        strdup("Hello! This is the memproxy mock upstream, streaming one token at a time.");
    while ((c = getopt_long(argc, argv, "p:f:t:d:r:i:", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            port = atoi(optarg);
            break;
        case 'f':
            port_file = optarg;
            break;
        case 't':
            mock_cfg.ttft_ms = atol(optarg);
            break;
        case 'd':
            mock_cfg.token_delay_ms = atol(optarg);
            break;
        case 'r':
            free(mock_cfg.reply);
            mock_cfg.reply = strdup(optarg);
            break;
        case 'i':
            idle_ms = atol(optarg);
            break;
        default:
            fprintf(stderr, "usage: mock_upstream [--port N] [--port-file F] [--ttft-ms N] "
                            "[--token-delay-ms N] [--reply TEXT] [--idle-timeout-ms N]\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    mock_base = event_base_new();
    struct evhttp *http = evhttp_new(mock_base);
    evhttp_set_gencb(http, mock_handle, NULL);
    if (idle_ms > 0) { /* kept-alive connections are closed after this long without a request */
        struct timeval tv = {.tv_sec = idle_ms / 1000, .tv_usec = (idle_ms % 1000) * 1000};
        evhttp_set_timeout_tv(http, &tv);
    }
    struct evhttp_bound_socket *bs =
        evhttp_bind_socket_with_handle(http, listen_host, (ev_uint16_t)port);
    if (bs == NULL) {
        fprintf(stderr, "mock_upstream: cannot listen on %s:%d\n", listen_host, port);
        return 1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl);
    port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        fprintf(f, "%d\n", port);
        fclose(f);
    }
    fprintf(stderr, "mock_upstream listening on http://%s:%d/v1\n", listen_host, port);
    struct event *term = evsignal_new(mock_base, SIGTERM, mock_sigterm, NULL);
    struct event *intr = evsignal_new(mock_base, SIGINT, mock_sigterm, NULL);
    event_add(term, NULL);
    event_add(intr, NULL);
    event_base_dispatch(mock_base);
    event_free(term);
    event_free(intr);
    evhttp_free(http);
    event_base_free(mock_base);
    jmemo_destroy(mock_memo);
    free(mock_cfg.reply);
    free(mock_stats.last_body);
    free(mock_stats.last_authorization);
    return 0;
}
