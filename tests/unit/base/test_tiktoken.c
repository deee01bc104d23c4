/* Unit tests: OpenAI's pre-tokenizers and byte-pair encoding (base/tiktoken.c), and the
 * ranks file. tests/clients/tokenizer.test.js checks the counts against OpenAI's own
 * tiktoken, with its real ranks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/tiktoken.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void b64(const char *s, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    out[o] = '\0';
}

static int seen(const char *const *tokens, size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (strcmp(tokens[k], tokens[i]) == 0)
            return 1;
    return strlen(tokens[i]) == 1; /* a byte: among the 256 */
}

/* A ranks file of the 256 bytes, then the tokens given, in that order (each once). */
static struct tiktoken *vocab(enum tiktoken_pattern pattern, const char *const *tokens, size_t n)
{
    size_t cap = 64 * 1024, len = 0, rank = 0;
    char *text = xmalloc(cap), enc[1024], *err = NULL;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        b64(&c, 1, enc);
        len += (size_t)snprintf(text + len, cap - len, "%s %zu\n", enc, rank++);
    }
    for (size_t i = 0; i < n; i++) {
        if (seen(tokens, i))
            continue;
        b64(tokens[i], strlen(tokens[i]), enc);
        len += (size_t)snprintf(text + len, cap - len, "%s %zu\n", enc, rank++);
    }
    struct tiktoken *tk = tiktoken_parse(text, len, "test", pattern, &err);
    if (tk == NULL)
        fail_msg("%s", err);
    free(text);
    return tk;
}

/* text splits into exactly these pieces: with each piece a token of its own, the text is as
 * many tokens as pieces, and no other split would be (the pieces are longer than a byte). */
static void assert_pieces(enum tiktoken_pattern pattern, const char *text,
                          const char *const *pieces, size_t n)
{
    struct tiktoken *tk = vocab(pattern, pieces, n);
    size_t joined = 0;
    for (size_t i = 0; i < n; i++)
        joined += strlen(pieces[i]);
    assert_int_equal(joined, strlen(text));
    size_t got = tiktoken_count(tk, text, strlen(text));
    if (got != n)
        fail_msg("'%s' (%s): %zu tokens, want %zu", text,
                 pattern == TIKTOKEN_O200K ? "o200k" : "cl100k", got, n);
    tiktoken_destroy(tk);
}

#define PIECES(pattern, text, ...)                                                                 \
    do {                                                                                           \
        const char *const p_[] = {__VA_ARGS__};                                                    \
        assert_pieces(pattern, text, p_, sizeof(p_) / sizeof(p_[0]));                              \
    } while (0)
#define O200K(text, ...)  PIECES(TIKTOKEN_O200K, text, __VA_ARGS__)
#define CL100K(text, ...) PIECES(TIKTOKEN_CL100K, text, __VA_ARGS__)

/* The pieces below are what the patterns give as regular expressions (JavaScript's, with
 * Unicode properties, wrote them down). */
static void test_contractions_and_case(void **state)
{
    (void)state;
    O200K("I'M HERE, don't you?", "I'M", " HERE", ",", " don't", " you", "?");
    CL100K("I'M HERE, don't you?", "I", "'M", " HERE", ",", " don", "'t", " you", "?");
    O200K("HELLOworld helloWORLD", "HELLOworld", " hello", "WORLD");
    CL100K("HELLOworld helloWORLD", "HELLOworld", " helloWORLD");
    /* Unicode folds s and the long s together */
    O200K("\xc5\xbf's '\xc5\xbf", "\xc5\xbf's", " '", "\xc5\xbf");
    CL100K("\xc5\xbf's '\xc5\xbf", "\xc5\xbf", "'s", " '", "\xc5\xbf");
    O200K("\xc3\x9cn\xc3\xaf"
          "c\xc3\xb6"
          "d\xc3\xa9's",
          "\xc3\x9cn\xc3\xaf"
          "c\xc3\xb6"
          "d\xc3\xa9's");
    CL100K("\xc3\x9cn\xc3\xaf"
           "c\xc3\xb6"
           "d\xc3\xa9's",
           "\xc3\x9cn\xc3\xaf"
           "c\xc3\xb6"
           "d\xc3\xa9",
           "'s");
}

static void test_spaces_and_lines(void **state)
{
    (void)state;
    O200K("a  b\n\n  c   ", "a", " ", " b", "\n\n", " ", " c", "   ");
    CL100K("a  b\n\n  c   ", "a", " ", " b", "\n\n", " ", " c", "   ");
    O200K("x\r\n\r\ny", "x", "\r\n\r\n", "y");
    O200K(" !!!\n\n", " !!!\n\n");
    /* a no-break space is the prefix of the word after it */
    O200K("\xc2\xa0word", "\xc2\xa0word");
}

static void test_numbers_and_punctuation(void **state)
{
    (void)state;
    O200K("1234567 \xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4", "123", "456", "7", " ",
          "\xd9\xa1\xd9\xa2\xd9\xa3", "\xd9\xa4");
    CL100K("$x = 5;", "$x", " =", " ", "5", ";");
    /* o200k's punctuation takes the slashes after it; cl100k's only line ends */
    O200K("path/to//x\n/", "path", "/to", "//", "x", "\n", "/");
    O200K("a.//\nb", "a", ".//\n", "b");
    O200K("a.\n/b", "a", ".\n/", "b");
    CL100K("a.\n/b", "a", ".\n", "/b");
    O200K("x;\r\n//y", "x", ";\r\n//", "y");
    CL100K("x;\r\n//y", "x", ";\r\n", "//", "y");
    CL100K("a.//\nb", "a", ".//\n", "b");
}

static void test_other_scripts_and_marks(void **state)
{
    (void)state;
    O200K("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae",
          "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae");
    O200K("caf\xc3\xa9 nai\xcc\x88ve", "caf\xc3\xa9", " nai\xcc\x88ve");
    /* a combining mark: a letter to o200k, punctuation to cl100k */
    O200K("a\xcc\x81\xcc\x81 b", "a\xcc\x81\xcc\x81", " b");
    CL100K("a\xcc\x81\xcc\x81 b", "a", "\xcc\x81\xcc\x81", " b");
    /* titlecase (Lt) is upper to o200k */
    O200K("\xc7\x85ungla", "\xc7\x85ungla");
}

/* The pair with the lowest rank merges first, not the leftmost. */
static void test_merge_order(void **state)
{
    (void)state;
    const char *const lowest_first[] = {"bc", "ab", "cd"};
    struct tiktoken *tk = vocab(TIKTOKEN_O200K, lowest_first, 3);
    assert_int_equal(tiktoken_count(tk, "abcd", 4), 3); /* a bc d; leftmost-first: ab cd */
    tiktoken_destroy(tk);
    const char *const then_more[] = {"ab", "cd", "abcd"};
    tk = vocab(TIKTOKEN_O200K, then_more, 3);
    assert_int_equal(tiktoken_count(tk, "abcd", 4), 1);
    assert_int_equal(tiktoken_count(tk, "abcdab", 6), 2);
    assert_int_equal(tiktoken_count(tk, "", 0), 0);
    tiktoken_destroy(tk);
}

/* Past the caps: long pieces in parts, long texts at the rate of their start; bytes that
 * are not UTF-8 are characters of their own. Nothing is read out of bounds (ASan). */
static void test_caps_and_bad_bytes(void **state)
{
    (void)state;
    const char *const none[] = {"zz"};
    struct tiktoken *tk = vocab(TIKTOKEN_O200K, none, 1);
    size_t n = TIKTOKEN_EXACT_MAX * 4;
    char *text = xmalloc(n);
    memset(text, 'z', n);
    assert_int_equal(tiktoken_count(tk, text, n), n / 2);
    memset(text, 'y', n);
    assert_int_equal(tiktoken_count(tk, text, n), n);
    assert_int_equal(tiktoken_count(tk, "\xff\xfe\xc3", 3), 3);
    assert_int_equal(tiktoken_count(tk, "a\xe6\x97", 3), 3);
    free(text);
    tiktoken_destroy(tk);
}

static void assert_refused(const char *text, const char *why)
{
    char *err = NULL;
    struct tiktoken *tk = tiktoken_parse(text, strlen(text), "r.tiktoken", TIKTOKEN_O200K, &err);
    assert_null(tk);
    if (strstr(err, why) == NULL)
        fail_msg("'%s': %s", text, err);
    free(err);
}

static void test_ranks_file(void **state)
{
    (void)state;
    char *err = NULL;
    const char ok[] = "QQ== 0\r\nQg== 1\n\nQUI= 2"; /* CRLF, an empty line, no last newline */
    struct tiktoken *tk = tiktoken_parse(ok, strlen(ok), "r", TIKTOKEN_CL100K, &err);
    assert_non_null(tk);
    assert_int_equal(tiktoken_size(tk), 3);
    assert_int_equal(tiktoken_count(tk, "AB", 2), 1);
    tiktoken_destroy(tk);
    assert_refused("QQ== 0\nQQ== 1\n", "r.tiktoken:2: these bytes have a rank already");
    assert_refused("QQ== 0\nQ@== 1\n", "r.tiktoken:2: the token is not base64");
    assert_refused("QQ==\n", "r.tiktoken:1: a line is '<base64");
    assert_refused("QQ== \n", "r.tiktoken:1: the rank is not a whole number");
    assert_refused("QQ== x\n", "r.tiktoken:1: the rank");
    assert_refused("QQ== 99999999999999999999\n", "r.tiktoken:1: the rank");
    assert_refused("QQ 0\n", "not base64");
    assert_refused("=QQ= 0\n", "not base64");
    assert_refused("", "no ranks");
    assert_null(tiktoken_load("/nonexistent/ranks", TIKTOKEN_O200K, &err));
    assert_non_null(strstr(err, "/nonexistent/ranks: No such file"));
    free(err);
    assert_null(tiktoken_load("/dev/zero", TIKTOKEN_O200K, &err)); /* not read forever */
    assert_string_equal(err, "/dev/zero: not a regular file");
    free(err);
    assert_null(tiktoken_load("/", TIKTOKEN_O200K, &err));
    free(err);
}

static void test_pattern_names(void **state)
{
    (void)state;
    enum tiktoken_pattern p;
    assert_int_equal(tiktoken_pattern_named("o200k", &p), 0);
    assert_int_equal(p, TIKTOKEN_O200K);
    assert_int_equal(tiktoken_pattern_named("cl100k", &p), 0);
    assert_int_equal(p, TIKTOKEN_CL100K);
    assert_int_equal(tiktoken_pattern_named("gpt2", &p), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contractions_and_case),
        cmocka_unit_test(test_spaces_and_lines),
        cmocka_unit_test(test_numbers_and_punctuation),
        cmocka_unit_test(test_other_scripts_and_marks),
        cmocka_unit_test(test_merge_order),
        cmocka_unit_test(test_caps_and_bad_bytes),
        cmocka_unit_test(test_ranks_file),
        cmocka_unit_test(test_pattern_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
