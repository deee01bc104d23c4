/*
 * Fuzz the transform pipeline with client message arrays: every transform runs (trim and
 * inject_memory with small budgets). The input array must come out unchanged (transforms
 * replace messages, never edit them), and after standard no message holds a voice platform's
 * or the stored shape's field. Through a memo (jmemo.h) that holds the input's messages, twice
 * (learning, then using what was learned), the output is the same; the memo lives across inputs and
 * is small, so that it evicts. One input in two counts tokens with a tokenizer (base/tiktoken:
 * the 256 bytes and a few merges) instead of the characters / 4 estimate.
 */
#include "base/jmemo.h"
#include "base/tiktoken.h"
#include "fuzz.h"
#include "tests/bytes_tokenizer.h"
#include "transforms/tx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *fuzz_names[] = {"drop_sources",      "interruptions", "timestamps",    "user_context",
                             "merge_consecutive", "trim",          "inject_memory", "standard"};
static char *fuzz_sources[] = {"silence"};
/* What standard takes out of every message: a voice platform's fields and memproxy's stored
 * shape's (docs/design.md §7). Any other field is OpenAI's, or the client's to answer for. */
static const char *const fuzz_denied[] = {
    "metadata", "turn_id",     "timestamp",           "seq",      "turn_idx",
    "source",   "interrupted", "interrupt_timestamp", "original", "importance",
    "model",    "usage",       "finish_reason",       "ttft_us",  "latency_us"};

/* The 256 bytes, then "e " ("ZSA=") and "th" ("dGg="), made once. */
static const struct tiktoken *fuzz_tokenizer(void)
{
    static struct tiktoken *tk;
    if (tk == NULL)
        tk = bytes_tokenizer(TIKTOKEN_O200K, "ZSA= 256\ndGg= 257\n");
    return tk;
}

/* The pipeline over input with the memo: the same as without (want), twice. */
static void fuzz_tx_memo(struct tx_ctx base, json_t *input, json_t *want)
{
    static struct jmemo *memo;
    if (memo == NULL)
        memo = jmemo_create(16 * 1024);
    size_t i;
    json_t *m;
    json_array_foreach(input, i, m)
        jmemo_hold(memo, m, 64);
    for (int round = 0; round < 2; round++) {
        json_t *messages = json_copy(input);
        json_t *body = json_pack("{s:s, s:i}", "model", "m", "turn_id", 3);
        struct tx_ctx ctx = base;
        ctx.body = body;
        ctx.memo = memo;
        tx_run(&ctx, messages);
        if (!json_equal(messages, want))
            abort();
        json_decref(messages);
        json_decref(body);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *input = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_array(input))
        goto out;
    struct cfg_profile prof = {.name = "fuzz",
                               .transforms = {.v = fuzz_names, .n = 8},
                               .interruptions = size % 3 == 0   ? "heard"
                                                : size % 3 == 1 ? "original"
                                                                : "annotate",
                               .annotate_note = "[cut]",
                               .timestamp_format = "[%H:%M] ",
                               .drop_sources = {.v = fuzz_sources, .n = 1},
                               .token_budget = 64,
                               .memory_budget = 16,
                               .memory_role = "user",
                               .runtime_system = size % 2 ? "replace" : "append",
                               .tokenizer = size / 2 % 2 ? fuzz_tokenizer() : NULL};
    json_t *before = json_deep_copy(input), *messages = json_copy(input);
    json_t *inject = json_pack("[{s:s, s:s}]", "role", "system", "content", "remembered");
    json_t *body = json_pack("{s:s, s:i}", "model", "m", "turn_id", 3);
    struct tx_ctx ctx = {.prof = &prof, .body = body, .inject = inject, .user_id = "u"};
    tx_run(&ctx, messages);
    if (!json_equal(input, before) || json_object_get(body, "turn_id") != NULL)
        abort();
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        for (size_t k = 0; k < sizeof(fuzz_denied) / sizeof(*fuzz_denied); k++)
            if (json_object_get(m, fuzz_denied[k]) != NULL)
                abort();
    }
    ctx.body = NULL;
    ctx.trimmed = ctx.injected = ctx.dropped = ctx.tokens = ctx.exact_bytes = 0;
    fuzz_tx_memo(ctx, input, messages);
    json_decref(before);
    json_decref(messages);
    json_decref(inject);
    json_decref(body);
out:
    json_decref(input);
    return 0;
}
