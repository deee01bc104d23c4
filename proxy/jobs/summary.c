#include "proxy/jobs/summary.h"

#include "base/jtext.h"
#include "base/util.h"
#include "memory/snapshot.h"

#include <stdio.h>
#include <string.h>

/* Is source one of skip's (the platform's own lines: greetings, "are you still there?")? */
static int summary_skipped(const struct cfg_strlist *skip, const char *source)
{
    for (size_t i = 0; skip != NULL && source != NULL && i < skip->n; i++) {
        if (strcmp(skip->v[i], source) == 0)
            return 1;
    }
    return 0;
}

/* The conversation as "ROLE: text" lines, the newest SUMMARY_MAX_TRANSCRIPT bytes of it. */
static char *summary_transcript(json_t *turns, const struct cfg_strlist *skip)
{
    size_t total = 0, first = json_array_size(turns);
    while (first > 0) {
        json_t *t = json_array_get(turns, first - 1);
        size_t n = json_string_length(json_object_get(t, "content")) + 16;
        if (total + n > SUMMARY_MAX_TRANSCRIPT)
            break;
        total += n;
        first--;
    }
    char *out = xmalloc(total + 1), *p = out;
    *p = '\0';
    for (size_t i = first; i < json_array_size(turns); i++) {
        json_t *t = json_array_get(turns, i);
        const char *role = json_string_value(json_object_get(t, "role"));
        const char *text = json_string_value(json_object_get(t, "content"));
        int user = role && strcmp(role, "user") == 0;
        if (text == NULL || *text == '\0' || (!user && (!role || strcmp(role, "assistant"))))
            continue; /* system, tool and empty turns say nothing about the caller */
        if (summary_skipped(skip, json_string_value(json_object_get(t, "source"))))
            continue; /* the platform speaking, not the conversation */
        p += snprintf(p, total + 1 - (size_t)(p - out), "%s: %s\n", user ? "USER" : "ASSISTANT",
                      text);
    }
    return out;
}

static char *summary_known(const char *previous, json_t *facts)
{
    char *out = xasprintf("Earlier summary: %s\n", previous ? previous : "(none)");
    json_t *f;
    size_t i, shown = 0;
    json_array_foreach(facts, i, f) {
        const char *cat = json_string_value(json_object_get(f, "category"));
        const char *key = json_string_value(json_object_get(f, "key"));
        const char *value = json_string_value(json_object_get(f, "value"));
        if (cat == NULL || key == NULL || value == NULL)
            continue; /* a stored row that did not read back as text */
        char *n = xasprintf("%s%s%s %s: %s\n", out, shown++ == 0 ? "Known facts:\n" : "", cat, key,
                            value);
        free(out);
        out = n;
    }
    return out;
}

json_t *summary_request(const char *model, const char *prompt, json_t *turns, const char *previous,
                        json_t *facts, const struct cfg_strlist *skip)
{
    char *transcript = summary_transcript(turns, skip);
    char *known = summary_known(previous, facts);
    char *user = xasprintf("%s\nConversation:\n%s", known, transcript);
    json_t *body =
        json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:s}], s:b, s:{s:s}}", "model", model, "messages",
                  "role", "system", "content", prompt, "role", "user", "content", user, "stream", 0,
                  "response_format", "type", "json_object");
    free(transcript);
    free(known);
    free(user);
    return body;
}

static const char *summary_skip_space(const char *text, const char *end)
{
    while (text < end && (*text == ' ' || *text == '\n' || *text == '\r' || *text == '\t'))
        text++;
    return text;
}

/* After a reasoning model's thinking written into the answer (<think>...</think>, as
 * DeepSeek-R1 and Qwen3 served without a reasoning parser answer), or text itself. */
static const char *summary_skip_thinking(const char *text, const char *end)
{
    static const char open[] = "<think>", close[] = "</think>";
    size_t n = (size_t)(end - text);
    if (n < sizeof(open) - 1 || memcmp(text, open, sizeof(open) - 1) != 0)
        return text;
    const char *c = memmem(text, n, close, sizeof(close) - 1);
    /* never closed: not JSON either, as the parse will say */
    return c != NULL ? summary_skip_space(c + sizeof(close) - 1, end) : text;
}

json_t *summary_parse(const char *text, size_t len, char **err)
{
    const char *end = text + len;
    text = summary_skip_thinking(summary_skip_space(text, end), end);
    if (end - text > SUMMARY_MAX_ANSWER) {
        *err = xasprintf("the answer is %zu bytes; at most %d are read", (size_t)(end - text),
                         SUMMARY_MAX_ANSWER);
        return NULL;
    }
    if (end - text >= 3 && memcmp(text, "```", 3) == 0) { /* ```json ... ``` */
        const char *nl = memchr(text, '\n', (size_t)(end - text));
        text = nl ? nl + 1 : end;
        while (end > text && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\r'))
            end--;
        if (end - text >= 3 && memcmp(end - 3, "```", 3) == 0)
            end -= 3;
    }
    json_t *j = jtext_load(text, (size_t)(end - text), JSON_REJECT_DUPLICATES, NULL);
    json_t *out = j ? snapshot_user_memory(j, err) : NULL;
    if (j == NULL)
        *err = xstrdup("the answer is not a JSON object");
    else if (out != NULL && !json_is_object(json_object_get(out, "summary"))) {
        *err = xstrdup("the answer has no summary");
        json_decref(out);
        out = NULL;
    }
    json_decref(j);
    return out;
}
