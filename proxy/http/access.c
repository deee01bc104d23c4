#include "proxy/http/access.h"

#include "base/log.h"
#include "base/util.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Append " key=value" to out (at o, cap bytes); a value with a space or a quote as JSON. */
static size_t access_kv(char *out, size_t o, size_t cap, const char *key, const char *value)
{
    if (value == NULL || o >= cap)
        return o;
    if (strpbrk(value, " \"") == NULL) {
        int n = snprintf(out + o, cap - o, " %s=%s", key, value);
        return n > 0 ? o + (size_t)n : o;
    }
    json_t *s = json_string(value);
    char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    int n = q ? snprintf(out + o, cap - o, " %s=%s", key, q) : 0;
    json_free_t jfree;
    json_get_alloc_funcs(NULL, &jfree);
    if (q != NULL)
        jfree(q);
    json_decref(s);
    return n > 0 ? o + (size_t)n : o;
}

static size_t access_ms(char *out, size_t o, size_t cap, const char *key, int64_t us)
{
    if (us < 0 || o >= cap)
        return o;
    int n = snprintf(out + o, cap - o, " %s=%.1f", key, (double)us / 1000.0);
    return n > 0 ? o + (size_t)n : o;
}

static void access_text(const struct access_line *a)
{
    char line[LOG_LINE_MAX];
    int n = snprintf(line, sizeof(line), "access %s %s %d", a->method, a->path, a->status);
    size_t o = n > 0 ? (size_t)n : 0, cap = sizeof(line);
    o = access_ms(line, o, cap, "ms", a->dur_us);
    o = access_ms(line, o, cap, "ttft_ms", a->ttft_us);
    if (a->bytes >= 0 && o < cap) {
        int k = snprintf(line + o, cap - o, " bytes=%lld", a->bytes);
        o += k > 0 ? (size_t)k : 0;
    }
    const char *keys[] = {"tenant",   "session", "user",  "profile",
                          "upstream", "model",   "cache", "ended"};
    const char *vals[] = {a->tenant,   a->session, a->user,  a->profile,
                          a->upstream, a->model,   a->cache, a->ended};
    for (size_t i = 0; i < UTIL_ARRAY_LEN(keys); i++)
        o = access_kv(line, o, cap, keys[i], vals[i]);
    log_msg(LOG_INFO, "%.*s", (int)(o < cap ? o : cap - 1), line);
}

static void access_json(const struct access_line *a)
{
    json_t *j =
        json_pack("{s:s, s:s, s:i}", "method", a->method, "path", a->path, "status", a->status);
    const char *keys[] = {"tenant",   "session", "user",  "profile",
                          "upstream", "model",   "cache", "ended"};
    const char *vals[] = {a->tenant,   a->session, a->user,  a->profile,
                          a->upstream, a->model,   a->cache, a->ended};
    if (a->dur_us >= 0)
        json_object_set_new(j, "ms", json_real((double)a->dur_us / 1000.0));
    if (a->ttft_us >= 0)
        json_object_set_new(j, "ttft_ms", json_real((double)a->ttft_us / 1000.0));
    if (a->bytes >= 0)
        json_object_set_new(j, "bytes", json_integer(a->bytes));
    for (size_t i = 0; i < UTIL_ARRAY_LEN(keys); i++)
        if (vals[i] != NULL)
            json_object_set_new(j, keys[i], json_string(vals[i]));
    char *text = json_dumps(j, JSON_COMPACT);
    if (text != NULL)
        log_msg(LOG_INFO, "access %s", text);
    json_free_t jfree;
    json_get_alloc_funcs(NULL, &jfree);
    if (text != NULL)
        jfree(text);
    json_decref(j);
}

void access_write(const struct cfg *cfg, const struct access_line *a)
{
    if (!log_enabled(LOG_INFO) || strcmp(cfg->log_access, "off") == 0)
        return;
    if (strcmp(cfg->log_access, "json") == 0)
        access_json(a);
    else
        access_text(a);
}
