/*
 * Fuzz what the background jobs make of the rows they read back (proxy/jobs/webhook.c
 * webhook_body for the outbox, proxy/jobs/summary.c summary_request for a session's turns and
 * its user's memory). A row is stored data, but it may be older than today's checks or
 * damaged: a field missing, of another type, or text that reads back as null must never crash
 * a job. The input is JSON: {"outbox": row, "turns": [...], "previous": s, "facts": [...]}.
 */
#include "base/jtext.h"
#include "base/util.h"
#include "fuzz.h"
#include "proxy/jobs/summary.h"
#include "proxy/jobs/webhook.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static void fuzz_outbox(json_t *row)
{
    char *body =
        webhook_body(str(row, "notice_id"), (long)json_integer_value(json_object_get(row, "event")),
                     1, str(row, "session_id"), str(row, "tenant"), str(row, "payload"));
    if (body != NULL) { /* what is sent must be JSON with the row's notice id */
        json_t *j = json_loads(body, 0, NULL);
        if (j == NULL || strcmp(str(j, "noticeId"), str(row, "notice_id")) != 0)
            abort();
        json_decref(j);
    }
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, 0, NULL);
    if (in == NULL)
        return 0;
    fuzz_outbox(json_object_get(in, "outbox"));
    json_t *req = summary_request("model", SUMMARY_DEFAULT_PROMPT, json_object_get(in, "turns"),
                                  str(in, "previous"), json_object_get(in, "facts"), NULL);
    char *text = req ? jtext_dump(req, NULL) : NULL;
    if (text == NULL)
        abort(); /* the request is always made and always JSON */
    free(text);
    json_decref(req);
    json_decref(in);
    return 0;
}
