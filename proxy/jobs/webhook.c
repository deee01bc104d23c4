#include "proxy/jobs/webhook.h"

#include "base/log.h"

#include "base/jtext.h"
#include "base/util.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

static void webhook_hex(const unsigned char *raw, unsigned n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = digits[raw[i] >> 4];
        out[2 * i + 1] = digits[raw[i] & 15];
    }
    out[2 * n] = '\0';
}

static void webhook_hmac(const EVP_MD *md, const char *secret, const void *body, size_t len,
                         char *out)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (HMAC(md, secret, (int)strlen(secret), body, len, mac, &n) == NULL)
        log_fatal("webhook: HMAC failed"); /* only without memory */
    webhook_hex(mac, n, out);
}

void webhook_sign(const char *secret, const void *body, size_t len, struct webhook_sig *out)
{
    webhook_hmac(EVP_sha1(), secret, body, len, out->sha1);
    webhook_hmac(EVP_sha256(), secret, body, len, out->sha256);
}

int webhook_verify(const char *secret, const void *body, size_t len, const char *header)
{
    char want[65], got[65];
    size_t n = header ? strlen(header) : 0;
    if (n != 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        got[i] = (char)tolower((unsigned char)header[i]);
    got[n] = '\0';
    webhook_hmac(EVP_sha256(), secret, body, len, want);
    return util_ct_equal(want, 64, got, 64);
}

char *webhook_body(const char *notice_id, long event, int64_t notify_ms, const char *sid,
                   const char *tenant, const char *payload_json)
{
    if (notice_id == NULL || sid == NULL || tenant == NULL || payload_json == NULL)
        return NULL; /* a row that did not read back as text */
    json_t *payload = jtext_load(payload_json, strlen(payload_json), 0, NULL);
    if (payload == NULL)
        return NULL;
    json_t *b = json_pack("{s:s, s:i, s:i, s:I, s:s, s:s, s:o}", "noticeId", notice_id, "productId",
                          WEBHOOK_PRODUCT_ID, "eventType", (int)event, "notifyMs",
                          (json_int_t)notify_ms, "sid", sid, "tenant", tenant, "payload", payload);
    char *text = b ? jtext_dump(b, NULL) : NULL;
    json_decref(b);
    return text;
}

int64_t webhook_backoff_ms(long backoff_ms, long max_ms, long attempt, uint32_t rnd)
{
    int64_t d = backoff_ms;
    for (long i = 1; i < attempt && d < max_ms; i++)
        d *= 2;
    if (d > max_ms)
        d = max_ms;
    int64_t half = d / 2;
    return d - half + (half > 0 ? (int64_t)(rnd % (uint64_t)(half + 1)) : 0);
}

static void webhook_notice_add(struct webhook_notice *n, json_t *v)
{
    if (!json_is_string(v) || !util_id_valid(json_string_value(v), json_string_length(v)))
        return;
    for (size_t i = 0; i < n->nids; i++) {
        if (strcmp(n->ids[i], json_string_value(v)) == 0)
            return;
    }
    n->ids[n->nids++] = xstrdup(json_string_value(v));
}

int webhook_parse_notice(const char *body, size_t len, const char *field,
                         struct webhook_notice *out, char **err)
{
    memset(out, 0, sizeof(*out));
    json_t *root = jtext_load(body, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *event = json_object_get(root, "eventType");
    json_t *payload = json_object_get(root, "payload");
    json_t *ms = json_object_get(root, "notifyMs"), *nid = json_object_get(root, "noticeId");
    int rc = -1;
    if (!json_is_object(root))
        *err = xstrdup("the body must be a JSON object");
    else if (!json_is_integer(event))
        *err = xstrdup("eventType must be an integer");
    else if (payload != NULL && !json_is_object(payload))
        *err = xstrdup("payload must be an object");
    else if (ms != NULL && !json_is_integer(ms))
        *err = xstrdup("notifyMs must be an integer");
    else if (nid != NULL && (!json_is_string(nid) ||
                             !util_id_valid(json_string_value(nid), json_string_length(nid))))
        *err = xstrdup("noticeId must be 1 to 256 bytes of text");
    else
        rc = 0;
    if (rc == 0) {
        out->notify_ms = ms ? (int64_t)json_integer_value(ms) : -1;
        out->notice_id = nid ? xstrdup(json_string_value(nid)) : NULL;
        out->event = (long)json_integer_value(event);
        webhook_notice_add(out, json_object_get(json_object_get(payload, "labels"), "session_id"));
        webhook_notice_add(out, json_object_get(payload, "name"));
        if (field != NULL && *field != '\0')
            webhook_notice_add(out, json_object_get(payload, field));
    }
    json_decref(root);
    return rc;
}

void webhook_notice_clear(struct webhook_notice *n)
{
    for (size_t i = 0; i < n->nids; i++)
        free(n->ids[i]);
    free(n->notice_id);
    memset(n, 0, sizeof(*n));
}
