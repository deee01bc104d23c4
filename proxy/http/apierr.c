#include "proxy/http/apierr.h"

#include "base/jtext.h"
#include "base/util.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int status;
    const char *type;
    const char *code;
} apierr_table[APIERR__COUNT] = {
    [APIERR_INVALID_REQUEST] = {400, "invalid_request_error", "invalid_request"},
    [APIERR_INVALID_JSON] = {400, "invalid_request_error", "invalid_json"},
    [APIERR_UNAUTHORIZED] = {401, "authentication_error", "invalid_api_key"},
    [APIERR_BAD_SIGNATURE] = {401, "authentication_error", "invalid_signature"},
    [APIERR_FORBIDDEN] = {403, "permission_error", "forbidden"},
    [APIERR_NOT_FOUND] = {404, "invalid_request_error", "not_found"},
    [APIERR_METHOD] = {405, "invalid_request_error", "method_not_allowed"},
    [APIERR_UNKNOWN_METHOD] = {501, "invalid_request_error", "method_not_implemented"},
    [APIERR_CONFLICT] = {409, "invalid_request_error", "conflict"},
    [APIERR_MISDIRECTED] = {421, "invalid_request_error", "misdirected_request"},
    [APIERR_TIMEOUT] = {408, "invalid_request_error", "request_timeout"},
    [APIERR_TOO_LARGE] = {413, "invalid_request_error", "request_too_large"},
    [APIERR_MEDIA_TYPE] = {415, "invalid_request_error", "unsupported_media_type"},
    [APIERR_INTERNAL] = {500, "server_error", "internal_error"},
    [APIERR_STORAGE] = {503, "server_error", "storage_failed"},
    [APIERR_UPSTREAM_UNREACHABLE] = {502, "upstream_error", "upstream_unreachable"},
    [APIERR_UPSTREAM_BAD_RESPONSE] = {502, "upstream_error", "upstream_bad_response"},
    [APIERR_UNAVAILABLE] = {503, "server_error", "shutting_down"},
    [APIERR_BUSY] = {503, "server_error", "too_many_connections"},
    [APIERR_UPSTREAM_TIMEOUT] = {504, "upstream_error", "upstream_timeout"},
};

void apierr_set(struct apierr *e, enum apierr_kind kind, const char *param, const char *fmt, ...)
{
    va_list ap;
    e->kind = kind;
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    /* Messages may quote client input; keep them printable ASCII so the JSON is always valid. */
    for (char *c = e->message; *c; c++) {
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
    }
}

void apierr_json_syntax(struct apierr *e, const json_error_t *jerr)
{
    if (json_error_code(jerr) == json_error_out_of_memory)
        apierr_set(e, APIERR_TOO_LARGE, NULL,
                   "the body holds more JSON values than server.max_json_nodes allows");
    else
        apierr_set(e, APIERR_INVALID_JSON, NULL,
                   "the body is not valid JSON (line %d, column %d: %s)", jerr->line, jerr->column,
                   jerr->text);
}

int apierr_status(enum apierr_kind kind)
{
    return apierr_table[kind].status;
}

const char *apierr_type(enum apierr_kind kind)
{
    return apierr_table[kind].type;
}

const char *apierr_code(enum apierr_kind kind)
{
    return apierr_table[kind].code;
}

char *apierr_json(const struct apierr *e, size_t *len)
{
    json_t *err = json_pack(
        "{s:s, s:s, s:o, s:s}", "message", e->message, "type", apierr_type(e->kind), "param",
        e->param[0] ? json_string(e->param) : json_null(), "code", apierr_code(e->kind));
    json_t *root = json_pack("{s:o}", "error", err);
    char *s = jtext_dump(root, len);
    json_decref(root);
    if (s == NULL) { /* invalid UTF-8, which we never produce */
        s = xstrdup("{\"error\":{\"message\":\"internal error\",\"type\":\"server_error\"}}");
        *len = strlen(s);
    }
    return s;
}
