#include "proxy/chat/chatreq.h"

#include "base/log.h"

#include "base/jmemo.h"
#include "base/jtext.h"
#include "base/util.h"

#include <stddef.h>
#include <string.h>

/* Fields that route a request inside memproxy and mean nothing to an upstream. */
static const char *const chatreq_own_fields[] = {"profile"};

static const char *const chatreq_roles[] = {"system",    "developer", "user",
                                            "assistant", "tool",      "function"};

static int chatreq_role_ok(const char *role)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(chatreq_roles); i++) {
        if (strcmp(role, chatreq_roles[i]) == 0)
            return 1;
    }
    return 0;
}

/* A message's error: param "messages[i]" + suffix, message "<param> " + what. Formatted only
 * here, on the way out: a valid window (every request) formats nothing. */
static int chatreq_bad_message(struct apierr *err, size_t i, const char *suffix, const char *what)
{
    char param[64];
    snprintf(param, sizeof(param), "messages[%zu]%s", i, suffix);
    apierr_set(err, APIERR_INVALID_REQUEST, param, "%s %s", param, what);
    return -1;
}

static int chatreq_check_message(json_t *m, size_t i, struct apierr *err)
{
    if (!json_is_object(m))
        return chatreq_bad_message(err, i, "", "must be an object");
    json_t *role = json_object_get(m, "role");
    if (!json_is_string(role))
        return chatreq_bad_message(err, i, ".role", "must be a string");
    if (!chatreq_role_ok(json_string_value(role)))
        return chatreq_bad_message(err, i, ".role",
                                   "is not one of system, developer, user, assistant, tool, "
                                   "function");
    json_t *content = json_object_get(m, "content");
    if (content == NULL || json_is_null(content)) {
        if (strcmp(json_string_value(role), "assistant") == 0)
            return 0; /* an assistant turn may be only tool_calls */
        return chatreq_bad_message(err, i, ".content", "is required");
    }
    if (!json_is_string(content) && !json_is_array(content))
        return chatreq_bad_message(err, i, ".content",
                                   "must be a string or an array of content parts");
    return 0;
}

static int chatreq_check_options(struct chatreq *r, struct apierr *err)
{
    json_t *model = json_object_get(r->body, "model");
    json_t *stream = json_object_get(r->body, "stream");
    json_t *opts = json_object_get(r->body, "stream_options");
    json_t *profile = json_object_get(r->body, "profile");

    if (model != NULL && !json_is_string(model)) {
        apierr_set(err, APIERR_INVALID_REQUEST, "model", "model must be a string");
        return -1;
    }
    if (stream != NULL && !json_is_boolean(stream) && !json_is_null(stream)) {
        apierr_set(err, APIERR_INVALID_REQUEST, "stream", "stream must be a boolean");
        return -1;
    }
    if (opts != NULL && !json_is_object(opts) && !json_is_null(opts)) {
        apierr_set(err, APIERR_INVALID_REQUEST, "stream_options",
                   "stream_options must be an object");
        return -1;
    }
    if (profile != NULL && !json_is_string(profile)) {
        apierr_set(err, APIERR_INVALID_REQUEST, "profile", "profile must be a string");
        return -1;
    }
    r->stream = json_is_true(stream);
    r->include_usage = json_is_true(json_object_get(opts, "include_usage"));
    r->profile = json_string_value(profile);
    return 0;
}

static int chatreq_check(struct chatreq *r, const struct chatreq_opts *opt, struct apierr *err)
{
    if (!json_is_object(r->body)) {
        apierr_set(err, APIERR_INVALID_REQUEST, NULL, "the request body must be a JSON object");
        return -1;
    }
    r->messages = json_object_get(r->body, "messages");
    if (!json_is_array(r->messages)) {
        apierr_set(err, APIERR_INVALID_REQUEST, "messages", "messages must be an array");
        return -1;
    }
    size_t n = json_array_size(r->messages);
    if (n == 0 || n > opt->max_messages) {
        apierr_set(err, APIERR_INVALID_REQUEST, "messages",
                   "messages must hold between 1 and %zu messages", opt->max_messages);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(r->messages, i);
        uint64_t *note = jmemo_note(jmemo_find(opt->memo, m)); /* the memo's: checked once */
        if (note != NULL && (*note & JMEMO_NOTE_CHECKED))
            continue;
        if (chatreq_check_message(m, i, err) != 0)
            return -1;
        if (note != NULL)
            *note |= JMEMO_NOTE_CHECKED;
    }
    return chatreq_check_options(r, err);
}

int chatreq_parse(const char *buf, size_t len, const struct chatreq_opts *opt, struct chatreq *out,
                  struct apierr *err)
{
    json_error_t jerr;
    memset(out, 0, sizeof(*out));
    out->body = jtext_load_memo(buf, len, JSON_REJECT_DUPLICATES, opt->max_depth, opt->memo,
                                opt->memo_seed, &jerr);
    if (out->body == NULL && json_error_code(&jerr) == json_error_stack_overflow) {
        apierr_set(err, APIERR_INVALID_JSON, NULL, "the body is nested deeper than %zu levels",
                   opt->max_depth);
        return -1;
    }
    if (out->body == NULL) {
        apierr_json_syntax(err, &jerr);
        return -1;
    }
    if (chatreq_check(out, opt, err) != 0) {
        chatreq_clear(out);
        return -1;
    }
    return 0;
}

json_t *chatreq_upstream(const struct chatreq *r, const char *model)
{
    json_t *up = json_copy(r->body); /* shallow: only top-level keys change */
    for (size_t i = 0; i < UTIL_ARRAY_LEN(chatreq_own_fields); i++)
        json_object_del(up, chatreq_own_fields[i]);
    if (model != NULL && *model != '\0')
        json_object_set_new(up, "model", json_string(model));
    if (r->stream) {
        json_t *opts = json_object_get(r->body, "stream_options");
        json_t *nopts = json_is_object(opts) ? json_copy(opts) : json_object();
        json_object_set_new(nopts, "include_usage", json_true());
        json_object_set_new(up, "stream_options", nopts);
    }
    return up;
}

void chatreq_apply_params(json_t *up, json_t *params)
{
    static const char *const fields[] = {"model",
                                         "temperature",
                                         "top_p",
                                         "max_tokens",
                                         "max_completion_tokens",
                                         "presence_penalty",
                                         "frequency_penalty",
                                         "stop",
                                         "seed",
                                         "logit_bias",
                                         "response_format",
                                         "tools",
                                         "tool_choice",
                                         "parallel_tool_calls",
                                         "reasoning_effort",
                                         "service_tier",
                                         "n",
                                         "logprobs",
                                         "top_logprobs",
                                         "user"};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(fields); i++) {
        json_t *v = json_object_get(params, fields[i]);
        if (v != NULL)
            json_object_set(up, fields[i], v);
    }
}

char *chatreq_dump(json_t *up, struct jmemo *memo, size_t *len)
{
    char *s = jtext_dump_memo(up, memo, len);
    if (s == NULL)
        log_fatal("chatreq: a tree that does not serialize"); /* its text was checked as UTF-8 */
    return s;
}

char *chatreq_upstream_body(const struct chatreq *r, const char *model, size_t *len)
{
    json_t *up = chatreq_upstream(r, model);
    char *s = chatreq_dump(up, NULL, len);
    json_decref(up);
    return s;
}

void chatreq_clear(struct chatreq *r)
{
    json_decref(r->body);
    memset(r, 0, sizeof(*r));
}
