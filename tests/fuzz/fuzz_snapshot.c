/*
 * Fuzz the checks of what POST /v1/sessions/import and PUT /v1/users/{id}/memory send
 * (memory/snapshot.c). A snapshot that passes must be one the store can take: a session id
 * that is an id, turns with strictly increasing seq; user memory that passes has at most
 * SNAPSHOT_MAX_FACTS facts with confidence in [0, 1].
 */
#include "fuzz.h"
#include "memory/snapshot.h"

#include <stdlib.h>
#include <string.h>

static void fuzz_check_snapshot(json_t *s)
{
    json_t *turns = json_object_get(s, "turns"), *t;
    const char *id = json_string_value(json_object_get(json_object_get(s, "session"), "id"));
    json_int_t last = 0;
    size_t i;
    if (id == NULL || *id == '\0' || strlen(id) > 256)
        abort();
    json_array_foreach(turns, i, t) {
        json_int_t seq = json_integer_value(json_object_get(t, "seq"));
        if (seq <= last)
            abort();
        last = seq;
    }
}

static void fuzz_check_memory(json_t *m)
{
    json_t *facts = json_object_get(m, "facts"), *f;
    size_t i;
    if (!json_is_array(facts) || json_array_size(facts) > SNAPSHOT_MAX_FACTS)
        abort();
    json_array_foreach(facts, i, f) {
        double c = json_number_value(json_object_get(f, "confidence"));
        if (c < 0 || c > 1 || !json_is_string(json_object_get(f, "value")))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *err = NULL;
    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    if (j == NULL)
        return 0;
    if (snapshot_check(j, &err) == 0)
        fuzz_check_snapshot(j);
    else if (err == NULL)
        abort(); /* a refusal says why */
    free(err);
    err = NULL;
    json_t *m = snapshot_user_memory(j, &err);
    if ((m == NULL) != (err != NULL))
        abort();
    free(err);
    if (m != NULL)
        fuzz_check_memory(m);
    json_decref(m);
    json_decref(j);
    return 0;
}
