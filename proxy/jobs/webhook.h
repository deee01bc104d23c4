/*
 * webhook: the wire format of memproxy's webhooks and of Agora's notifications — the body
 * of a stop-time dump, its signatures, the retry schedule. Pure (no I/O), so it is unit
 * tested on its own; proxy/hook.c does the delivering, proxy/notify.c the receiving.
 *
 * Signatures (Agora's scheme): Agora-Signature is the hex HMAC-SHA1 of the raw body,
 * Agora-Signature-V2 the hex HMAC-SHA256, both keyed with the webhook's secret.
 */
#ifndef MEMPROXY_WEBHOOK_H
#define MEMPROXY_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_PRODUCT_ID 17 /* Agora's Conversational AI Engine */

struct webhook_sig {
    char sha1[41];   /* Agora-Signature */
    char sha256[65]; /* Agora-Signature-V2 */
};

void webhook_sign(const char *secret, const void *body, size_t len, struct webhook_sig *out);

/* Does header (hex, either case) hold the HMAC-SHA256 of body keyed with secret? Constant
 * time in the header's contents. */
int webhook_verify(const char *secret, const void *body, size_t len, const char *header);

/*
 * The body POSTed for one outbox row: {"noticeId", "productId": 17, "eventType",
 * "notifyMs", "sid", "tenant", "payload"} with payload_json (stored JSON text) as the payload:
 * Agora's shape, and the tenant whose session it is (a receiver serving several tenants must
 * not have to guess). NULL when payload_json is not JSON or a field is missing. Caller frees.
 */
char *webhook_body(const char *notice_id, long event, int64_t notify_ms, const char *sid,
                   const char *tenant, const char *payload_json);

/* The wait before try number attempt + 1 (attempt >= 1 tries have failed): backoff_ms doubled
 * per failed try up to max_ms, with "equal jitter" (half fixed, half random from rnd), so
 * that receivers that come back are not hit by every sender at once. */
int64_t webhook_backoff_ms(long backoff_ms, long max_ms, long attempt, uint32_t rnd);

/* An Agora notification as memproxy reads it: its event type and the session ids it may
 * name, in the order they are tried — payload.labels.session_id, payload.name, then
 * payload.<field> when a field is configured. Only valid ids (util_id_valid) are kept. */
#define WEBHOOK_NOTICE_IDS 3
struct webhook_notice {
    long event;
    char *ids[WEBHOOK_NOTICE_IDS];
    size_t nids;
    int64_t notify_ms; /* notifyMs, -1 when absent */
    char *notice_id;   /* noticeId (an id, util_id_valid), NULL when absent */
};

/* 0, or -1 with the reason in *err, caller frees (not JSON, not an object, no integer eventType).
 */
int webhook_parse_notice(const char *body, size_t len, const char *field,
                         struct webhook_notice *out, char **err);
void webhook_notice_clear(struct webhook_notice *n);

#endif
