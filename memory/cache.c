#include "memory/cache.h"

#include "base/log.h"
#include "base/msg.h"
#include "base/util.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

/* The user's text lower-cased, trimmed, runs of whitespace as one space. */
static char *cache_normalize(const char *s)
{
    char *out = xmalloc(strlen(s) + 1), *o = out;
    int space = 0;
    for (; *s; s++) {
        if (isspace((unsigned char)*s)) {
            space = o != out;
            continue;
        }
        if (space)
            *o++ = ' ';
        space = 0;
        *o++ = (char)tolower((unsigned char)*s);
    }
    *o = '\0';
    return out;
}

/* Body fields that do not shape the answer's text: how it is delivered, who asks (the key has
 * the tenant), what the upstream keeps. Every other field is in the key. */
static const char *const cache_delivery[] = {
    "messages",     "stream", "stream_options", "user", "metadata", "store",
    "service_tier", "n",      "logprobs" /* only 1 and false are cached (cache_answerable): the same
                                            as absent */
};

/* Fields whose answer a cached one cannot stand for: tools and functions (calls, not text),
 * several choices, token log-probabilities. */
static int cache_answerable(json_t *body)
{
    json_t *n = json_object_get(body, "n"), *lp = json_object_get(body, "logprobs");
    return json_object_get(body, "tools") == NULL && json_object_get(body, "functions") == NULL &&
           (n == NULL || json_is_null(n) || (json_is_integer(n) && json_integer_value(n) == 1)) &&
           (lp == NULL || json_is_false(lp) || json_is_null(lp));
}

/* The body's answer-shaping fields, keys sorted, as text (jansson's to free). */
static char *cache_options(json_t *body)
{
    json_t *rest = json_copy(body);
    for (size_t i = 0; i < UTIL_ARRAY_LEN(cache_delivery); i++)
        json_object_del(rest, cache_delivery[i]);
    char *text = json_dumps(rest, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(rest);
    return text;
}

static void cache_hash(EVP_MD_CTX *h, const char *s)
{
    EVP_DigestUpdate(h, s ? s : "", s ? strlen(s) + 1 : 1); /* the NUL separates fields */
}

int cache_key(const char *tenant, const char *profile, json_t *body, char *key)
{
    json_t *msgs = json_object_get(body, "messages"), *m;
    size_t n = json_array_size(msgs), i;
    json_t *last = json_array_get(msgs, n - 1);
    const char *role = json_string_value(json_object_get(last, "role"));
    const char *text = json_string_value(json_object_get(last, "content"));
    if (n == 0 || role == NULL || strcmp(role, "user") != 0 || text == NULL ||
        !cache_answerable(body))
        return -1;
    for (i = 0; i + 1 < n; i++) {
        if (!msg_role_is_system(msg_role(json_array_get(msgs, i))))
            return -1;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    if (h == NULL || EVP_DigestInit_ex(h, EVP_sha256(), NULL) != 1)
        log_fatal("cache: cannot start a SHA-256 digest");
    cache_hash(h, tenant);
    cache_hash(h, profile);
    json_free_t jfree; /* json_dumps' text is jansson's to free (config/jalloc.h) */
    json_get_alloc_funcs(NULL, &jfree);
    char *options = cache_options(body); /* the model, sampling, stop, format, seed, ... */
    cache_hash(h, options);
    jfree(options);
    json_array_foreach(msgs, i, m) {
        int final = i + 1 == n;
        char *text_i = final ? cache_normalize(text) : json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
        cache_hash(h, text_i);
        if (final)
            free(text_i);
        else
            jfree(text_i);
    }
    EVP_DigestFinal_ex(h, md, &len);
    EVP_MD_CTX_free(h);
    for (unsigned k = 0; k < len && 2 * k + 1 < CACHE_KEY_LEN + 1; k++)
        snprintf(key + 2 * k, 3, "%02x", md[k]);
    return 0;
}
