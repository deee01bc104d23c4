#include "memory/inject.h"

#include "base/msg.h"
#include "base/util.h"

#include <stdlib.h>

static const char *inject_str(json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static void inject_add(json_t *out, const char *text)
{
    json_array_append_new(out, json_pack("{s:s, s:s}", "role", "system", "content", text));
}

/* The facts, "- category key: value" per line. */
static char *inject_facts_text(json_t *facts)
{
    size_t i;
    json_t *f;
    char *text = xstrdup("");
    json_array_foreach(facts, i, f) {
        char *n = xasprintf("%s%s- %s %s: %s", text, i ? "\n" : "", inject_str(f, "category"),
                            inject_str(f, "key"), inject_str(f, "value"));
        free(text);
        text = n;
    }
    return text;
}

json_t *inject_from(json_t *runtime, json_t *um)
{
    json_t *out = json_array(), *x;
    size_t i;
    json_array_foreach(runtime, i, x) {
        const char *text = json_is_string(x) ? json_string_value(x) : inject_str(x, "content");
        if (*text)
            inject_add(out, text);
    }
    const char *summary =
        json_string_value(json_object_get(json_object_get(um, "summary"), "text"));
    if (summary != NULL && *summary) /* the caller's words: quoted, never instructions */
        json_array_append_new(
            out, msg_memory_message("Summary of earlier conversations with this caller.", summary));
    if (json_array_size(json_object_get(um, "facts")) > 0) {
        char *text = inject_facts_text(json_object_get(um, "facts"));
        json_array_append_new(out,
                              msg_memory_message("What this caller has told us before.", text));
        free(text);
    }
    if (json_array_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}
