/*
 * Fuzz session and user resolution. The input is "<query>\n<body JSON>": the query string is
 * parsed as the URI's, the body as the request's. A resolved id must be 1..SESSION_MAX_ID
 * bytes without control characters, and stripping must remove every routing field. Fields
 * are named plainly and by JSON Pointer; an id may come from the system prompt's pattern.
 */
#include "fuzz.h"
#include "proxy/chat/session.h"

#include <stdlib.h>
#include <string.h>

static void fuzz_check_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > SESSION_MAX_ID)
        abort();
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)id[i] < 0x20 || id[i] == 0x7f)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *nl = strchr(buf, '\n');
    const char *body_text = nl ? nl + 1 : "{}";
    if (nl)
        *nl = '\0';
    json_t *body = json_loads(body_text, 0, NULL);
    if (!json_is_object(body))
        goto out;
    /* names and JSON Pointers (escapes, array indexes, missing steps), and an id pattern */
    char *fields_v[] = {"channel", "room", "/meta/a~1b/0", "/x~0y/", "/"};
    struct cfg_strlist fields = {.v = fields_v, .n = 5};
    char *users_v[] = {"/metadata/caller", "/a/1/b"};
    struct cfg_strlist users = {.v = users_v, .n = 2};
    static regex_t pattern;
    static int compiled;
    if (!compiled)
        compiled = regcomp(&pattern, "conversation: ([A-Za-z0-9_-]*)", REG_EXTENDED) == 0 ? 1 : -1;
    struct session_input in = {.query = buf,
                               .body = body,
                               .id_fields = &fields,
                               .user_fields = &users,
                               .id_pattern = compiled == 1 ? &pattern : NULL};
    struct session_ids ids;
    struct apierr e;
    if (session_resolve(&in, &ids, &e) == 0) {
        if (ids.session_id)
            fuzz_check_id(ids.session_id);
        if (ids.user_id)
            fuzz_check_id(ids.user_id);
        session_ids_clear(&ids);
    }
    session_strip(body, &fields);
    if (json_object_get(body, "session_id") || json_object_get(body, "user_uid") ||
        json_object_get(body, "channel") || json_is_object(json_object_get(body, "call")))
        abort();
out:
    json_decref(body);
    free(buf);
    return 0;
}
