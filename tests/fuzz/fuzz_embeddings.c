/*
 * Fuzz the reading of an upstream's /v1/embeddings answer (memory/recall.c): the upstream is
 * outside input. The first byte says how many vectors the answer must hold (1 to 4); what
 * passes must be usable as retrieval's question: finite, one dimension, within the cap.
 */
#include "fuzz.h"
#include "memory/recall.h"

#include <math.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *err = NULL;
    float *v = NULL;
    size_t dim = 0;
    if (size < 1)
        return 0;
    size_t n = (size_t)(data[0] % 4) + 1;
    if (recall_parse_embeddings((const char *)data + 1, size - 1, n, &v, &dim, &err) != 0) {
        if (err == NULL)
            abort(); /* a refusal says why */
        free(err);
        return 0;
    }
    if (dim == 0 || dim > RECALL_MAX_DIM)
        abort();
    for (size_t i = 0; i < n * dim; i++) {
        if (!isfinite(v[i]))
            abort();
    }
    /* the question against candidates made of the answer's own vectors */
    struct recall_opts o = {
        .recent = 1, .importance = 0.85, .similarity = 0.5, .relevant = 2, .budget_tokens = 100};
    struct recall_pick *p = recall_pick_new(&o, v, dim, NULL);
    for (size_t i = 0; i < n; i++)
        recall_pick_offer(p, 1, (int64_t)i, "user", "text", 0, 0.5, v + i * dim,
                          dim * sizeof(float));
    json_t *m = recall_pick_message(p, NULL);
    if (m == NULL)
        abort(); /* the recency leg always has the newest */
    json_decref(m);
    recall_pick_free(p);
    free(v);
    return 0;
}
