#include "base/jsize.h"

#include <string.h>

enum {
    JSIZE_OBJECT = 112, /* json_object_t, its first bucket array */
    JSIZE_MEMBER = 64,  /* a hashtable pair and list links, besides the key's bytes */
    JSIZE_ARRAY = 64,   /* json_array_t and its first slots */
    JSIZE_SLOT = 8,
    JSIZE_STRING = 48, /* json_string_t and the copy's header */
    JSIZE_NUMBER = 32,
};

size_t jsize_tree(const json_t *j)
{
    const char *key;
    json_t *v;
    size_t i, n = 0;
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        json_object_foreach((json_t *)j, key, v) {
            n += JSIZE_MEMBER + strlen(key) + jsize_tree(v);
        }
        return JSIZE_OBJECT + n;
    case JSON_ARRAY:
        json_array_foreach(j, i, v) {
            n += JSIZE_SLOT + jsize_tree(v);
        }
        return JSIZE_ARRAY + n;
    case JSON_STRING:
        return JSIZE_STRING + json_string_length(j) + 1;
    case JSON_INTEGER:
    case JSON_REAL:
        return JSIZE_NUMBER;
    default:
        return 0;
    }
}
