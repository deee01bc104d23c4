/*
 * unicat: the Unicode class of a code point, as the pre-tokenizers of OpenAI's tokenizers
 * read text (base/tiktoken.h). Their patterns name \p{L} (letters, split for o200k into
 * upper, lower and the rest), \p{M} (marks), \p{N} (numbers) and \s (White_Space); every
 * other code point is "other".
 *
 * The table in unicat.c is made by scripts/gen-unicat from Node's regular expressions, so it
 * follows the Unicode version named at its top; a code point assigned after it reads as
 * "other". Pure; a binary search over ~2,400 ranges above ASCII, a switch below.
 */
#ifndef MEMPROXY_UNICAT_H
#define MEMPROXY_UNICAT_H

enum unicat {
    UNICAT_OTHER,
    UNICAT_UPPER,  /* Lu, Lt */
    UNICAT_LOWER,  /* Ll */
    UNICAT_LETTER, /* Lm, Lo: both upper and lower to o200k's pattern */
    UNICAT_MARK,   /* Mn, Mc, Me */
    UNICAT_NUMBER, /* Nd, Nl, No */
    UNICAT_SPACE,  /* White_Space, \r and \n included */
};

/* The class of code point cp (any value; past U+10FFFF reads as other). */
enum unicat unicat_of(unsigned cp);

#endif
