/*
 * jtext: JSON text to jansson trees and back, on the request path.
 *
 * Why not json_loadb() and json_dumps(): jansson's reader takes every byte through a
 * callback, a one-character stream buffer and a saved-text buffer, then copies each string
 * again; its writer checks every container for cycles by formatting its address into a hash
 * table. On a voice platform's 32-message window (7 KB) that is ~85 µs to read and ~35 µs to
 * write on the bench machine, more than the rest of the request's own work. jtext reads and
 * writes the same trees in a single pass over the bytes: ~4x faster on that window.
 *
 * The rules are jansson's, so a caller may use either (tests/fuzz/fuzz_jtext.c holds jtext to
 * json_loadb() and json_dumps() byte for byte):
 *
 *  - jtext_load() accepts exactly what json_loadb(buf, len, flags) accepts for flags
 *    JSON_REJECT_DUPLICATES and JSON_DECODE_ANY (any other flag is a caller's bug: abort):
 *    RFC 8259 with valid UTF-8, no "\u0000" anywhere, integers within long long, reals that
 *    do not overflow, at most JTEXT_MAX_DEPTH nested values, nothing but whitespace after the
 *    value. On failure it returns NULL and, when err is given, sets err->line, ->column
 *    (characters, 1-based), ->position (bytes) and ->text (what is wrong).
 *  - jtext_dump() writes what json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) writes: keys in
 *    insertion order, UTF-8 as is, control characters escaped, reals as "%.17g" with a ".0"
 *    when they would read back as integers. It returns NULL for a string that is not valid
 *    UTF-8 (jansson's json_stringn_nocheck() can make one) or a tree deeper than
 *    JTEXT_MAX_DEPTH, and never checks for cycles: memproxy's trees have none.
 *
 * Ownership: jtext_load() returns a new reference; jtext_dump() a malloc'd, NUL-terminated
 * string (its length in *len when len is not NULL) that the caller frees.
 */
#ifndef MEMPROXY_JTEXT_H
#define MEMPROXY_JTEXT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct jmemo;

#define JTEXT_MAX_DEPTH 2048 /* jansson's JSON_PARSER_MAX_DEPTH */

json_t *jtext_load(const char *buf, size_t len, size_t flags, json_error_t *err);
/*
 * The most values (objects, arrays, strings, numbers, literals) one read may hold; past it
 * the read fails with json_error_code(err) == json_error_out_of_memory ("too many values").
 * A tree costs ~100 bytes a value whatever its text: a 4 MiB body of empty arrays was
 * ~400 MiB of tree. Process-wide (server.max_json_nodes), set before any thread reads;
 * 0 = no cap (the default, as jansson). A memo hit counts as one value.
 */
void jtext_set_max_values(size_t n);
/* jtext_load(), and objects and arrays nested at most max_nest deep ("[[]]" is 2): deeper
 * fails as a value past JTEXT_MAX_DEPTH does, with json_error_code(err) ==
 * json_error_stack_overflow (with json_error_out_of_memory for too many values, the only codes
 * jtext sets; any other failure reads as
 * json_error_unknown). For a caller's own cap on what it reads, checked while reading rather
 * than by a scan of the text first. */
json_t *jtext_load_nested(const char *buf, size_t len, size_t flags, size_t max_nest,
                          json_error_t *err);
/* The memo's depth: objects inside a container inside the root, as a chat request's messages
 * and tool definitions are. */
#define JTEXT_MEMO_DEPTH 3
/* jtext_load_nested(), and every object at JTEXT_MEMO_DEPTH whose bytes memo (when not NULL)
 * holds for seed and flags is that tree, not read again; every other one read there is kept
 * in memo (see jmemo.h). The result is the same tree as without the memo, except that those
 * objects are shared with the memo and other requests: the caller must not change them. */
json_t *jtext_load_memo(const char *buf, size_t len, size_t flags, size_t max_nest,
                        struct jmemo *memo, uint64_t seed, json_error_t *err);
char *jtext_dump(const json_t *j, size_t *len);
/* jtext_dump(), with the texts memo knows (when not NULL) of objects at JTEXT_MEMO_DEPTH
 * (a request's messages and tools) copied instead of written again, and the ones it holds
 * but has no text for yet kept there. The same text as jtext_dump(). */
char *jtext_dump_memo(const json_t *j, struct jmemo *memo, size_t *len);

/* Is buf nested deeper than max_nest (objects and arrays)? Only brackets and strings are
 * looked at: for bodies forwarded without being read; jtext_load_nested() gives the same
 * answer for every text it reads. */
int jtext_too_deep(const char *buf, size_t len, size_t max_nest);

/* The first byte in [p, end) a JSON string cannot hold as it is (below 0x20, the quote, the
 * backslash, or past ASCII), or end: the plain run of a string's text, eight bytes a step. */
const char *jtext_plain_span(const char *p, const char *end);

/* The JSON string whose opening quote is at *p (before end), read by jtext_load()'s rules:
 * its text in *s, *n — the input's own bytes when it holds no escape, else *scratch's
 * (grown as needed; the caller frees it; good until the next call with it) — and *p moved
 * past its closing quote. 0, or -1 when it is not a valid JSON string (*p unchanged). */
int jtext_read_string(const char **p, const char *end, char **scratch, size_t *scap, const char **s,
                      size_t *n);

#endif
