/*
 * Fuzz the tokenizer (base/tiktoken.c): a ranks file, the operator's input (tokenizer.file),
 * and any text a client sends, through both pre-tokenizers.
 *
 * Input: a first byte (its low bit picks o200k or cl100k), then a ranks file and a text
 * separated by the first NUL (no NUL: all text). What must hold:
 *  - with only the 256 bytes as ranks, a text of at most TIKTOKEN_EXACT_MAX bytes is as many
 *    tokens as bytes: the pieces cover the text, once each, whatever its bytes;
 *  - with any ranks, a text is at most as many tokens as bytes and at least one when not
 *    empty (a token is at least one byte, and a byte no rank holds is one token);
 *  - a ranks file that parses counts the text too; one that does not says why.
 */
#include "base/tiktoken.h"
#include "base/util.h"
#include "fuzz.h"
#include "tests/bytes_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct tiktoken *fuzz_bytes[2];

static void fuzz_check(const struct tiktoken *tk, const char *text, size_t len)
{
    size_t n = tiktoken_count(tk, text, len);
    if (n > len || (len > 0 && n == 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    enum tiktoken_pattern pattern = data[0] & 1 ? TIKTOKEN_CL100K : TIKTOKEN_O200K;
    const char *in = (const char *)data + 1, *text = in, *nul = memchr(in, '\0', size - 1);
    size_t len = size - 1;
    if (fuzz_bytes[pattern] == NULL)
        fuzz_bytes[pattern] = bytes_tokenizer(pattern, NULL);
    if (nul != NULL) {
        char *err = NULL;
        struct tiktoken *tk = tiktoken_parse(in, (size_t)(nul - in), "f", pattern, &err);
        text = nul + 1;
        len = size - 1 - (size_t)(nul - in) - 1;
        if (tk != NULL)
            fuzz_check(tk, text, len);
        else if (err == NULL || strncmp(err, "f:", 2) != 0)
            abort();
        free(err);
        tiktoken_destroy(tk);
    }
    if (len <= TIKTOKEN_EXACT_MAX && tiktoken_count(fuzz_bytes[pattern], text, len) != len)
        abort();
    fuzz_check(fuzz_bytes[pattern], text, len);
    return 0;
}
