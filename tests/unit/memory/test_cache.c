/* Unit tests: the exact-match cache's key and who may use it (memory/cache.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "memory/cache.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static int key_of(const char *tenant, const char *body_json, char *key)
{
    json_t *body = json_loads(body_json, 0, NULL);
    assert_non_null(body);
    int rc = cache_key(tenant, "default", body, key);
    json_decref(body);
    return rc;
}

static void test_same_question_same_key(void **state)
{
    char a[CACHE_KEY_LEN + 1], b[CACHE_KEY_LEN + 1], c[CACHE_KEY_LEN + 1];
    assert_int_equal(key_of("t",
                            "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
                            "\"S\"},{\"role\":\"user\",\"content\":\"Opening hours?\"}]}",
                            a),
                     0);
    assert_int_equal(strlen(a), CACHE_KEY_LEN);
    assert_int_equal(key_of("t",
                            "{\"model\":\"m\",\"messages\":[{\"content\":\"S\",\"role\":"
                            "\"system\"},{\"role\":\"user\",\"content\":\"  opening \\n "
                            "HOURS? \"}]}",
                            b),
                     0);
    assert_string_equal(a, b);
    /* another tenant, model or system message is another question */
    assert_int_equal(key_of("u",
                            "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
                            "\"S\"},{\"role\":\"user\",\"content\":\"Opening hours?\"}]}",
                            c),
                     0);
    assert_string_not_equal(a, c);
    assert_int_equal(key_of("t",
                            "{\"model\":\"m2\",\"messages\":[{\"role\":\"system\",\"content\":"
                            "\"S\"},{\"role\":\"user\",\"content\":\"Opening hours?\"}]}",
                            c),
                     0);
    assert_string_not_equal(a, c);
    assert_int_equal(key_of("t",
                            "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
                            "\"S2\"},{\"role\":\"user\",\"content\":\"Opening hours?\"}]}",
                            c),
                     0);
    assert_string_not_equal(a, c);
}

/* Every field that shapes the answer is in the key; how it is delivered is not. */
static void test_options_that_shape_the_answer_are_in_the_key(void **state)
{
    static const char *const shaping[] = {
        "\"temperature\":1.5",
        "\"top_p\":0.1",
        "\"stop\":[\"x\"]",
        "\"response_format\":{\"type\":\"json_object\"}",
        "\"seed\":7",
        "\"max_tokens\":5",
        "\"presence_penalty\":1",
        "\"logit_bias\":{\"50256\":-100}",
        "\"reasoning_effort\":\"low\"",
    };
    static const char *const delivery[] = {"\"stream\":true", "\"user\":\"u-1\"",
                                           "\"stream_options\":{\"include_usage\":true}",
                                           "\"n\":1"};
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"Opening hours?\"}]";
    char base[CACHE_KEY_LEN + 1], k[CACHE_KEY_LEN + 1], body[512];
    snprintf(body, sizeof(body), "{\"model\":\"m\",%s}", msgs);
    assert_int_equal(key_of("t", body, base), 0);
    for (size_t i = 0; i < sizeof(shaping) / sizeof(shaping[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",%s,%s}", shaping[i], msgs);
        assert_int_equal(key_of("t", body, k), 0);
        assert_string_not_equal(base, k);
    }
    for (size_t i = 0; i < sizeof(delivery) / sizeof(delivery[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",%s,%s}", delivery[i], msgs);
        assert_int_equal(key_of("t", body, k), 0);
        assert_string_equal(base, k);
    }
}

static void test_context_makes_it_ineligible(void **state)
{
    char k[CACHE_KEY_LEN + 1];
    const char *no[] = {
        "{\"messages\":[]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\","
        "\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]}",
        "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"assistant\","
        "\"content\":\"b\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}]}",
        "{\"tools\":[],\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
        "{\"functions\":[],\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
        "{\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
        "{\"logprobs\":true,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_int_equal(key_of("t", no[i], k), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_question_same_key),
        cmocka_unit_test(test_context_makes_it_ineligible),
        cmocka_unit_test(test_options_that_shape_the_answer_are_in_the_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
