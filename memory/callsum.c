#include "memory/callsum.h"

#include "base/msg.h"

#include <string.h>

int64_t callsum_window_turns(json_t *messages)
{
    int64_t n = 0;
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (json_is_object(m) && !msg_role_is_system(msg_role(m)))
            n++;
    }
    return n;
}

int64_t callsum_next_span(int64_t last, int64_t span)
{
    if (last <= 0)
        return -1;
    return span > last ? span + (span - last) : span;
}

/* Does the client's message m say what the stored turn t said (or was to say)? */
static int callsum_same(json_t *t, json_t *m)
{
    if (strcmp(msg_role(t), msg_role(m)) != 0)
        return 0;
    int dropped = 0;
    json_t *text = msg_text(json_object_get(m, "content"), &dropped);
    const char *s = json_string_value(text);
    const char *content = json_string_value(json_object_get(t, "content"));
    const char *original = json_string_value(json_object_get(t, "original"));
    int same = (content && strcmp(s, content) == 0) || (original && strcmp(s, original) == 0);
    json_decref(text);
    return same;
}

/* The index of the next message after i that is not system (size when none). */
static size_t callsum_next(json_t *messages, size_t i)
{
    size_t n = json_array_size(messages);
    while (++i < n && msg_role_is_system(msg_role(json_array_get(messages, i))))
        ;
    return i;
}

int callsum_in_messages(const struct turnlist *turns, int64_t through, json_t *messages)
{
    long at = turnlist_find_seq(turns, through);
    if (at < 0)
        return 0;
    json_t *last = turnlist_get(turns, (size_t)at);
    json_t *after = turnlist_get(turns, (size_t)at + 1); /* NULL when it is the newest */
    size_t n = json_array_size(messages);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(messages, i);
        if (msg_role_is_system(msg_role(m)) || !callsum_same(last, m))
            continue;
        size_t k = callsum_next(messages, i);
        if (after == NULL || (k < n && callsum_same(after, json_array_get(messages, k))))
            return 1;
    }
    return 0;
}

void callsum_drop_covered(json_t *history, int64_t through)
{
    size_t n = 0;
    while (n < json_array_size(history) &&
           json_integer_value(json_object_get(json_array_get(history, n), "seq")) <= through)
        n++;
    for (size_t i = 0; i < n; i++)
        json_array_remove(history, 0);
}

json_t *callsum_message(const char *text)
{
    return msg_memory_message(CALLSUM_INTRO, text);
}
