/*
 * Fuzz the reading of Agora's notifications (POST /v1/notifications/agora, proxy/webhook.c):
 * parsing never fails on an object with an integer eventType, every id it returns is a usable
 * id, and signature checks of arbitrary headers never crash.
 */
#include "base/util.h"
#include "fuzz.h"
#include "proxy/jobs/webhook.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct webhook_notice n;
    char *err = NULL, header[80];
    size_t hn = size < sizeof(header) - 1 ? size : sizeof(header) - 1;
    memcpy(header, data, hn);
    header[hn] = '\0';
    (void)webhook_verify("secret", data, size, header);
    if (webhook_parse_notice((const char *)data, size, "channel", &n, &err) != 0) {
        if (err == NULL)
            abort(); /* a refusal says why */
        free(err);
    } else {
        if (n.nids > WEBHOOK_NOTICE_IDS)
            abort();
        for (size_t i = 0; i < n.nids; i++) {
            if (!util_id_valid(n.ids[i], strlen(n.ids[i])))
                abort();
        }
        webhook_notice_clear(&n);
    }
    return 0;
}
