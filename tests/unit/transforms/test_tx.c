/*
 * Unit tests: the transforms (transforms/tx.c) against golden files. Each file in the
 * directory given as argument holds a profile's options, the input messages (and body, user,
 * injected messages) and the expected output and counts. The input must come out unchanged:
 * transforms replace messages, never edit them.
 *
 * Each file is also run through a memo (jmemo.h) holding its input messages, twice, as a
 * resent window is: the same output both times, the second made from what the first noted.
 *
 * MEMPROXY_UPDATE_GOLDEN=1 rewrites the expected parts from what the code does (review the
 * diff before committing it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/jmemo.h"
#include "base/jtext.h"
#include "base/tiktoken.h"
#include "base/util.h"
#include "config/cfgcheck.h"
#include "tests/bytes_tokenizer.h"
#include "transforms/tx.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *golden_dir;

/* A config whose only profile has the golden file's options (JSON is YAML flow syntax). */
static struct cfg *golden_cfg(json_t *profile)
{
    json_t *p = json_deep_copy(profile);
    json_object_set_new(p, "name", json_string("t"));
    json_object_set_new(p, "upstream", json_string("u"));
    char *flow = json_dumps(p, JSON_COMPACT);
    char *yaml = xasprintf("upstreams: [{name: u, url: 'http://127.0.0.1:9/v1'}]\n"
                           "profiles: [%s]\n",
                           flow);
    char *err = NULL;
    struct cfg *cfg = cfg_load_text(yaml, strlen(yaml), "golden", &err);
    if (cfg == NULL || cfgcheck_validate(cfg, &err) != 0)
        fail_msg("profile options: %s", err);
    free(flow);
    free(yaml);
    json_decref(p);
    return cfg;
}

static void expect_equal(const char *file, const char *what, json_t *got, json_t *want)
{
    if (json_equal(got, want))
        return;
    char *g = json_dumps(got, JSON_INDENT(1)), *w = json_dumps(want, JSON_INDENT(1));
    fail_msg("%s: %s differs\n got: %s\nwant: %s", file, what, g, w);
}

/* The memo's answers change nothing: the golden output, with every input message held, on a
 * first request and on a second that finds what the first learned; and the same text when
 * the upstream body is written with the memo's texts. */
static void golden_memo(const char *file, struct cfg *cfg, json_t *g)
{
    struct jmemo *memo = jmemo_create(1024 * 1024);
    json_t *input = json_object_get(g, "input"), *m, *first = NULL;
    size_t i;
    json_array_foreach(input, i, m)
        jmemo_hold(memo, m, 64);
    for (int round = 0; round < 2; round++) {
        json_t *messages = json_copy(input);
        json_t *body = json_deep_copy(json_object_get(g, "body"));
        struct tx_ctx ctx = {.prof = &cfg->profiles[0],
                             .body = body,
                             .inject = json_object_get(g, "inject"),
                             .user_id = json_string_value(json_object_get(g, "user_id")),
                             .user_info = json_object_get(g, "user_info"),
                             .memo = memo};
        tx_run(&ctx, messages);
        expect_equal(file, "output through the memo", messages, json_object_get(g, "output"));
        json_t *up = json_pack("{s:O}", "messages", messages);
        char *plain = jtext_dump(up, NULL), *memoed = jtext_dump_memo(up, memo, NULL);
        assert_string_equal(memoed, plain);
        free(plain);
        free(memoed);
        json_decref(up);
        json_decref(body);
        if (round == 0)
            first = messages;
        else
            json_decref(messages);
    }
    json_decref(first);
    jmemo_destroy(memo);
}

static void golden_one(const char *file)
{
    json_error_t jerr;
    json_t *g = json_load_file(file, 0, &jerr);
    if (g == NULL)
        fail_msg("%s:%d: %s", file, jerr.line, jerr.text);
    struct cfg *cfg = golden_cfg(json_object_get(g, "profile"));
    json_t *input = json_object_get(g, "input"), *before = json_deep_copy(input);
    json_t *messages = json_copy(input); /* shares the messages, as the chat path does */
    json_t *body = json_deep_copy(json_object_get(g, "body"));
    struct tx_ctx ctx = {.prof = &cfg->profiles[0],
                         .body = body,
                         .inject = json_object_get(g, "inject"),
                         .user_id = json_string_value(json_object_get(g, "user_id")),
                         .user_info = json_object_get(g, "user_info")};
    tx_run(&ctx, messages);
    json_t *counts = json_pack("{s:i, s:i, s:i}", "trimmed", (int)ctx.trimmed, "injected",
                               (int)ctx.injected, "dropped", (int)ctx.dropped);
    if (getenv("MEMPROXY_UPDATE_GOLDEN") != NULL) {
        json_object_set(g, "output", messages);
        json_object_set(g, "counts", counts);
        if (body != NULL)
            json_object_set(g, "body_output", body);
        json_dump_file(g, file, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    } else {
        expect_equal(file, "output", messages, json_object_get(g, "output"));
        expect_equal(file, "counts", counts, json_object_get(g, "counts"));
        if (body != NULL)
            expect_equal(file, "body_output", body, json_object_get(g, "body_output"));
        golden_memo(file, cfg, g);
    }
    expect_equal(file, "the input (changed in place)", input, before);
    json_decref(counts);
    json_decref(body);
    json_decref(messages);
    json_decref(before);
    json_decref(g);
    cfg_destroy(cfg);
}

static void test_golden(void **state)
{
    DIR *d = opendir(golden_dir);
    struct dirent *de;
    int n = 0;
    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        char *path = xasprintf("%s/%s", golden_dir, de->d_name);
        golden_one(path);
        free(path);
        n++;
    }
    closedir(d);
    assert_true(n >= 10);
}

static void test_unknown_transform_is_a_config_error(void **state)
{
    const char *yaml = "upstreams: [{name: u, url: 'http://127.0.0.1:9/v1'}]\n"
                       "profiles: [{name: p, upstream: u, transforms: [trim, summarize]}]\n";
    char *err = NULL;
    struct cfg *cfg = cfg_load_text(yaml, strlen(yaml), "m.yaml", &err);
    assert_non_null(cfg);
    assert_int_equal(cfgcheck_validate(cfg, &err), 0);
    assert_int_equal(tx_check_profiles(cfg, &err), -1);
    assert_non_null(strstr(err, "profiles[p].transforms: unknown transform 'summarize'"));
    free(err);
    cfg_destroy(cfg);
}

/* A 2,000-turn conversation fits the budget, keeps its newest turn and its system message. */
static void test_trim_long_session(void **state)
{
    json_t *opts = json_pack("{s:i, s:[s]}", "token_budget", 2000, "transforms", "trim");
    struct cfg *cfg = golden_cfg(opts);
    json_decref(opts);
    json_t *m = json_array();
    json_array_append_new(m, json_pack("{s:s, s:s}", "role", "system", "content", "Be brief."));
    for (int i = 0; i < 2000; i++) {
        char text[64];
        snprintf(text, sizeof(text), "message number %d of a long call", i);
        json_array_append_new(
            m, json_pack("{s:s, s:s}", "role", i % 2 ? "assistant" : "user", "content", text));
    }
    struct tx_ctx ctx = {.prof = &cfg->profiles[0]};
    tx_run(&ctx, m);
    assert_true(tx_tokens_all(NULL, m) <= 2000);
    assert_true(json_array_size(m) > 100);
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "role")), "system");
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 1), "role")), "user");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(m, json_array_size(m) - 1), "content")),
        "message number 1999 of a long call");
    assert_int_equal(ctx.trimmed + json_array_size(m), 2001);
    json_decref(m);
    cfg_destroy(cfg);
}

/* With a tokenizer, a request counts TX_EXACT_BUDGET bytes of text at most, newest first; the
 * messages past it are estimated, and not remembered, so the next request that sends them
 * counts them. Six user messages of a quarter of the budget's bytes, each byte a token: the
 * newest four are counted, the oldest two estimated (a quarter of that), and the token budget
 * holds the four and one estimate. The next request counts all six, and it holds four. */
static void test_tokenizer_budget_per_request(void **state)
{
    size_t each = TX_EXACT_BUDGET / 4, n = 6;
    size_t exact = TX_MESSAGE_TOKENS + each, estimated = TX_MESSAGE_TOKENS + each / 4;
    json_t *opts = json_pack("{s:I, s:[s]}", "token_budget", (json_int_t)(4 * exact + estimated),
                             "transforms", "trim");
    struct cfg *cfg = golden_cfg(opts);
    json_decref(opts);
    struct tiktoken *tk = bytes_tokenizer(TIKTOKEN_CL100K, NULL); /* a byte a token */
    cfg->profiles[0].tokenizer = tk;
    struct jmemo *memo = jmemo_create(64 << 20);
    char *text = xmalloc(each + 1);
    memset(text, 'y', each);
    text[each] = '\0';
    json_t *window = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_pack("{s:s, s:s}", "role", "user", "content", text);
        jmemo_hold(memo, m, each + 32);
        json_array_append_new(window, m);
    }
    size_t want_tokens[] = {4 * exact + estimated, 4 * exact}, want_trimmed[] = {1, 2};
    for (int round = 0; round < 2; round++) {
        json_t *messages = json_copy(window);
        struct tx_ctx ctx = {.prof = &cfg->profiles[0], .memo = memo};
        tx_run(&ctx, messages);
        assert_int_equal(ctx.tokens, want_tokens[round]);
        assert_int_equal(ctx.trimmed, want_trimmed[round]);
        json_decref(messages);
    }
    free(text);
    json_decref(window);
    jmemo_destroy(memo);
    tiktoken_destroy(tk);
    cfg_destroy(cfg);
}

/* Profiles that count with different tokenizers share the worker's memo: a message one
 * counted and noted is counted again by the other, never given the first one's count. Here
 * "ab" is one token with the first tokenizer, two with the second (the bytes alone), and
 * 4 + 1 with none (characters / 4, a message 4 more each time). */
static void test_counts_noted_per_tokenizer(void **state)
{
    json_t *opts =
        json_pack("{s:I, s:[s]}", "token_budget", (json_int_t)1000, "transforms", "trim");
    struct cfg *cfg = golden_cfg(opts);
    json_decref(opts);
    struct tiktoken *ab = bytes_tokenizer(TIKTOKEN_CL100K, "YWI= 256\n"); /* "ab" */
    struct tiktoken *bytes = bytes_tokenizer(TIKTOKEN_CL100K, NULL);
    struct jmemo *memo = jmemo_create(1 << 20);
    json_t *window = json_pack("[{s:s, s:s}]", "role", "user", "content", "abababab");
    jmemo_hold(memo, json_array_get(window, 0), 64);
    const struct tiktoken *by[] = {ab, bytes, NULL, ab, NULL, bytes};
    size_t want[] = {4 + 4, 4 + 8, 4 + 2, 4 + 4, 4 + 2, 4 + 8};
    for (size_t round = 0; round < UTIL_ARRAY_LEN(by); round++) {
        json_t *messages = json_copy(window);
        cfg->profiles[0].tokenizer = by[round];
        struct tx_ctx ctx = {.prof = &cfg->profiles[0], .memo = memo};
        tx_run(&ctx, messages);
        assert_int_equal(ctx.tokens, want[round]);
        json_decref(messages);
    }
    json_decref(window);
    jmemo_destroy(memo);
    tiktoken_destroy(ab);
    tiktoken_destroy(bytes);
    cfg_destroy(cfg);
}

/* A voice platform's window resent: `standard` makes each message's OpenAI form once, and the
 * memo writes its text once; the interrupted reply (changed by interruptions first) is made
 * again each time. */
static void test_memo_keeps_standard_forms(void **state)
{
    json_t *opts = json_pack("{s:s, s:[s, s]}", "interruptions", "annotate", "transforms",
                             "interruptions", "standard");
    struct cfg *cfg = golden_cfg(opts);
    json_decref(opts);
    struct jmemo *memo = jmemo_create(1024 * 1024);
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"turn_id\":1},"
                       "{\"role\":\"assistant\",\"content\":\"Hello, how\",\"turn_id\":1,"
                       "\"metadata\":{\"interrupted\":true}},"
                       "{\"role\":\"user\",\"content\":\"a table\",\"turn_id\":2}]}";
    json_t *out[2];
    for (int round = 0; round < 2; round++) {
        json_t *req = jtext_load_memo(body, strlen(body), 0, 64, memo, 0, NULL);
        json_t *messages = json_copy(json_object_get(req, "messages"));
        struct tx_ctx ctx = {.prof = &cfg->profiles[0], .memo = memo};
        tx_run(&ctx, messages);
        out[round] = messages;
        json_decref(req);
    }
    assert_true(json_equal(out[0], out[1]));
    assert_ptr_equal(json_array_get(out[0], 0), json_array_get(out[1], 0));
    assert_ptr_equal(json_array_get(out[0], 2), json_array_get(out[1], 2));
    assert_ptr_not_equal(json_array_get(out[0], 1), json_array_get(out[1], 1));
    assert_null(json_object_get(json_array_get(out[1], 0), "turn_id"));
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(out[1], 1), "content")),
        "Hello, how [interrupted: the caller cut in here and did not hear the rest]");
    struct jmemo_stats before, after;
    jmemo_stats(memo, &before);
    json_t *up = json_pack("{s:O}", "messages", out[1]);
    char *a = jtext_dump_memo(up, memo, NULL);
    jmemo_stats(memo, &after);
    assert_true(after.bytes > before.bytes); /* the forms' texts, kept */
    char *b = jtext_dump_memo(up, memo, NULL);
    assert_string_equal(a, b);
    jmemo_stats(memo, &before);
    assert_int_equal(before.bytes, after.bytes); /* copied, not kept again */
    free(a);
    free(b);
    json_decref(up);
    json_decref(out[0]);
    json_decref(out[1]);
    jmemo_destroy(memo);
    cfg_destroy(cfg);
}

int main(int argc, char **argv)
{
    golden_dir = argc > 1 ? argv[1] : "tests/unit/golden/tx";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_unknown_transform_is_a_config_error),
        cmocka_unit_test(test_tokenizer_budget_per_request),
        cmocka_unit_test(test_counts_noted_per_tokenizer),
        cmocka_unit_test(test_trim_long_session),
        cmocka_unit_test(test_memo_keeps_standard_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
