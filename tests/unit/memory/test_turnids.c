/* Unit tests: the platform's turn numbers outside turn-id reconciliation (memory/turnids.c):
 * a window without turn ids whose request is numbered, and a stored-mode request sent again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "memory/turnids.h"

#include <stdio.h>
#include <string.h>

/* A stored turn, numbered as the store numbers them (turnlist_next_idx, test_turnlist.c). */
static void stored(struct turnlist *l, int64_t turn_id, const char *role, const char *content)
{
    json_t *t =
        json_pack("{s:I, s:I, s:I, s:s, s:s}", "seq", (json_int_t)turnlist_size(l) + 1, "turn_id",
                  (json_int_t)turn_id, "turn_idx", (json_int_t)turnlist_next_idx(l, turn_id, role),
                  "role", role, "content", content);
    turnlist_append(l, t);
    json_decref(t);
}

static json_t *message(const char *role, const char *content, int64_t turn_id)
{
    json_t *m = json_pack("{s:s, s:s}", "role", role, "content", content);
    if (turn_id >= 0)
        json_object_set_new(m, "turn_id", json_integer(turn_id));
    return m;
}

/* "turn_id/turn_idx" of each insert, joined by spaces. */
static void numbers(json_t *inserts, char *out, size_t size)
{
    size_t i;
    json_t *t;
    out[0] = '\0';
    json_array_foreach(inserts, i, t) {
        size_t k = strlen(out);
        snprintf(out + k, size - k, "%s%lld/%lld", i ? " " : "",
                 (long long)json_integer_value(json_object_get(t, "turn_id")),
                 (long long)json_integer_value(json_object_get(t, "turn_idx")));
    }
}

/* The newest user message brought and what follows it (a tool call and its result) take the
 * request's turn, their turn_idx counted on from that turn's stored messages of each role;
 * what came before keeps its number. No request turn: nothing changes. */
static void test_request_inserts(void **state)
{
    (void)state;
    struct turnlist *l = turnlist_create();
    stored(l, 5, "user", "earlier question of turn 5");
    json_t *ins = json_pack("[{s:s, s:I, s:I}, {s:s, s:I, s:I}, {s:s, s:I, s:I}, {s:s, s:I, s:I}]",
                            "role", "assistant", "turn_id", 3, "turn_idx", 0, "role", "user",
                            "turn_id", 4, "turn_idx", 0, "role", "assistant", "turn_id", 4,
                            "turn_idx", 0, "role", "tool", "turn_id", 4, "turn_idx", 0);
    char got[128];
    turnids_request_inserts(l, -1, ins);
    numbers(ins, got, sizeof(got));
    assert_string_equal(got, "3/0 4/0 4/0 4/0");
    turnids_request_inserts(l, 5, ins);
    numbers(ins, got, sizeof(got));
    assert_string_equal(got, "3/0 5/1 5/0 5/0");
    json_decref(ins);
    turnlist_destroy(l);
}

/* A request is sent again when its newest user message is stored under its turn (its own
 * turn_id, else the request's) with the same text; another text, another turn, or no number
 * at all is not. */
static void test_resent(void **state)
{
    (void)state;
    struct turnlist *l = turnlist_create();
    stored(l, 7, "user", "hello");
    stored(l, 7, "assistant", "hi");
    json_t *req = json_array();
    json_array_append_new(req, message("system", "be brief", -1));
    json_array_append_new(req, message("user", "hello", -1));
    assert_int_equal(turnids_resent(l, req, 7), 7);
    assert_int_equal(turnids_resent(l, req, 8), -1);
    assert_int_equal(turnids_resent(l, req, -1), -1);
    json_array_append_new(req, message("user", "hello", 7));
    assert_int_equal(turnids_resent(l, req, -1), 7);
    assert_int_equal(turnids_resent(l, req, 9), 7); /* its own number wins */
    json_array_set_new(req, 2, message("user", "hello?", 7));
    assert_int_equal(turnids_resent(l, req, 7), -1);
    assert_int_equal(turnids_last_user(req), 2);
    json_decref(req);
    turnlist_destroy(l);
}

/* The turn before a resent one, whose reply a heard part sent before the question speaks of;
 * the newest assistant message of a turn. */
static void test_before_and_reply(void **state)
{
    (void)state;
    struct turnlist *l = turnlist_create();
    assert_int_equal(turnids_before(l, 5), -1);
    stored(l, 3, "user", "q3");
    stored(l, 3, "assistant", "a3");
    stored(l, 3, "assistant", "are you there?");
    stored(l, 5, "user", "q5");
    stored(l, 5, "assistant", "a5");
    assert_int_equal(turnids_before(l, 5), 3);
    assert_int_equal(turnids_before(l, 6), 5);
    assert_int_equal(turnids_before(l, 3), -1);
    assert_int_equal(turnids_reply(l, 3), 2);
    assert_int_equal(turnids_reply(l, 5), 4);
    assert_int_equal(turnids_reply(l, 4), -1);
    turnlist_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_inserts),
        cmocka_unit_test(test_resent),
        cmocka_unit_test(test_before_and_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
