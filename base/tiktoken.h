/*
 * tiktoken: the number of tokens a text is to an OpenAI model (or Llama 3), counted the way
 * OpenAI's tiktoken encodes: the text is cut into pieces by the model's pre-tokenizer
 * pattern, and each piece is a byte-pair encoding over the model's ranks.
 *
 * The ranks come from a file in tiktoken's format, one "<base64 of the token's bytes> <rank>"
 * a line: o200k_base.tiktoken (GPT-4o, GPT-4.1, GPT-5, the o-series), cl100k_base.tiktoken
 * (GPT-4, GPT-3.5) or Llama 3's tokenizer.model. The pattern is not in the file, so the caller
 * names it: o200k's, or cl100k's (Llama 3 uses cl100k's). The patterns are written out by
 * hand as the regular expressions match (leftmost alternative first, greedy, with their
 * backtracking); base/unicat gives the Unicode classes they name.
 *
 * What is not exact, on purpose, so a count stays cheap on a worker's loop:
 *  - a piece longer than TIKTOKEN_PIECE_MAX bytes (a run of letters with no space, a base64
 *    blob) is encoded in parts of at most that many bytes;
 *  - past the first TIKTOKEN_EXACT_MAX bytes of a text, tokens are estimated at the rate the
 *    exact part had.
 * Special tokens (<|endoftext|>) are ordinary text here, as in tiktoken's encode_ordinary.
 * A byte no rank holds counts as one token.
 *
 * Ownership: tiktoken_load/tiktoken_parse return a tokenizer the caller frees with
 * tiktoken_destroy. Counting only reads it, so one tokenizer serves every thread.
 */
#ifndef MEMPROXY_TIKTOKEN_H
#define MEMPROXY_TIKTOKEN_H

#include <stddef.h>

#define TIKTOKEN_MAX_FILE  (64u << 20) /* bytes of a ranks file */
#define TIKTOKEN_MAX_RANKS (1u << 21)  /* ranks in it (o200k has 199,998) */
#define TIKTOKEN_MAX_TOKEN 512         /* bytes of one token */
#define TIKTOKEN_PIECE_MAX 64
#define TIKTOKEN_EXACT_MAX (32u << 10)

enum tiktoken_pattern {
    TIKTOKEN_O200K,
    TIKTOKEN_CL100K,
};

struct tiktoken;

/* The pattern called name ("o200k" or "cl100k"): 0, or -1 for any other name. */
int tiktoken_pattern_named(const char *name, enum tiktoken_pattern *out);

/* Read the ranks file at path. NULL with *err set (caller frees; it names the file and the
 * line) when the file cannot be read, is not a regular file (a FIFO or a device is refused
 * unopened), is larger than the caps, or a line is not
 * "<base64> <rank>" with a rank below TIKTOKEN_MAX_RANKS and bytes not seen before. */
struct tiktoken *tiktoken_load(const char *path, enum tiktoken_pattern pattern, char **err);

/* The same from len bytes of text; name stands for the file in errors. */
struct tiktoken *tiktoken_parse(const char *text, size_t len, const char *name,
                                enum tiktoken_pattern pattern, char **err);

/* How many ranks the tokenizer holds. */
size_t tiktoken_size(const struct tiktoken *tk);

/* A number that tells the tokenizers a process loaded apart, from 1 to TIKTOKEN_IDS (0 for tk
 * NULL: no tokenizer), so that a count kept beside a text (tx.c's memo note) is used again
 * only by the tokenizer that made it: profiles may count with different ones. Numbers are
 * handed out in turn and come round again after TIKTOKEN_IDS loads. */
#define TIKTOKEN_IDS 65535u
unsigned tiktoken_id(const struct tiktoken *tk);

/* The tokens of len bytes of text (UTF-8; a byte that is not reads as a character of its
 * own). */
size_t tiktoken_count(const struct tiktoken *tk, const char *text, size_t len);

void tiktoken_destroy(struct tiktoken *tk);

#endif
