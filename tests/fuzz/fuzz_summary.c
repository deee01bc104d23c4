/*
 * Fuzz the reading of the summarizer model's answer (proxy/jobs/summary.c): model output is
 * outside input. What passes must be storable: a non-empty summary text and checked facts.
 */
#include "fuzz.h"
#include "proxy/jobs/summary.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *err = NULL;
    json_t *m = summary_parse((const char *)data, size, &err);
    if ((m == NULL) != (err != NULL))
        abort(); /* a refusal says why, an answer has no error */
    free(err);
    if (m == NULL)
        return 0;
    const char *text = json_string_value(json_object_get(json_object_get(m, "summary"), "text"));
    if (text == NULL || *text == '\0' || !json_is_array(json_object_get(m, "facts")))
        abort();
    json_decref(m);
    return 0;
}
