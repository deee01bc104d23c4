/* Unit tests: retrieval's pure parts (memory/recall.c) — the embeddings on the wire, cosine,
 * the question, and which earlier turns the three legs choose within the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/tiktoken.h"
#include "memory/recall.h"
#include "tests/bytes_tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *body, size_t n, float **v, size_t *dim)
{
    char *err = NULL;
    int rc = recall_parse_embeddings(body, strlen(body), n, v, dim, &err);
    assert_true(rc == 0 ? err == NULL : err != NULL); /* a refusal says why */
    free(err);
    return rc;
}

static void test_request_cuts_long_texts_at_a_character(void **state)
{
    char *long_text = malloc(RECALL_MAX_TEXT + 2);
    memset(long_text, 'a', RECALL_MAX_TEXT - 1);
    strcpy(long_text + RECALL_MAX_TEXT - 1, "\xc3\xa9"); /* é straddles the cut */
    const char *texts[] = {"hello", long_text};
    json_t *r = recall_embed_request("emb", texts, 2);
    assert_string_equal(json_string_value(json_object_get(r, "model")), "emb");
    assert_string_equal(json_string_value(json_object_get(r, "encoding_format")), "float");
    json_t *in = json_object_get(r, "input");
    assert_int_equal(json_array_size(in), 2);
    assert_string_equal(json_string_value(json_array_get(in, 0)), "hello");
    assert_int_equal(json_string_length(json_array_get(in, 1)), RECALL_MAX_TEXT - 1);
    json_decref(r);
    free(long_text);
}

static void test_parse_floats_in_index_order(void **state)
{
    float *v = NULL;
    size_t dim = 0;
    assert_int_equal(parse("{\"data\":[{\"index\":1,\"embedding\":[3,4]},"
                           "{\"index\":0,\"embedding\":[1,2.5]}]}",
                           2, &v, &dim),
                     0);
    assert_int_equal(dim, 2);
    assert_true(v[0] == 1.0f && v[1] == 2.5f && v[2] == 3.0f && v[3] == 4.0f);
    free(v);
}

static void test_parse_base64(void **state)
{
    float in[3] = {0.5f, -1.0f, 2.0f}, *v = NULL;
    unsigned char b64[32];
    char body[128];
    size_t dim = 0;
    EVP_EncodeBlock(b64, (const unsigned char *)in, sizeof(in));
    snprintf(body, sizeof(body), "{\"data\":[{\"embedding\":\"%s\"}]}", b64);
    assert_int_equal(parse(body, 1, &v, &dim), 0);
    assert_int_equal(dim, 3);
    assert_memory_equal(v, in, sizeof(in));
    free(v);
}

static void test_parse_rejects_what_is_not_the_answer_asked_for(void **state)
{
    static const char *const bad[] = {
        "not json",
        "{}",
        "{\"data\":[]}",
        "{\"data\":[{\"embedding\":[1,2]}]}",                           /* 1 of 2 */
        "{\"data\":[{\"embedding\":[1,2]},{\"embedding\":[1]}]}",       /* sizes differ */
        "{\"data\":[{\"embedding\":[1,2]},{\"embedding\":[1,\"x\"]}]}", /* not numbers */
        "{\"data\":[{\"index\":0,\"embedding\":[1]},{\"index\":0,\"embedding\":[2]}]}",
        "{\"data\":[{\"index\":2,\"embedding\":[1]},{\"index\":0,\"embedding\":[2]}]}",
        "{\"data\":[{\"index\":0.5,\"embedding\":[1]},{\"index\":1,\"embedding\":[2]}]}",
        "{\"data\":[{\"embedding\":[]},{\"embedding\":[]}]}",
        "{\"data\":[{\"embedding\":[1e39]},{\"embedding\":[1]}]}", /* not a float */
        "{\"data\":[{\"embedding\":\"AAA\"},{\"embedding\":\"AAAA\"}]}",
    };
    float *v = NULL;
    size_t dim;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(parse(bad[i], 2, &v, &dim), -1);
    /* too long a vector */
    char *big = malloc(16 * RECALL_MAX_DIM + 64), *p = big;
    p += sprintf(p, "{\"data\":[{\"embedding\":[0");
    for (int k = 0; k < RECALL_MAX_DIM; k++)
        p += sprintf(p, ",1");
    strcpy(p, "]}]}");
    assert_int_equal(parse(big, 1, &v, &dim), -1);
    free(big);
    assert_null(v);
}

static void test_cosine(void **state)
{
    float a[3] = {1, 0, 0}, b[3] = {2, 0, 0}, c[3] = {0, 3, 0}, z[3] = {0, 0, 0};
    float d[3] = {1, 1, 0};
    assert_true(fabs(recall_cosine(a, b, 3) - 1) < 1e-9);
    assert_true(fabs(recall_cosine(a, c, 3)) < 1e-9);
    assert_true(recall_cosine(a, z, 3) == 0);
    assert_true(fabs(recall_cosine(a, d, 3) - sqrt(0.5)) < 1e-6);
}

static void test_query_is_the_last_user_message(void **state)
{
    json_t *m = json_loads("[{\"role\":\"user\",\"content\":\"old\"},{\"role\":\"assistant\","
                           "\"content\":\"x\"},{\"role\":\"user\",\"content\":[{\"type\":"
                           "\"text\",\"text\":\"a\"},{\"type\":\"image_url\"},{\"type\":"
                           "\"text\",\"text\":\"b\"}]}]",
                           0, NULL);
    char *q = recall_query_text(m);
    assert_string_equal(q, "a\nb");
    free(q);
    json_array_remove(m, 2); /* the last is the assistant's: nothing to look up */
    assert_null(recall_query_text(m));
    json_decref(m);
    m = json_loads("[{\"role\":\"user\",\"content\":\"\"}]", 0, NULL);
    assert_null(recall_query_text(m));
    json_decref(m);
}

static const struct recall_opts opts = {
    .recent = 2, .importance = 0.85, .similarity = 0.655, .relevant = 2, .budget_tokens = 500};

/* Offer n candidates, newest first: turn i has text "turn <i>" (turn 0 newest), vector
 * e_(i%4), importance 0.5 except turn salient_at's (0.9); the message chosen. */
static json_t *choose(size_t n, int salient_at, const float *q, size_t dim, json_t *window,
                      const struct recall_opts *o, struct recall_stats *st)
{
    struct recall_pick *p = recall_pick_new(o, q, dim, window);
    for (size_t i = 0; i < n; i++) {
        float v[4] = {0, 0, 0, 0};
        char text[32];
        v[i % 4] = 1;
        snprintf(text, sizeof(text), "turn %zu", i);
        recall_pick_offer(p, 1, (int64_t)(n - i), i % 2 ? "assistant" : "user", text,
                          1700000000000LL + (int64_t)(n - i) * 1000,
                          (int)i == salient_at ? 0.9 : 0.5, v, sizeof(v));
    }
    json_t *m = recall_pick_message(p, st);
    recall_pick_free(p);
    return m;
}

static void test_three_legs_merged_oldest_first(void **state)
{
    float q[4] = {0, 0, 1, 0.1f}; /* like turns 2, 6, 10 */
    json_t *window = json_loads("[{\"role\":\"user\",\"content\":\"turn 0\"}]", 0, NULL);
    struct recall_stats st;
    json_t *m = choose(12, 9, q, 4, window, &opts, &st);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "role")), "system");
    const char *text = json_string_value(json_object_get(m, "content"));
    /* recency: turns 1 and 2 (turn 0 is in the window); relevance: the 2 most similar of 2,
     * 6, 10 (equal scores: the newer, 2 and 6); salience: turn 9 */
    assert_int_equal(st.recent, 2);
    assert_int_equal(st.relevant, 2);
    assert_int_equal(st.salient, 1);
    assert_true(st.embedded);
    assert_int_equal(st.injected, 4); /* turn 2 counted by two legs, injected once */
    assert_null(strstr(text, "turn 0\n"));
    assert_non_null(strstr(text, "turn 1"));
    assert_non_null(strstr(text, "turn 9"));
    assert_non_null(strstr(text, "turn 6"));
    assert_null(strstr(text, "turn 10"));
    assert_null(strstr(text, "turn 3"));
    assert_true(strstr(text, "turn 9") < strstr(text, "turn 6")); /* oldest first */
    assert_true(strstr(text, "turn 6") < strstr(text, "turn 1"));
    assert_non_null(strstr(text, "] user: turn 2"));
    json_decref(m);
    /* without the question's embedding: recency and salience only */
    m = choose(12, 9, NULL, 0, window, &opts, &st);
    assert_int_equal(st.relevant, 0);
    assert_false(st.embedded);
    assert_int_equal(st.injected, 3);
    assert_null(strstr(json_string_value(json_object_get(m, "content")), "turn 6"));
    json_decref(m);
    json_decref(window);
}

static void test_relevance_keeps_the_most_similar(void **state)
{
    /* e_3 and e_2 mixed: turns 3, 7, 11 score 0.8; turns 2, 6, 10 score 0.6 (under 0.655) */
    float q[4] = {0, 0, 0.6f, 0.8f};
    struct recall_opts o = opts;
    struct recall_stats st;
    o.recent = 0;
    o.relevant = 1;
    json_t *m = choose(12, -1, q, 4, NULL, &o, &st);
    assert_int_equal(st.relevant, 1);
    assert_int_equal(st.injected, 1);
    assert_non_null(strstr(json_string_value(json_object_get(m, "content")), "turn 3"));
    json_decref(m);
    o.relevant = 5;
    m = choose(12, -1, q, 4, NULL, &o, &st);
    assert_int_equal(st.relevant, 3);
    assert_null(strstr(json_string_value(json_object_get(m, "content")), "turn 2"));
    json_decref(m);
}

static void test_budget_keeps_relevance_first(void **state)
{
    float q[4] = {0, 0, 0, 1}; /* like turns 3, 7, 11 */
    struct recall_opts tight = opts;
    struct recall_stats st;
    tight.budget_tokens = 50; /* the heading (25) and two lines (10 each) */
    json_t *m = choose(12, 9, q, 4, NULL, &tight, &st);
    const char *text = json_string_value(json_object_get(m, "content"));
    assert_int_equal(st.injected, 2);
    assert_non_null(strstr(text, "turn 3"));
    assert_non_null(strstr(text, "turn 7"));
    json_decref(m);
    tight.budget_tokens = 5; /* not even the heading */
    assert_null(choose(12, 9, q, 4, NULL, &tight, &st));
}

/* With a tokenizer (here each byte a token), the budget counts its tokens: the heading's 91,
 * then each line's content, role and framing: 6 + 4 + 6 for "turn 0", a user's, the
 * smallest (relevance's lines, an assistant's, are 21). */
static void test_budget_counted_by_the_tokenizer(void **state)
{
    struct tiktoken *tk = bytes_tokenizer(TIKTOKEN_O200K, NULL);
    float q[4] = {0, 0, 0, 1}; /* like turns 3, 7, 11 */
    struct recall_opts counted = opts;
    struct recall_stats st;
    counted.tokenizer = tk;
    counted.budget_tokens = 106;
    assert_null(choose(12, 9, q, 4, NULL, &counted, &st));
    counted.budget_tokens = 107;
    json_t *m = choose(12, 9, q, 4, NULL, &counted, &st);
    assert_int_equal(st.injected, 1);
    assert_non_null(strstr(json_string_value(json_object_get(m, "content")), "user: turn 0"));
    json_decref(m);
    counted.budget_tokens = 91 + 2 * 21; /* the heading and two relevant lines, kept first */
    m = choose(12, 9, q, 4, NULL, &counted, &st);
    assert_int_equal(st.injected, 2);
    json_decref(m);
    tiktoken_destroy(tk);
}

static void test_nothing_to_recall(void **state)
{
    struct recall_opts none = opts;
    float q[4] = {1, 0, 0, 0};
    struct recall_stats st;
    assert_null(choose(0, -1, q, 4, NULL, &opts, &st));
    assert_int_equal(st.injected, 0);
    /* everything already in the request */
    json_t *window = json_loads("[{\"role\":\"user\",\"content\":\"turn 0\"},{\"role\":"
                                "\"assistant\",\"content\":\"turn 1\"}]",
                                0, NULL);
    assert_null(choose(2, -1, q, 4, window, &opts, NULL));
    json_decref(window);
    /* no leg wanted; a question of another size is compared with nothing */
    none.recent = 0;
    none.relevant = 0;
    assert_null(choose(2, -1, q, 4, NULL, &none, NULL));
    none.relevant = 5;
    assert_null(choose(2, -1, q, 3, NULL, &none, &st));
    assert_false(st.embedded);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_cuts_long_texts_at_a_character),
        cmocka_unit_test(test_parse_floats_in_index_order),
        cmocka_unit_test(test_parse_base64),
        cmocka_unit_test(test_parse_rejects_what_is_not_the_answer_asked_for),
        cmocka_unit_test(test_cosine),
        cmocka_unit_test(test_query_is_the_last_user_message),
        cmocka_unit_test(test_three_legs_merged_oldest_first),
        cmocka_unit_test(test_relevance_keeps_the_most_similar),
        cmocka_unit_test(test_budget_keeps_relevance_first),
        cmocka_unit_test(test_budget_counted_by_the_tokenizer),
        cmocka_unit_test(test_nothing_to_recall),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
