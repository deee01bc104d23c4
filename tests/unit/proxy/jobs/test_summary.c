/* Unit tests: the summarizer's request and the reading of its answer (memory/summary.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proxy/jobs/summary.h"

#include <jansson.h>
#include <string.h>

static void test_request_holds_what_was_heard(void **state)
{
    json_t *turns = json_loads(
        "[{\"role\":\"system\",\"content\":\"secret instructions\"},"
        "{\"role\":\"user\",\"content\":\"Tell me a joke\"},"
        "{\"role\":\"assistant\",\"content\":\"A cat walks into a\",\"interrupted\":true,"
        "\"original\":\"A cat walks into a bar and orders a milk.\"},"
        "{\"role\":\"tool\",\"content\":\"{}\"}]",
        0, NULL);
    json_t *facts =
        json_loads("[{\"category\":\"pet\",\"key\":\"cat\",\"value\":\"Misu\"}]", 0, NULL);
    json_t *body = summary_request("m", "PROMPT", turns, "Likes jokes.", facts, NULL);
    json_t *msgs = json_object_get(body, "messages");
    assert_string_equal(json_string_value(json_object_get(body, "model")), "m");
    assert_true(json_is_false(json_object_get(body, "stream")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "content")),
                        "PROMPT");
    const char *user = json_string_value(json_object_get(json_array_get(msgs, 1), "content"));
    assert_non_null(strstr(user, "Earlier summary: Likes jokes."));
    assert_non_null(strstr(user, "pet cat: Misu"));
    assert_non_null(strstr(user, "USER: Tell me a joke\nASSISTANT: A cat walks into a\n"));
    assert_null(strstr(user, "orders a milk"));
    assert_null(strstr(user, "secret instructions"));
    json_decref(body);
    json_decref(turns);
    json_decref(facts);
}

/* The platform's own lines (greetings, "are you still there?", a fallback reply) are not the
 * conversation: left out of what is summarized. */
static void test_platform_lines_are_left_out(void **state)
{
    const char *skipped[] = {"greeting", "silence", "llm_failure"};
    struct cfg_strlist skip = {.v = (char **)skipped, .n = 3};
    json_t *turns = json_loads(
        "[{\"role\":\"assistant\",\"source\":\"greeting\",\"content\":\"Hi, what can I do?\"},"
        "{\"role\":\"user\",\"source\":\"asr\",\"content\":\"I need a taxi\"},"
        "{\"role\":\"assistant\",\"source\":\"silence\",\"content\":\"Are you still there?\"},"
        "{\"role\":\"assistant\",\"source\":\"llm_failure\",\"content\":\"Sorry, say again?\"},"
        "{\"role\":\"assistant\",\"source\":\"llm\",\"content\":\"Where to?\"}]",
        0, NULL);
    json_t *body = summary_request("m", "P", turns, NULL, NULL, &skip);
    const char *user = json_string_value(
        json_object_get(json_array_get(json_object_get(body, "messages"), 1), "content"));
    assert_non_null(strstr(user, "USER: I need a taxi\nASSISTANT: Where to?\n"));
    assert_null(strstr(user, "Hi, what can I do?"));
    assert_null(strstr(user, "still there"));
    assert_null(strstr(user, "say again"));
    json_decref(body);
    json_decref(turns);
}

static void test_request_keeps_the_newest_of_a_long_call(void **state)
{
    json_t *turns = json_array();
    char text[1001];
    memset(text, 'x', 1000);
    text[1000] = '\0';
    for (int i = 0; i < 200; i++)
        json_array_append_new(turns, json_pack("{s:s, s:s}", "role", "user", "content", text));
    json_array_append_new(turns, json_pack("{s:s, s:s}", "role", "user", "content", "the end"));
    json_t *body = summary_request("m", "P", turns, NULL, NULL, NULL);
    const char *user = json_string_value(
        json_object_get(json_array_get(json_object_get(body, "messages"), 1), "content"));
    assert_true(strlen(user) <= SUMMARY_MAX_TRANSCRIPT + 200);
    assert_non_null(strstr(user, "USER: the end"));
    json_decref(body);
    json_decref(turns);
}

static void test_parse(void **state)
{
    char *err = NULL;
    const char *fenced = "```json\n{\"summary\": \"Likes cats.\", \"facts\": []}\n```\n";
    json_t *m = summary_parse(fenced, strlen(fenced), &err);
    assert_non_null(m);
    assert_null(err);
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "summary"), "text")),
                        "Likes cats.");
    json_decref(m);
    const char *bad[] = {"Sure! Here is the summary",
                         "{\"summary\": 1}",
                         "{\"facts\": []}",
                         "{\"summary\": \"\"}",
                         "[]",
                         "{\"summary\": \"x\", \"mood\": \"ok\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(summary_parse(bad[i], strlen(bad[i]), &err));
        assert_non_null(err);
        free(err);
        err = NULL;
    }
    static char huge[SUMMARY_MAX_ANSWER + 2];
    memset(huge, 'x', sizeof(huge) - 1);
    assert_null(summary_parse(huge, sizeof(huge) - 1, &err));
    assert_non_null(strstr(err, "at most"));
    free(err);
}

/* A reasoning model served without a reasoning parser (DeepSeek-R1, Qwen3) writes its
 * thinking into the answer before the JSON: the summary is the JSON after it, however long
 * the thinking; a thinking never closed is no answer. */
static void test_parse_after_thinking(void **state)
{
    char *err = NULL;
    const char *answer = "<think>\nThe caller likes cats. {not json}\n</think>\n\n"
                         "```json\n{\"summary\": \"Likes cats.\", \"facts\": []}\n```";
    json_t *m = summary_parse(answer, strlen(answer), &err);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "summary"), "text")),
                        "Likes cats.");
    json_decref(m);

    size_t think = SUMMARY_MAX_ANSWER * 2;
    char *long_answer = malloc(think + 64);
    memcpy(long_answer, "<think>", 7);
    memset(long_answer + 7, 'h', think);
    strcpy(long_answer + 7 + think, "</think>{\"summary\": \"Hm.\"}");
    m = summary_parse(long_answer, strlen(long_answer), &err);
    assert_non_null(m);
    json_decref(m);
    free(long_answer);

    const char *open = "<think>{\"summary\": \"Likes cats.\"}";
    assert_null(summary_parse(open, strlen(open), &err));
    assert_non_null(err);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_holds_what_was_heard),
        cmocka_unit_test(test_request_keeps_the_newest_of_a_long_call),
        cmocka_unit_test(test_platform_lines_are_left_out),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_after_thinking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
