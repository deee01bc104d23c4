#include "proxy/chat/session.h"

#include "base/util.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Body fields that name the session or the user (besides the configured ones). */
static const char *const session_body_fields[] = {"session_id", "user_id", "user_uid"};

int session_id_valid(const char *s, size_t len)
{
    return util_id_valid(s, len);
}

/* Take text as the id named what; -1 with *e set when it is unusable. */
static int session_take(const char *text, size_t len, const char *what, char **out,
                        struct apierr *e)
{
    if (!session_id_valid(text, len)) {
        apierr_set(e, APIERR_INVALID_REQUEST, what,
                   "%s must be 1 to %d bytes of UTF-8 text without control characters", what,
                   SESSION_MAX_ID);
        return -1;
    }
    *out = xstrndup(text, len);
    return 0;
}

/* A body value: a string, or an integer taken as its decimal text. */
static int session_take_json(json_t *v, const char *what, char **out, struct apierr *e)
{
    char num[32];
    if (json_is_string(v))
        return session_take(json_string_value(v), json_string_length(v), what, out, e);
    if (json_is_integer(v)) {
        int n = snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return session_take(num, (size_t)n, what, out, e);
    }
    apierr_set(e, APIERR_INVALID_REQUEST, what, "%s must be a string or an integer", what);
    return -1;
}

static int session_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The decoded value of name in a query string into buf (cap bytes); its length, or -1 when
 * absent. Values longer than cap are cut (and then fail the length check). */
static long session_query(const char *q, const char *name, char *buf, size_t cap)
{
    size_t nlen = strlen(name);
    while (q != NULL && *q) {
        const char *end = strchr(q, '&');
        size_t plen = end ? (size_t)(end - q) : strlen(q);
        if (plen > nlen && strncmp(q, name, nlen) == 0 && q[nlen] == '=') {
            size_t n = 0;
            for (size_t i = nlen + 1; i < plen && n < cap; i++) {
                int hi, lo;
                if (q[i] == '%' && i + 2 < plen && (hi = session_hex(q[i + 1])) >= 0 &&
                    (lo = session_hex(q[i + 2])) >= 0) {
                    buf[n++] = (char)(hi * 16 + lo);
                    i += 2;
                } else {
                    buf[n++] = q[i] == '+' ? ' ' : q[i];
                }
            }
            return (long)n;
        }
        q = end ? end + 1 : NULL;
    }
    return -1;
}

/* A body field by name ("channel") or by JSON Pointer ("/elevenlabs_extra_body/conversation_id",
 * RFC 6901: ~1 is '/', ~0 is '~'); NULL when absent. */
static json_t *session_field(json_t *body, const char *path)
{
    if (path[0] != '/')
        return json_object_get(body, path);
    json_t *v = body;
    char key[256];
    for (const char *p = path; v != NULL && *p == '/';) {
        size_t n = 0;
        for (p++; *p && *p != '/' && n + 1 < sizeof(key); p++)
            key[n++] = *p == '~' && p[1] == '1'   ? (p++, '/')
                       : *p == '~' && p[1] == '0' ? (p++, '~')
                                                  : *p;
        key[n] = '\0';
        v = json_is_array(v) ? json_array_get(v, (size_t)strtoul(key, NULL, 10))
                             : json_object_get(v, key);
    }
    return v;
}

/* The id the first system message carries, matched by sessions.id_pattern (its first group);
 * -1 when there is none, 0 with *out set, or -1 with *e when it is not an id. */
static int session_from_prompt(const struct session_input *in, char **out, struct apierr *e,
                               int *found)
{
    json_t *first = json_array_get(json_object_get(in->body, "messages"), 0);
    const char *role = json_string_value(json_object_get(first, "role"));
    const char *text = json_string_value(json_object_get(first, "content"));
    regmatch_t m[2];
    *found = 0;
    if (in->id_pattern == NULL || role == NULL || strcmp(role, "system") != 0 || text == NULL ||
        regexec(in->id_pattern, text, 2, m, 0) != 0 || m[1].rm_so < 0)
        return 0;
    *found = 1;
    return session_take(text + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so), "sessions.id_pattern",
                        out, e);
}

static int session_find_id(const struct session_input *in, char **out, struct apierr *e)
{
    char buf[SESSION_MAX_ID + 1];
    json_t *call = json_object_get(in->body, "call");
    if (in->h_session != NULL)
        return session_take(in->h_session, strlen(in->h_session), "X-Session-Id", out, e);
    long n = session_query(in->query, "session_id", buf, sizeof(buf));
    if (n >= 0)
        return session_take(buf, (size_t)n, "session_id", out, e);
    json_t *v = json_object_get(in->body, "session_id");
    if (v != NULL && !json_is_null(v))
        return session_take_json(v, "session_id", out, e);
    if (json_is_object(call) && json_object_get(call, "id") != NULL)
        return session_take_json(json_object_get(call, "id"), "call.id", out, e);
    v = json_object_get(json_object_get(in->body, "elevenlabs_extra_body"), "conversation_id");
    if (v != NULL && !json_is_null(v))
        return session_take_json(v, "elevenlabs_extra_body.conversation_id", out, e);
    for (size_t i = 0; in->id_fields != NULL && i < in->id_fields->n; i++) {
        v = session_field(in->body, in->id_fields->v[i]);
        if (v != NULL && !json_is_null(v))
            return session_take_json(v, in->id_fields->v[i], out, e);
    }
    int found = 0, rc = session_from_prompt(in, out, e, &found);
    return found ? rc : 0;
}

/* metadata.user of the latest user message, or NULL. */
static json_t *session_message_user(json_t *body)
{
    json_t *msgs = json_object_get(body, "messages");
    for (size_t i = json_array_size(msgs); i-- > 0;) {
        json_t *m = json_array_get(msgs, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role != NULL && strcmp(role, "user") == 0)
            return json_object_get(json_object_get(m, "metadata"), "user");
    }
    return NULL;
}

static int session_find_user(const struct session_input *in, char **out, struct apierr *e)
{
    static const char *const fields[] = {"user_id", "user", "user_uid"};
    /* then the platforms' own: ElevenLabs' extra body, Vapi's caller (its phone number), each
     * looked into only when the body has the platform's object (most bodies have none) */
    static const struct {
        const char *object, *pointer;
    } platform[] = {{"elevenlabs_extra_body", "/elevenlabs_extra_body/user_id"},
                    {"customer", "/customer/number"},
                    {"call", "/call/customer/number"}};
    if (in->h_user != NULL)
        return session_take(in->h_user, strlen(in->h_user), "X-User-Id", out, e);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(fields); i++) {
        json_t *v = json_object_get(in->body, fields[i]);
        if (v != NULL && !json_is_null(v))
            return session_take_json(v, fields[i], out, e);
    }
    for (size_t i = 0; in->user_fields != NULL && i < in->user_fields->n; i++) {
        json_t *v = session_field(in->body, in->user_fields->v[i]);
        if (v != NULL && !json_is_null(v))
            return session_take_json(v, in->user_fields->v[i], out, e);
    }
    for (size_t i = 0; i < UTIL_ARRAY_LEN(platform); i++) {
        json_t *v = json_object_get(in->body, platform[i].object) != NULL
                        ? session_field(in->body, platform[i].pointer)
                        : NULL;
        if (v != NULL && !json_is_null(v))
            return session_take_json(v, platform[i].pointer + 1, out, e);
    }
    json_t *v = session_message_user(in->body);
    if (v != NULL && !json_is_null(v))
        return session_take_json(v, "metadata.user", out, e);
    return 0;
}

int session_resolve(const struct session_input *in, struct session_ids *ids, struct apierr *e)
{
    memset(ids, 0, sizeof(*ids));
    if (session_find_id(in, &ids->session_id, e) != 0 ||
        session_find_user(in, &ids->user_id, e) != 0) {
        session_ids_clear(ids);
        return -1;
    }
    return 0;
}

void session_ids_clear(struct session_ids *ids)
{
    free(ids->session_id);
    free(ids->user_id);
    memset(ids, 0, sizeof(*ids));
}

void session_strip(json_t *body, const struct cfg_strlist *id_fields)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(session_body_fields); i++)
        json_object_del(body, session_body_fields[i]);
    for (size_t i = 0; id_fields != NULL && i < id_fields->n; i++)
        json_object_del(body, id_fields->v[i]);
    if (json_is_object(json_object_get(body, "call")))
        json_object_del(body, "call"); /* Vapi's call object: not an OpenAI field */
}
