/*
 * Fuzz the JSON text reader and writer (config/jtext.c) against jansson's own: for every
 * input and each flag set, jtext_load() must accept exactly what json_loadb() accepts and
 * build an equal tree, and jtext_dump() must write json_dumps(JSON_COMPACT)'s bytes.
 *
 * One known difference: jansson loses a NUL byte that directly follows a number or a word
 * (its lexer reads one byte ahead and its unget cannot put a NUL back), so it reads "[1\0]"
 * as [1]. jtext refuses every NUL byte outside strings and within them, as RFC 8259 says.
 *
 * The memo (jtext_load_memo) must change nothing but speed: with a memo that lives across
 * inputs (small, so that it evicts) every input reads, twice, to the tree and the verdict of
 * jtext_load_nested() under the same caps, flags and depth code; and jtext_dump_memo(), which
 * copies the texts the memo learned of the objects it holds, writes jtext_dump()'s bytes
 * (twice: once learning them, once copying them).
 */
#include "base/jmemo.h"
#include "base/jtext.h"
#include "fuzz.h"

#include <stdlib.h>
#include <string.h>

static void fuzz_jtext_dump(const json_t *j)
{
    size_t len = 0;
    char *ours = jtext_dump(j, &len);
    char *theirs = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (ours == NULL || theirs == NULL || strlen(theirs) != len || memcmp(ours, theirs, len) != 0)
        abort();
    json_t *back = jtext_load(ours, len, JSON_DECODE_ANY, NULL);
    if (!json_equal(back, j)) /* what is written reads back as the same tree */
        abort();
    json_decref(back);
    free(ours);
    free(theirs);
}

static void fuzz_jtext_memo(const char *data, size_t size, size_t flags, size_t nest)
{
    static struct jmemo *memo;
    if (memo == NULL)
        memo = jmemo_create(64 * 1024);
    json_error_t e1, e2;
    json_t *plain = jtext_load_nested(data, size, flags, nest, &e1);
    for (int round = 0; round < 2; round++) {
        json_t *m = jtext_load_memo(data, size, flags, nest, memo, nest % 2, &e2);
        if ((m == NULL) != (plain == NULL) || (m != NULL && !json_equal(m, plain)))
            abort();
        if (m == NULL && json_error_code(&e1) != json_error_code(&e2))
            abort();
        if (m != NULL) {
            size_t l1 = 0, l2 = 0;
            char *a = jtext_dump(m, &l1), *b = jtext_dump_memo(m, memo, &l2);
            if ((a == NULL) != (b == NULL) || l1 != l2 || (a != NULL && memcmp(a, b, l1) != 0))
                abort();
            free(a);
            free(b);
        }
        json_decref(m);
    }
    json_decref(plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t caps[] = {2, 3, 4, 64};
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        fuzz_jtext_memo((const char *)data, size, JSON_REJECT_DUPLICATES, caps[i]);
        fuzz_jtext_memo((const char *)data, size, 0, caps[i]);
    }
    static const size_t flag_sets[] = {0, JSON_REJECT_DUPLICATES, JSON_DECODE_ANY};
    for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
        json_error_t err;
        json_t *ours = jtext_load((const char *)data, size, flag_sets[i], &err);
        json_t *theirs = json_loadb((const char *)data, size, flag_sets[i], NULL);
        if (memchr(data, '\0', size) != NULL) { /* the difference above: refused */
            json_decref(theirs);
            theirs = NULL;
        }
        if ((ours == NULL) != (theirs == NULL) || (ours != NULL && !json_equal(ours, theirs)))
            abort();
        if (ours == NULL && (err.text[0] == '\0' || err.line < 1 || err.column < 1))
            abort(); /* a refusal always says what and where */
        if (ours != NULL)
            fuzz_jtext_dump(ours);
        json_decref(ours);
        json_decref(theirs);
    }
    return 0;
}
