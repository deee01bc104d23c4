/*
 * Test helper: a tokenizer whose ranks are the 256 bytes alone ("AA== 0" ... "/w== 255"),
 * then the lines of extra (tiktoken's format, ranks from 256 on), or none. With the bytes
 * alone a text is as many tokens as bytes, which is what the unit and fuzz tests that count
 * with a tokenizer check against. Aborts when the ranks do not parse.
 */
#ifndef MEMPROXY_TESTS_BYTES_TOKENIZER_H
#define MEMPROXY_TESTS_BYTES_TOKENIZER_H

#include "base/tiktoken.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline struct tiktoken *bytes_tokenizer(enum tiktoken_pattern pattern, const char *extra)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char text[256 * 12 + 256], *err = NULL;
    size_t len = 0;
    for (int b = 0; b < 256; b++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%c%c== %d\n", a[b >> 2],
                                a[(b & 3) << 4], b);
    if (extra != NULL && strlen(extra) < sizeof(text) - len)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s", extra);
    struct tiktoken *tk = tiktoken_parse(text, len, "bytes", pattern, &err);
    if (tk == NULL)
        abort();
    return tk;
}

#endif
