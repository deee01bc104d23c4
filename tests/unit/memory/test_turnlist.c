/* Unit tests: a session's turns as the working set keeps them (memory/turnlist.c) — what it
 * answers must be what reading the turn objects answers, however the list was filled,
 * trimmed and changed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/util.h"
#include "memory/turnlist.h"

#include <stdio.h>
#include <string.h>

static json_t *turn(int64_t seq, int64_t turn_id, const char *role, const char *content)
{
    return json_pack("{s:I, s:I, s:s, s:s}", "seq", (json_int_t)seq, "turn_id", (json_int_t)turn_id,
                     "role", role, "content", content);
}

static void append(struct turnlist *l, int64_t seq, int64_t turn_id, const char *role)
{
    char text[32];
    snprintf(text, sizeof(text), "%s %lld", role, (long long)seq);
    json_t *t = turn(seq, turn_id, role, text);
    turnlist_append(l, t);
    json_decref(t);
}

/* The same, the turn's index among its turn's messages of its role given. */
static void append_at(struct turnlist *l, int64_t seq, int64_t turn_id, const char *role,
                      int64_t idx)
{
    json_t *t = turn(seq, turn_id, role, "x");
    json_object_set_new(t, "turn_idx", json_integer(idx));
    turnlist_append(l, t);
    json_decref(t);
}

/* The seqs of an array of turns, joined by commas. */
static char *seqs(json_t *turns)
{
    char *out = xstrdup("");
    size_t i;
    json_t *t;
    json_array_foreach(turns, i, t) {
        char *n = xasprintf("%s%s%lld", out, i ? "," : "",
                            (long long)json_integer_value(json_object_get(t, "seq")));
        free(out);
        out = n;
    }
    json_decref(turns);
    return out;
}

static void assert_seqs(json_t *turns, const char *want)
{
    char *got = seqs(turns);
    assert_string_equal(got, want);
    free(got);
}

/* The seqs of the views from oldest on, each checked against its turn, joined by commas. */
static void assert_views(const struct turnlist *l, int64_t oldest, const char *want)
{
    size_t n, nall;
    struct reconcile_view *v = turnlist_views_from(l, oldest, &n);
    const struct reconcile_view *all = turnlist_views(l, &nall);
    assert_int_equal(nall, turnlist_size(l));
    for (size_t i = 0; i < nall; i++) /* every view where the list keeps it, in order */
        assert_ptr_equal(all[i].t, turnlist_get(l, i));
    json_t *turns = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *t = v[i].t;
        assert_int_equal(v[i].seq, json_integer_value(json_object_get(t, "seq")));
        assert_int_equal(v[i].turn_id, json_integer_value(json_object_get(t, "turn_id")));
        assert_true(v[i].turn_id >= oldest);
        assert_string_equal(v[i].role, json_string_value(json_object_get(t, "role")));
        assert_string_equal(v[i].content, json_string_value(json_object_get(t, "content")));
        json_array_append(turns, t);
    }
    free(v);
    assert_seqs(turns, want);
}

/* A turn's messages of each role are numbered apart (turn_idx), roles other than the usual
 * three by their text; a turn id the list does not have starts at 0. */
static void test_next_idx_by_turn_and_role(void **state)
{
    struct turnlist *l = turnlist_create();
    append_at(l, 1, 1, "user", 0);
    append_at(l, 2, 1, "assistant", 0);
    append_at(l, 3, 1, "tool", 0);
    append_at(l, 4, 1, "assistant", 1);
    append_at(l, 5, 1, "function", 0);
    append_at(l, 6, 2, "user", 0);
    assert_int_equal(turnlist_next_idx(l, 1, "assistant"), 2);
    assert_int_equal(turnlist_next_idx(l, 1, "user"), 1);
    assert_int_equal(turnlist_next_idx(l, 1, "tool"), 1);
    assert_int_equal(turnlist_next_idx(l, 1, "function"), 1);
    assert_int_equal(turnlist_next_idx(l, 1, "critic"), 0);
    assert_int_equal(turnlist_next_idx(l, 2, "user"), 1);
    assert_int_equal(turnlist_next_idx(l, 2, "assistant"), 0);
    assert_int_equal(turnlist_next_idx(l, 3, "user"), 0);
    assert_true(turnlist_role_is(l, 4, "function"));
    assert_false(turnlist_role_is(l, 4, "critic"));
    assert_true(turnlist_role_is(l, 5, "user"));
    assert_false(turnlist_role_is(l, 6, "user")); /* past the end */
    turnlist_destroy(l);
}

/* A turn longer than the list keeps: its oldest messages left the list (they are in the
 * database still), so the next index is one past the newest kept, not how many are kept. */
static void test_next_idx_after_the_oldest_left(void **state)
{
    struct turnlist *l = turnlist_create();
    for (int64_t i = 0; i < 10; i++) {
        append_at(l, 2 * i + 1, 7, "user", i);
        append_at(l, 2 * i + 2, 7, "assistant", i);
    }
    turnlist_keep_last(l, 5);
    assert_int_equal(turnlist_size(l), 5);
    assert_int_equal(turnlist_next_idx(l, 7, "user"), 10);
    assert_int_equal(turnlist_next_idx(l, 7, "assistant"), 10);
    turnlist_keep_last(l, 1); /* the newest only: a reply */
    assert_int_equal(turnlist_next_idx(l, 7, "assistant"), 10);
    turnlist_destroy(l);
}

/* Whether the list holds all of the turns from a turn id on: the first turn counts when
 * nothing of it was dropped, by keep_last or by the limit the list was filled up to. */
static void test_holds_from(void **state)
{
    struct turnlist *l = turnlist_create();
    assert_false(turnlist_holds_from(l, 1)); /* nothing held */
    append_at(l, 1, 1, "user", 0);
    append_at(l, 2, 1, "assistant", 0);
    append_at(l, 3, 2, "user", 0);
    append_at(l, 4, 2, "assistant", 0);
    assert_true(turnlist_holds_from(l, 1));
    assert_true(turnlist_holds_from(l, 2));
    assert_false(turnlist_holds_from(l, 0)); /* older than the list */
    turnlist_keep_last(l, 3);                /* turn 1's question dropped, its reply kept */
    assert_false(turnlist_holds_from(l, 1));
    assert_true(turnlist_holds_from(l, 2));
    turnlist_keep_last(l, 2); /* turn 1 gone whole */
    assert_true(turnlist_holds_from(l, 2));
    json_t *arr = turnlist_array(l);
    turnlist_set(l, arr, 1); /* read up to a limit: the first turn may have begun before */
    assert_false(turnlist_holds_from(l, 2));
    assert_true(turnlist_holds_from(l, 3));
    turnlist_set(l, arr, 0);
    assert_true(turnlist_holds_from(l, 2));
    json_decref(arr);
    turnlist_destroy(l);
}

/* A turn without seq, turn_id or role (a row from an older version, or damaged) is kept and
 * answers as having none. */
static void test_turn_missing_fields(void **state)
{
    struct turnlist *l = turnlist_create();
    json_t *t = json_pack("{s:s}", "content", "x");
    turnlist_append(l, t);
    assert_int_equal(turnlist_size(l), 1);
    assert_ptr_equal(turnlist_get(l, 0), t);
    assert_int_equal(turnlist_turn_id(l, 0), -1);
    assert_int_equal(turnlist_find_seq(l, -1), 0);
    assert_false(turnlist_role_is(l, 0, "user"));
    assert_false(turnlist_role_is(l, 0, "critic"));
    assert_int_equal(turnlist_next_idx(l, -1, "user"), 0);
    json_decref(t);
    turnlist_destroy(l);
}

/* A long call: one turn in, the oldest out, a thousand times over (the array compacted and
 * grown on the way): the list is always the newest turns in order, and a window's turns
 * (turn id at least its oldest) are found among them. */
static void test_long_call_keeps_newest(void **state)
{
    struct turnlist *l = turnlist_create();
    for (int64_t seq = 1; seq <= 1000; seq++) {
        append(l, seq, (seq + 1) / 2, seq % 2 ? "user" : "assistant");
        turnlist_keep_last(l, 7);
        size_t n = turnlist_size(l);
        assert_int_equal(n, seq < 7 ? seq : 7);
        for (size_t i = 0; i < n; i++) {
            json_t *t = turnlist_get(l, i);
            assert_int_equal(json_integer_value(json_object_get(t, "seq")),
                             seq - (int64_t)n + 1 + (int64_t)i);
        }
        assert_int_equal(turnlist_find_seq(l, seq), (long)n - 1);
        assert_int_equal(turnlist_find_seq(l, seq - 7), -1);
    }
    assert_null(turnlist_get(l, 7));
    assert_int_equal(turnlist_turn_id(l, 7), -1);
    assert_seqs(turnlist_array(l), "994,995,996,997,998,999,1000");
    assert_views(l, 499, "997,998,999,1000");
    assert_views(l, 501, "");
    assert_views(l, INT64_MIN, "994,995,996,997,998,999,1000");
    turnlist_keep_last(l, 0);
    assert_int_equal(turnlist_size(l), 0);
    assert_seqs(turnlist_array(l), "");
    append(l, 1001, 501, "user"); /* usable again once empty */
    assert_seqs(turnlist_array(l), "1001");
    turnlist_destroy(l);
}

/* Turn ids need not rise with seq (a client numbering its turns as it likes): a window's
 * turns are every turn of those ids, wherever they are. */
static void test_from_turn_unordered(void **state)
{
    struct turnlist *l = turnlist_create();
    append(l, 1, 5, "user");
    append(l, 2, 2, "user");
    append(l, 3, 9, "assistant");
    append(l, 4, 3, "user");
    assert_views(l, 3, "1,3,4");
    assert_views(l, 6, "3");
    turnlist_destroy(l);
}

/* set replaces the contents and keeps no hold on the array it was given; replace puts a new
 * turn in a place, read afresh, and the list releases the old one. */
static void test_set_and_replace(void **state)
{
    struct turnlist *l = turnlist_create();
    append(l, 1, 1, "user");
    json_t *arr = json_array();
    json_array_append_new(arr, turn(10, 4, "user", "q"));
    json_array_append_new(arr, turn(11, 4, "assistant", "a long answer"));
    turnlist_set(l, arr, 0);
    assert_int_equal(arr->refcount, 1);
    json_decref(arr);
    assert_seqs(turnlist_array(l), "10,11");
    json_t *old = json_incref(turnlist_get(l, 1));
    json_t *heard = turn(11, 4, "assistant", "a long");
    turnlist_replace(l, 1, heard);
    assert_int_equal(old->refcount, 1); /* only ours is left */
    json_decref(old);
    assert_ptr_equal(turnlist_get(l, 1), heard);
    assert_int_equal(turnlist_find_seq(l, 11), 1);
    size_t n;
    struct reconcile_view *v = turnlist_views_from(l, 4, &n); /* matching sees what was heard */
    assert_int_equal(n, 2);
    assert_string_equal(v[1].content, "a long");
    free(v);
    json_decref(heard);
    turnlist_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_next_idx_by_turn_and_role),
        cmocka_unit_test(test_next_idx_after_the_oldest_left),
        cmocka_unit_test(test_holds_from),
        cmocka_unit_test(test_turn_missing_fields),
        cmocka_unit_test(test_long_call_keeps_newest),
        cmocka_unit_test(test_from_turn_unordered),
        cmocka_unit_test(test_set_and_replace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
