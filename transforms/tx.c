#include "transforms/tx.h"

#include "base/jtext.h"
#include "base/msg.h"
#include "base/tiktoken.h"
#include "base/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Body fields that belong to a voice platform or route a request inside memproxy, never to
 * the upstream, sorted (strcmp): tx_platform_body_field() searches them once for each of a
 * request's fields. Everything else is the client's to send: OpenAI's fields as they grow
 * (prompt_cache_key, safety_identifier, verbosity, metadata, ...) and vendors' extras (vLLM's
 * top_k). profiles[].body_drop adds to the list, profiles[].body_keep takes from it. */
static const char *const tx_platform_body_fields[] = {
    "call",     /* Vapi */
    "customer", /* Vapi */
    "elevenlabs_extra_body",
    "interruptable", /* Agora */
    "phoneNumber",   /* Vapi */
    "profile",       /* memproxy's routing */
    "session_id",
    "timestamp", /* Agora */
    "turn_id",   /* Agora */
    "user_id",
    "user_uid", /* Agora */
};

static int tx_cmp_name(const void *key, const void *name)
{
    return strcmp(key, *(const char *const *)name);
}

static int tx_listed_in(const struct cfg_strlist *l, const char *s);

/* Does key go upstream? */
static int tx_body_field(const struct cfg_profile *p, const char *key)
{
    if (p != NULL && tx_listed_in(&p->body_keep, key))
        return 1;
    if (p != NULL && tx_listed_in(&p->body_drop, key))
        return 0;
    return bsearch(key, tx_platform_body_fields, UTIL_ARRAY_LEN(tx_platform_body_fields),
                   sizeof(tx_platform_body_fields[0]), tx_cmp_name) == NULL;
}

/* ---- reading messages in either shape ---- */

static const char *tx_str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static int tx_is(json_t *m, const char *role)
{
    return strcmp(msg_role(m), role) == 0;
}

static int tx_is_system(json_t *m)
{
    return msg_role_is_system(msg_role(m));
}

/* Is k a message field the upstream may get? Not a voice platform's (Agora's metadata,
 * turn_id, timestamp) nor one of memproxy's stored shape (seq, turn_idx, source, interrupted,
 * interrupt_timestamp, original, importance, model, usage, finish_reason, ttft_us,
 * latency_us: stored history is sent in that shape); every other field is OpenAI's to keep
 * (role, content, name, tool_calls, tool_call_id, audio, refusal, annotations, ...). Told
 * apart by the first byte, then compared once: this runs on every field of every message. */
static int tx_openai_field(const char *k)
{
    switch (k[0]) {
    case 'f':
        return strcmp(k, "finish_reason") != 0;
    case 'i':
        return strcmp(k, "importance") != 0 && strcmp(k, "interrupted") != 0 &&
               strcmp(k, "interrupt_timestamp") != 0;
    case 'l':
        return strcmp(k, "latency_us") != 0;
    case 'm':
        return strcmp(k, "metadata") != 0 && strcmp(k, "model") != 0;
    case 'o':
        return strcmp(k, "original") != 0;
    case 's':
        return strcmp(k, "source") != 0 && strcmp(k, "seq") != 0;
    case 't':
        return k[1] == 'o' || (strcmp(k, "turn_id") != 0 && strcmp(k, "timestamp") != 0 &&
                               strcmp(k, "turn_idx") != 0 && strcmp(k, "ttft_us") != 0);
    case 'u':
        return strcmp(k, "usage") != 0;
    default:
        return 1;
    }
}

static int tx_listed_in(const struct cfg_strlist *l, const char *s)
{
    for (size_t i = 0; s != NULL && i < l->n; i++) {
        if (strcmp(l->v[i], s) == 0)
            return 1;
    }
    return 0;
}

/* A copy of m with content replaced (m itself is shared and stays as it is). */
static json_t *tx_with_content(json_t *m, json_t *content)
{
    json_t *n = json_copy(m);
    json_object_set_new(n, "content", content);
    return n;
}

/* Replace the array's contents with keep (which it takes). */
static void tx_replace_all(json_t *messages, json_t *keep)
{
    json_array_clear(messages);
    json_array_extend(messages, keep);
    json_decref(keep);
}

/* ---- token estimate ---- */

/* A string's tokens by tk, or with no tokenizer its bytes (divided once, for the message). */
static size_t tx_text_tokens(const struct tiktoken *tk, json_t *s)
{
    return tk == NULL ? json_string_length(s)
                      : tiktoken_count(tk, json_string_value(s), json_string_length(s));
}

static size_t tx_content_tokens(const struct tiktoken *tk, json_t *content)
{
    size_t i, n = 0;
    json_t *part;
    if (json_is_string(content))
        return tx_text_tokens(tk, content);
    json_array_foreach(content, i, part)
        n += tx_text_tokens(tk, json_object_get(part, "text"));
    return n;
}

size_t tx_tokens(const struct tiktoken *tk, json_t *m)
{
    size_t n = tx_content_tokens(tk, json_object_get(m, "content")), i;
    json_t *call;
    json_t *fn = msg_voice(m, "function_call"); /* the older functions API's, either shape */
    if (json_is_object(fn))
        n += tx_text_tokens(tk, json_object_get(fn, "name")) +
             tx_text_tokens(tk, json_object_get(fn, "arguments"));
    json_array_foreach(json_object_get(m, "tool_calls"), i, call) {
        fn = json_object_get(call, "function");
        n += tx_text_tokens(tk, json_object_get(fn, "name")) +
             tx_text_tokens(tk, json_object_get(fn, "arguments"));
    }
    return TX_MESSAGE_TOKENS + (tk != NULL ? n : (n + TX_CHARS_PER_TOKEN - 1) / TX_CHARS_PER_TOKEN);
}

size_t tx_tokens_all(const struct tiktoken *tk, json_t *messages)
{
    size_t i, n = 0;
    json_t *m;
    json_array_foreach(messages, i, m)
        n += tx_tokens(tk, m);
    return n;
}

/* m's tokens by the profile's tokenizer while the request's TX_EXACT_BUDGET lasts; past it,
 * estimated (*exact 0: not to be remembered, a later request counts it). */
static size_t tx_ctx_tokens(struct tx_ctx *ctx, json_t *m, int *exact)
{
    const struct tiktoken *tk = ctx->prof->tokenizer;
    *exact = tk == NULL || ctx->exact_bytes < TX_EXACT_BUDGET;
    if (tk == NULL || !*exact)
        return tx_tokens(NULL, m);
    ctx->exact_bytes += tx_tokens(NULL, m) * TX_CHARS_PER_TOKEN;
    return tx_tokens(tk, m);
}

/* ---- what tx reads of a message, noted in the memo ---- */

/* What trim reads of a message: read once for each message the memo holds, and kept in its
 * note (jmemo.h), since trim and interruptions look at every message of a window on every
 * request. */
struct tx_facts {
    unsigned system : 1, tool : 1, user : 1;
    size_t tokens;
};

#define TX_NOTE(bit)            ((uint64_t)1 << (JMEMO_NOTE_TX_SHIFT + (bit)))
#define TX_NOTE_KNOWN           TX_NOTE(0) /* the facts below */
#define TX_NOTE_SYSTEM          TX_NOTE(1)
#define TX_NOTE_TOOL            TX_NOTE(2)
#define TX_NOTE_USER            TX_NOTE(3)
#define TX_NOTE_INTERRUPT_KNOWN TX_NOTE(4) /* apart: only interruptions asks */
#define TX_NOTE_INTERRUPTED     TX_NOTE(5)
#define TX_NOTE_COUNTER_SHIFT   (JMEMO_NOTE_TX_SHIFT + 7) /* 16 bits: what counted the tokens */
#define TX_NOTE_COUNTER_MASK    ((uint64_t)0xffff << TX_NOTE_COUNTER_SHIFT)
#define TX_NOTE_TOKENS          32 /* the tokens in the top 32 bits */
#define TX_NOTE_FACTS                                                                              \
    (TX_NOTE_KNOWN | TX_NOTE_SYSTEM | TX_NOTE_TOOL | TX_NOTE_USER | TX_NOTE_COUNTER_MASK |         \
     ((uint64_t)UINT32_MAX << TX_NOTE_TOKENS))

/* The facts are kept with the tokenizer that counted them (tiktoken_id, 0 for none): a
 * message the memo holds may come again under a profile that counts with another. The
 * profile's, as the note holds it: */
static uint64_t tx_counter(const struct tx_ctx *ctx)
{
    return (uint64_t)tiktoken_id(ctx->prof->tokenizer) << TX_NOTE_COUNTER_SHIFT;
}

/* m's facts, counted by the tokenizer that counter (tx_counter) stands for. */
static struct tx_facts tx_facts_of(struct tx_ctx *ctx, json_t *m, uint64_t counter)
{
    uint64_t *note = jmemo_note(jmemo_find(ctx->memo, m));
    if (note != NULL && (*note & TX_NOTE_KNOWN) && (*note & TX_NOTE_COUNTER_MASK) == counter)
        return (struct tx_facts){.system = (*note & TX_NOTE_SYSTEM) != 0,
                                 .tool = (*note & TX_NOTE_TOOL) != 0,
                                 .user = (*note & TX_NOTE_USER) != 0,
                                 .tokens = (size_t)(*note >> TX_NOTE_TOKENS)};
    const char *role = msg_role(m);
    int exact;
    struct tx_facts f = {.system = msg_role_is_system(role),
                         .tool = strcmp(role, "tool") == 0,
                         .user = strcmp(role, "user") == 0,
                         .tokens = tx_ctx_tokens(ctx, m, &exact)};
    if (note != NULL && exact && f.tokens <= UINT32_MAX)
        *note = (*note & ~TX_NOTE_FACTS) | TX_NOTE_KNOWN | (f.system ? TX_NOTE_SYSTEM : 0) |
                (f.tool ? TX_NOTE_TOOL : 0) | (f.user ? TX_NOTE_USER : 0) | counter |
                (uint64_t)f.tokens << TX_NOTE_TOKENS;
    return f;
}

/* Is m a reply the caller interrupted? */
static int tx_interrupted(const struct tx_ctx *ctx, json_t *m)
{
    uint64_t *note = jmemo_note(jmemo_find(ctx->memo, m));
    if (note != NULL && (*note & TX_NOTE_INTERRUPT_KNOWN))
        return (*note & TX_NOTE_INTERRUPTED) != 0;
    int yes = tx_is(m, "assistant") && json_is_true(msg_voice(m, "interrupted"));
    if (note != NULL)
        *note |= TX_NOTE_INTERRUPT_KNOWN | (yes ? TX_NOTE_INTERRUPTED : 0);
    return yes;
}

/* ---- standard ---- */

/* Has m only OpenAI's fields? Stops at the first that is not (a voice platform's message:
 * its third). */
static int tx_is_standard(json_t *m)
{
    for (void *it = json_object_iter(m); it != NULL; it = json_object_iter_next(m, it)) {
        if (!tx_openai_field(json_object_iter_key(it)))
            return 0;
    }
    return 1;
}

/* A stored turn (memproxy's shape, which has a seq) keeps OpenAI's older function_call in its
 * metadata, where no column holds it (reconcile_normalize, memory_reply): the model gets it
 * back where it sent it, or the function's result that follows answers no call. */
static void tx_stored_function_call(json_t *n, json_t *m)
{
    json_t *fc = json_object_get(json_object_get(m, "metadata"), "function_call");
    if (json_is_object(fc) && json_object_get(m, "seq") != NULL &&
        json_object_get(n, "function_call") == NULL)
        json_object_set_nocheck(n, "function_call", fc);
}

/* m's OpenAI fields, in m's order. */
static json_t *tx_standard_message(json_t *m)
{
    json_t *n = json_object();
    for (void *it = json_object_iter(m); it != NULL; it = json_object_iter_next(m, it)) {
        const char *k = json_object_iter_key(it);
        if (tx_openai_field(k))
            json_object_set_new_nocheck(n, k, json_incref(json_object_iter_value(it)));
    }
    tx_stored_function_call(n, m);
    return n;
}

static void tx_standard_body(const struct cfg_profile *p, json_t *body)
{
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(body, tmp, key, v) {
        if (!tx_body_field(p, key))
            json_object_del(body, key);
    }
}

/* m's OpenAI-only form, made once for a message the memo holds. */
static json_t *tx_standard_form(struct tx_ctx *ctx, json_t *m)
{
    struct jmemo_tree *t = jmemo_find(ctx->memo, m);
    json_t *n = jmemo_derived(t);
    if (n != NULL)
        return json_incref(n);
    if (tx_is_standard(m))
        return NULL;
    n = tx_standard_message(m);
    jmemo_set_derived(ctx->memo, t, n);
    return n;
}

void tx_standard(struct tx_ctx *ctx, json_t *messages)
{
    size_t i;
    json_t *m, *n;
    json_array_foreach(messages, i, m) {
        if ((n = tx_standard_form(ctx, m)) != NULL)
            json_array_set_new(messages, i, n);
    }
    if (ctx->body != NULL)
        tx_standard_body(ctx->prof, ctx->body);
}

/* ---- interruptions ---- */

static json_t *tx_interrupted_as(struct tx_ctx *ctx, json_t *m)
{
    const char *mode = ctx->prof->interruptions;
    json_t *content = json_object_get(m, "content");
    json_t *orig = msg_voice(m, "original");
    if (strcmp(mode, "original") == 0 && json_is_string(orig))
        return tx_with_content(m, json_copy(orig));
    if (strcmp(mode, "annotate") == 0 && json_is_string(content)) {
        const char *heard = json_string_value(content);
        char *text = xasprintf("%s%s%s", heard, *heard ? " " : "", ctx->prof->annotate_note);
        json_t *n = tx_with_content(m, json_string(text));
        free(text);
        return n;
    }
    return NULL; /* heard: the content is what was heard */
}

void tx_interruptions(struct tx_ctx *ctx, json_t *messages)
{
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        if (!tx_interrupted(ctx, m))
            continue;
        json_t *n = tx_interrupted_as(ctx, m);
        if (n != NULL)
            json_array_set_new(messages, i, n);
    }
}

/* ---- timestamps ---- */

void tx_timestamps(struct tx_ctx *ctx, json_t *messages)
{
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        int64_t ms = msg_timestamp_ms(json_object_get(m, "timestamp")); /* s or ms, as stored */
        json_t *content = json_object_get(m, "content");
        if (ms < 0 || !json_is_string(content) || tx_is_system(m))
            continue;
        char stamp[128];
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral" /* the format is the operator's */
        size_t n = strftime(stamp, sizeof(stamp), ctx->prof->timestamp_format, &tm);
#pragma GCC diagnostic pop
        stamp[n] = '\0';
        char *text = xasprintf("%s%s", stamp, json_string_value(content));
        json_array_set_new(messages, i, tx_with_content(m, json_string(text)));
        free(text);
    }
}

/* ---- user_context ---- */

/* Where memproxy's system messages go: after the leading run of the client's. */
static size_t tx_after_system(json_t *messages)
{
    size_t i = 0;
    while (i < json_array_size(messages) && tx_is_system(json_array_get(messages, i)))
        i++;
    return i;
}

/* "key: value" added to user_context's line when it fits whole ("; " before all but the first);
 * -1 when it does not. */
static int tx_line_add(char *line, size_t *len, const char *key, const char *val, size_t vlen)
{
    size_t klen = strlen(key), sep = *len > sizeof(TX_USER_CONTEXT_HEAD) - 1 ? 2 : 0;
    if (*len + sep + klen + 2 + vlen > TX_USER_CONTEXT_MAX)
        return -1;
    memcpy(line + *len, "; ", sep);
    memcpy(line + *len + sep, key, klen);
    memcpy(line + *len + sep + klen, ": ", 2);
    memcpy(line + *len + sep + klen + 2, val, vlen);
    *len += sep + klen + 2 + vlen;
    return 0;
}

/* One item of user_info (a string as is, anything else as JSON); -1 when it did not fit. */
static int tx_line_item(char *line, size_t *len, const char *key, json_t *v)
{
    if (json_is_string(v))
        return tx_line_add(line, len, key, json_string_value(v), json_string_length(v));
    size_t n = 0;
    char *dumped = jtext_dump(v, &n);
    int rc = tx_line_add(line, len, key, dumped ? dumped : "", dumped ? n : 0);
    free(dumped);
    return rc;
}

void tx_user_context(struct tx_ctx *ctx, json_t *messages)
{
    const char *key;
    json_t *v;
    if (ctx->user_id == NULL && json_object_size(ctx->user_info) == 0)
        return;
    char line[TX_USER_CONTEXT_MAX + sizeof(TX_USER_CONTEXT_MORE)];
    size_t len = sizeof(TX_USER_CONTEXT_HEAD) - 1;
    memcpy(line, TX_USER_CONTEXT_HEAD, len);
    int full = ctx->user_id != NULL &&
               tx_line_add(line, &len, "id", ctx->user_id, strlen(ctx->user_id)) != 0;
    json_object_foreach(ctx->user_info, key, v) {
        if (full || (full = tx_line_item(line, &len, key, v) != 0))
            break;
    }
    if (full) {
        memcpy(line + len, TX_USER_CONTEXT_MORE, sizeof(TX_USER_CONTEXT_MORE) - 1);
        len += sizeof(TX_USER_CONTEXT_MORE) - 1;
    }
    json_array_insert_new(messages, tx_after_system(messages),
                          json_pack("{s:s, s:s%}", "role", "system", "content", line, len));
}

/* ---- drop_sources, merge_consecutive ---- */

void tx_drop_sources(struct tx_ctx *ctx, json_t *messages)
{
    size_t i;
    json_t *m, *keep = json_array();
    json_array_foreach(messages, i, m) {
        if (tx_listed_in(&ctx->prof->drop_sources, json_string_value(msg_voice(m, "source"))))
            ctx->dropped++;
        else
            json_array_append(keep, m);
    }
    tx_replace_all(messages, keep);
}

static int tx_same_name(json_t *a, json_t *b)
{
    const char *x = tx_str(a, "name"), *y = tx_str(b, "name");
    return (x == NULL && y == NULL) || (x != NULL && y != NULL && strcmp(x, y) == 0);
}

static int tx_mergeable(json_t *a, json_t *b)
{
    return a != NULL && (tx_is(a, "user") || tx_is(a, "assistant")) &&
           strcmp(msg_role(a), msg_role(b)) == 0 && json_is_string(json_object_get(a, "content")) &&
           json_is_string(json_object_get(b, "content")) && !json_object_get(a, "tool_calls") &&
           !json_object_get(b, "tool_calls") && tx_same_name(a, b);
}

/* messages[from, to) as one: from's copy with their contents joined by "\n", in one pass.
 * (Merged into the one before, message by message, each join copied all the run before it:
 * 4,095 messages of 800 bytes held the worker 110 s.) */
static json_t *tx_merged(json_t *messages, size_t from, size_t to)
{
    size_t len = to - from - 1, at = 0;
    for (size_t k = from; k < to; k++)
        len += json_string_length(json_object_get(json_array_get(messages, k), "content"));
    char *text = xmalloc(len + 1);
    for (size_t k = from; k < to; k++) {
        json_t *c = json_object_get(json_array_get(messages, k), "content");
        if (k > from)
            text[at++] = '\n';
        memcpy(text + at, json_string_value(c), json_string_length(c));
        at += json_string_length(c);
    }
    /* each content was valid UTF-8, and so is their join */
    json_t *m = tx_with_content(json_array_get(messages, from), json_stringn_nocheck(text, at));
    free(text);
    return m;
}

/* A run's messages share the first's role and name, so each is mergeable with the first. */
void tx_merge_consecutive(struct tx_ctx *ctx, json_t *messages)
{
    size_t n = json_array_size(messages), j;
    json_t *keep = json_array();
    (void)ctx;
    for (size_t i = 0; i < n; i = j) {
        json_t *m = json_array_get(messages, i);
        for (j = i + 1; j < n && tx_mergeable(m, json_array_get(messages, j)); j++)
            ;
        if (j == i + 1)
            json_array_append(keep, m);
        else
            json_array_append_new(keep, tx_merged(messages, i, j));
    }
    tx_replace_all(messages, keep);
}

/* ---- trim ---- */

/* What trim needs of each message, read once (trim looks at a message up to four times).
 * Newest first: a request's exact count (TX_EXACT_BUDGET) goes to the turns trim keeps
 * first, and to where it cuts. */
static struct tx_facts *tx_trim_info(struct tx_ctx *ctx, json_t *messages, size_t n)
{
    struct tx_facts *info = xcalloc(n, sizeof(*info));
    uint64_t counter = tx_counter(ctx);
    for (size_t i = n; i-- > 0;)
        info[i] = tx_facts_of(ctx, json_array_get(messages, i), counter);
    return info;
}

/* Where the unit that ends at index end (inclusive) starts: tool results go with the
 * assistant message that called them. */
static size_t tx_unit_start(const struct tx_facts *info, size_t end)
{
    size_t s = end;
    while (s > 0 && info[s].tool)
        s--;
    return s;
}

/* The first message kept: the newest units that fit the budget (the newest always), the
 * system messages' tokens counted first. */
static size_t tx_trim_from(const struct tx_facts *info, size_t n, size_t budget)
{
    size_t used = 0, from = n;
    for (size_t i = 0; i < n; i++)
        used += info[i].system ? info[i].tokens : 0;
    for (size_t end = n; end-- > 0;) {
        if (info[end].system)
            continue;
        size_t start = tx_unit_start(info, end), cost = 0;
        for (size_t k = start; k <= end; k++)
            cost += info[k].system ? 0 : info[k].tokens;
        if (from != n && used + cost > budget)
            break; /* the newest unit always stays */
        used += cost;
        from = start;
        end = start; /* the loop's decrement moves past the unit */
    }
    /* a cut window starts on a user message, if it holds one */
    size_t first = 0, first_user = from;
    while (first < n && info[first].system)
        first++;
    while (from > first && first_user < n && !info[first_user].user)
        first_user++;
    return from > first && first_user < n ? first_user : from;
}

void tx_trim(struct tx_ctx *ctx, json_t *messages)
{
    size_t n = json_array_size(messages), budget = (size_t)ctx->prof->token_budget;
    if (budget == 0 || n == 0)
        return;
    struct tx_facts *info = tx_trim_info(ctx, messages, n);
    size_t from = tx_trim_from(info, n, budget), i, cut = 0;
    ctx->tokens = 0;
    for (i = 0; i < n; i++) {
        cut += i < from && !info[i].system;
        ctx->tokens += i >= from || info[i].system ? info[i].tokens : 0;
    }
    if (cut == 0) { /* everything fits (the system messages before from stay): as it is */
        free(info);
        return;
    }
    json_t *m, *keep = json_array();
    json_array_foreach(messages, i, m) {
        if (i < from && !info[i].system)
            ctx->trimmed++;
        else
            json_array_append(keep, m);
    }
    free(info);
    tx_replace_all(messages, keep);
}

/* ---- inject_memory ---- */

/* The operator's runtime system messages (an update over REST) replace the client's own, as
 * Agora's update replaces its agent's system_messages (profiles[].runtime_system: replace):
 * the client's system messages after the profile's are taken out when there are any. */
static size_t tx_runtime_replace(struct tx_ctx *ctx, json_t *messages, size_t at)
{
    json_t *m;
    size_t i, runtime = 0, keep = ctx->prof->system_messages.n;
    json_array_foreach(ctx->inject, i, m) {
        runtime += json_object_get(m, MSG_MEMORY_KEY) == NULL;
    }
    if (runtime == 0 || strcmp(ctx->prof->runtime_system, "replace") != 0)
        return at;
    while (at > keep) {
        at--;
        if (ctx->tokens != 0) { /* trim counted it, and it is not sent after all */
            size_t gone = tx_facts_of(ctx, json_array_get(messages, at), tx_counter(ctx)).tokens;
            ctx->tokens -= gone < ctx->tokens ? gone : ctx->tokens;
        }
        json_array_remove(messages, at);
    }
    return at;
}

void tx_inject_memory(struct tx_ctx *ctx, json_t *messages)
{
    size_t at = tx_runtime_replace(ctx, messages, tx_after_system(messages)), i, used = 0;
    size_t budget = (size_t)ctx->prof->memory_budget;
    uint64_t counter = tx_counter(ctx);
    json_t *m;
    json_array_foreach(ctx->inject, i, m) {
        size_t cost = tx_facts_of(ctx, m, counter).tokens;
        if (used + cost > budget)
            continue; /* a smaller one further on may still fit */
        used += cost;
        ctx->tokens += ctx->tokens != 0 ? cost : 0;
        if (json_object_get(m, MSG_MEMORY_KEY) != NULL) /* remembered: the profile's role */
            json_array_insert_new(messages, at++,
                                  json_pack("{s:s, s:O}", "role", ctx->prof->memory_role, "content",
                                            json_object_get(m, "content")));
        else
            json_array_insert(messages, at++, m);
        ctx->injected++;
    }
}

/* ---- the pipeline ---- */

static const struct {
    const char *name;
    tx_fn fn;
} tx_table[] = {
    {"standard", tx_standard},
    {"interruptions", tx_interruptions},
    {"timestamps", tx_timestamps},
    {"user_context", tx_user_context},
    {"drop_sources", tx_drop_sources},
    {"merge_consecutive", tx_merge_consecutive},
    {"trim", tx_trim},
    {"inject_memory", tx_inject_memory},
};

tx_fn tx_find(const char *name)
{
    for (size_t i = 0; i < UTIL_ARRAY_LEN(tx_table); i++) {
        if (strcmp(tx_table[i].name, name) == 0)
            return tx_table[i].fn;
    }
    return NULL;
}

int tx_check_profiles(const struct cfg *cfg, char **err)
{
    for (size_t p = 0; p < cfg->nprofiles; p++) {
        const struct cfg_strlist *l = &cfg->profiles[p].transforms;
        for (size_t i = 0; i < l->n; i++) {
            if (tx_find(l->v[i]) == NULL) {
                *err = xasprintf("%s: profiles[%s].transforms: unknown transform '%s' (known: "
                                 "standard, interruptions, timestamps, user_context, "
                                 "drop_sources, merge_consecutive, trim, inject_memory)",
                                 cfg->source, cfg->profiles[p].name, l->v[i]);
                return -1;
            }
        }
    }
    return 0;
}

void tx_run(struct tx_ctx *ctx, json_t *messages)
{
    const struct cfg_strlist *l = &ctx->prof->transforms;
    for (size_t i = 0; i < l->n; i++)
        tx_find(l->v[i])(ctx, messages);
}
