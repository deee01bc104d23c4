#include "proxy/chat/chunkscan.h"

#include "base/jtext.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

struct chunkscan_in {
    const char *p, *end;
    struct chunkscan_buf *buf;
    size_t kept; /* bytes of buf->keep in use */
    int body;    /* chunkscan_message: "message" instead of "delta", usage an object */
};

static void cs_ws(struct chunkscan_in *in)
{
    while (in->p < in->end && (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r'))
        in->p++;
}

/* The next non-space byte is c: consume it. */
static int cs_take(struct chunkscan_in *in, char c)
{
    cs_ws(in);
    if (in->p >= in->end || *in->p != c)
        return 0;
    in->p++;
    return 1;
}

/* A string, by jtext's rules. Its text is the input's own bytes, or, when it held escapes,
 * decoded in buf->tmp, which the next string overwrites: a string to keep (keep) is copied
 * to buf->keep, sized by chunkscan_delta() for the whole chunk. */
static int cs_string(struct chunkscan_in *in, struct chunkscan_span *out, int keep)
{
    const char *s, *q;
    size_t n;
    cs_ws(in);
    if (in->p >= in->end || *in->p != '"')
        return 0;
    /* plain ASCII, the usual key and token, is taken here; the rest by jtext */
    q = jtext_plain_span(in->p + 1, in->end);
    if (q < in->end && *q == '"') {
        s = in->p + 1;
        n = (size_t)(q - s);
        in->p = q + 1;
    } else if (jtext_read_string(&in->p, in->end, &in->buf->tmp, &in->buf->tmp_cap, &s, &n) != 0) {
        return 0;
    }
    if (keep && s == in->buf->tmp) {
        memcpy(in->buf->keep + in->kept, s, n);
        s = in->buf->keep + in->kept;
        in->kept += n;
    }
    out->s = s;
    out->len = n;
    return 1;
}

static int cs_word(struct chunkscan_in *in, const char *w)
{
    size_t n = strlen(w);
    cs_ws(in);
    if ((size_t)(in->end - in->p) < n || memcmp(in->p, w, n) != 0)
        return 0;
    in->p += n;
    return 1;
}

/* -?(0|[1-9][0-9]{0,17}): always within long long. */
static int cs_integer(struct chunkscan_in *in)
{
    cs_ws(in);
    if (in->p < in->end && *in->p == '-')
        in->p++;
    const char *d = in->p;
    while (in->p < in->end && *in->p >= '0' && *in->p <= '9')
        in->p++;
    size_t n = (size_t)(in->p - d);
    if (n == 0 || n > 18 || (n > 1 && *d == '0'))
        return 0;
    /* a fraction or an exponent would make it a real: declined */
    return in->p >= in->end || (*in->p != '.' && *in->p != 'e' && *in->p != 'E');
}

/* A string, an integer, true, false or null; a string's span goes to *out when given. */
static int cs_scalar(struct chunkscan_in *in, struct chunkscan_span *out)
{
    struct chunkscan_span ignored;
    cs_ws(in);
    if (in->p >= in->end)
        return 0;
    switch (*in->p) {
    case '"':
        return cs_string(in, out ? out : &ignored, out != NULL);
    case 't':
        return cs_word(in, "true");
    case 'f':
        return cs_word(in, "false");
    case 'n':
        return cs_word(in, "null");
    default:
        return cs_integer(in);
    }
}

/* A string (into *out, kept when keep) or null (*out left NULL). */
static int cs_string_or_null(struct chunkscan_in *in, struct chunkscan_span *out, int keep)
{
    cs_ws(in);
    if (in->p < in->end && *in->p == 'n')
        return cs_word(in, "null");
    return cs_string(in, out, keep);
}

static int cs_key_is(const struct chunkscan_span *k, const char *name)
{
    return k->len == strlen(name) && memcmp(k->s, name, k->len) == 0;
}

/* Members of an object whose '{' is read: each key to member(), until '}'. */
static int cs_members(struct chunkscan_in *in, struct chunkscan *out, unsigned *seen,
                      int (*member)(struct chunkscan_in *, const struct chunkscan_span *,
                                    struct chunkscan *, unsigned *))
{
    if (cs_take(in, '}'))
        return 1;
    do {
        struct chunkscan_span key;
        if (!cs_string(in, &key, 0) || !cs_take(in, ':') || !member(in, &key, out, seen))
            return 0;
    } while (cs_take(in, ','));
    return cs_take(in, '}');
}

enum { CS_MODEL = 1, CS_CHOICES = 2, CS_DELTA = 4, CS_CONTENT = 8, CS_FINISH = 16, CS_USAGE = 32 };

/* Once: a second one would replace the first in the general parse. */
static int cs_once(unsigned *seen, unsigned bit)
{
    if (*seen & bit)
        return 0;
    *seen |= bit;
    return 1;
}

static int cs_delta_member(struct chunkscan_in *in, const struct chunkscan_span *k,
                           struct chunkscan *out, unsigned *seen)
{
    if (cs_key_is(k, "content"))
        return cs_once(seen, CS_CONTENT) && cs_string_or_null(in, &out->content, 1);
    if (cs_key_is(k, "role")) {
        struct chunkscan_span ignored;
        return cs_string_or_null(in, &ignored, 0);
    }
    /* null or "" passes (DeepSeek sends a null reasoning_content beside each token); a refusal's
     * or a reasoning's text is the tree's */
    if (cs_key_is(k, "refusal") || cs_key_is(k, "reasoning_content") || cs_key_is(k, "reasoning")) {
        struct chunkscan_span said = {NULL, 0};
        return cs_string_or_null(in, &said, 0) && said.len == 0;
    }
    if (in->body && cs_key_is(k, "annotations"))
        return cs_take(in, '[') && cs_take(in, ']');
    return 0; /* tool_calls, function_call, audio…: the general parse */
}

/* A member of usage's token details: an integer or null. */
static int cs_usage_detail(struct chunkscan_in *in, const struct chunkscan_span *k,
                           struct chunkscan *out, unsigned *seen)
{
    (void)k;
    (void)out;
    (void)seen;
    cs_ws(in);
    return in->p < in->end && *in->p == 'n' ? cs_word(in, "null") : cs_integer(in);
}

/* A member of usage: as a detail, or an object of details (prompt_tokens_details…). */
static int cs_usage_member(struct chunkscan_in *in, const struct chunkscan_span *k,
                           struct chunkscan *out, unsigned *seen)
{
    if (cs_take(in, '{'))
        return cs_members(in, out, seen, cs_usage_detail);
    return cs_usage_detail(in, k, out, seen);
}

/* The usage object, whose text goes to out->usage. */
static int cs_usage(struct chunkscan_in *in, struct chunkscan *out)
{
    unsigned seen = 0;
    if (!cs_take(in, '{'))
        return 0;
    const char *start = in->p - 1;
    if (!cs_members(in, out, &seen, cs_usage_member))
        return 0;
    out->usage.s = start;
    out->usage.len = (size_t)(in->p - start);
    return 1;
}

static int cs_choice_member(struct chunkscan_in *in, const struct chunkscan_span *k,
                            struct chunkscan *out, unsigned *seen)
{
    if (cs_key_is(k, in->body ? "message" : "delta"))
        return cs_once(seen, CS_DELTA) && cs_take(in, '{') &&
               cs_members(in, out, seen, cs_delta_member);
    if (cs_key_is(k, "finish_reason"))
        return cs_once(seen, CS_FINISH) && cs_string_or_null(in, &out->finish_reason, 1);
    if (cs_key_is(k, "logprobs"))
        return cs_word(in, "null");
    if (cs_key_is(k, "index")) { /* 0: another choice (n > 1) goes the general way */
        cs_ws(in);
        const char *d = in->p;
        return cs_integer(in) && in->p == d + 1 && *d == '0';
    }
    if (cs_key_is(k, in->body ? "delta" : "message"))
        return 0; /* the other kind */
    return cs_scalar(in, NULL);
}

static int cs_top_member(struct chunkscan_in *in, const struct chunkscan_span *k,
                         struct chunkscan *out, unsigned *seen)
{
    if (cs_key_is(k, "model"))
        return cs_once(seen, CS_MODEL) && cs_scalar(in, &out->model);
    if (cs_key_is(k, "choices"))
        return cs_once(seen, CS_CHOICES) && cs_take(in, '[') && cs_take(in, '{') &&
               cs_members(in, out, seen, cs_choice_member) && cs_take(in, ']');
    if (cs_key_is(k, "usage")) {
        if (!in->body)
            return cs_word(in, "null");
        cs_ws(in); /* once: a later null would undo an object in the general parse */
        if (!cs_once(seen, CS_USAGE))
            return 0;
        return in->p < in->end && *in->p == 'n' ? cs_word(in, "null") : cs_usage(in, out);
    }
    if (cs_key_is(k, "error"))
        return 0;
    return cs_scalar(in, NULL);
}

void chunkscan_buf_free(struct chunkscan_buf *buf)
{
    free(buf->tmp);
    free(buf->keep);
    buf->tmp = buf->keep = NULL;
    buf->tmp_cap = buf->keep_cap = 0;
}

static int chunkscan_read(const char *data, size_t len, struct chunkscan_buf *buf,
                          struct chunkscan *out, int body)
{
    struct chunkscan_in in = {data, data + len, buf, 0, body};
    if (buf->keep_cap < len + 1) { /* decoded text is never longer than its escaped form */
        buf->keep_cap = len + 1;
        buf->keep = xrealloc(buf->keep, buf->keep_cap);
    }
    unsigned seen = 0;
    memset(out, 0, sizeof(*out));
    if (!cs_take(&in, '{') || !cs_members(&in, out, &seen, cs_top_member))
        return 0;
    cs_ws(&in);
    return in.p == in.end;
}

int chunkscan_delta(const char *data, size_t len, struct chunkscan_buf *buf, struct chunkscan *out)
{
    return chunkscan_read(data, len, buf, out, 0);
}

int chunkscan_message(const char *data, size_t len, struct chunkscan_buf *buf,
                      struct chunkscan *out)
{
    return chunkscan_read(data, len, buf, out, 1);
}
