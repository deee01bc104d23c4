/*
 * jsize: about how much heap a jansson tree holds, for the budgets that are counted in bytes
 * (the working set's turns, the parse memo). Text length alone is no measure: "[]," is three
 * bytes of text and ~100 bytes of tree, so a 4 MiB body of empty arrays became ~400 MiB.
 *
 * The estimate follows jansson 2.x's layout on a 64-bit build with the allocator's header:
 * an object is its struct and hash table plus, per member, a hashtable pair with the key; an
 * array its struct and a slot per element; a string its struct and its bytes; a number its
 * struct; true, false and null are shared singletons and cost nothing. Shared subtrees are
 * counted each time they are met (a caller's budget errs on the safe side).
 */
#ifndef MEMPROXY_JSIZE_H
#define MEMPROXY_JSIZE_H

#include <jansson.h>
#include <stddef.h>

size_t jsize_tree(const json_t *j);

#endif
