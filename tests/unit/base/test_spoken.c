/* Unit tests: a reply and a platform's copy of it compared as spoken (base/spoken.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/spoken.h"

#include <stdlib.h>
#include <string.h>

/* What text-to-speech makes of a reply: the same words. */
static void test_same_words(void **state)
{
    (void)state;
    assert_int_equal(spoken_compare("Bubbles is a classic.", "Bubbles is a classic."), SPOKEN_SAME);
    assert_int_equal(spoken_compare("Bubbles is a classic.  \n", "Bubbles is a classic."),
                     SPOKEN_SAME);
    assert_int_equal(spoken_compare("  Two\n\nparagraphs.\tHere", "Two paragraphs. Here"),
                     SPOKEN_SAME);
    assert_int_equal(spoken_compare("**Bubbles** is a `classic`.\n## Also\n~~Finn~~",
                                    "Bubbles is a classic. Also Finn"),
                     SPOKEN_SAME);
    /* Unicode's spaces, as Python's str.split() joins them back: ASCII spaces */
    assert_int_equal(spoken_compare("Bonjour\xe2\x80\xaf! 10\xc2\xa0"
                                    "000 \xe3\x80\x80ok",
                                    "Bonjour ! 10 000 ok"),
                     SPOKEN_SAME);
    assert_int_equal(spoken_compare("a\xe2\x80\x8a\xe2\x80\xa8"
                                    "b\xe1\x9a\x80"
                                    "c",
                                    "a b c"),
                     SPOKEN_SAME);
    assert_int_equal(spoken_compare("", ""), SPOKEN_SAME);
    assert_int_equal(spoken_compare("**", " "), SPOKEN_SAME);
}

/* What a caller heard before barging in: a start, to the letter. */
static void test_a_start(void **state)
{
    (void)state;
    assert_int_equal(spoken_compare("Bubbles is a classic.", "Bubbles is a"), SPOKEN_START);
    assert_int_equal(spoken_compare("Bubbles is a classic.", "Bubbles is a "), SPOKEN_START);
    assert_int_equal(spoken_compare("Bubbles is a classic.", "Bubbles is a cl"), SPOKEN_START);
    assert_int_equal(spoken_compare("**Bubbles** is\n\na classic.", "Bubbles is a"), SPOKEN_START);
    /* nothing heard is not a start; a longer text is not one either */
    assert_int_equal(spoken_compare("Bubbles", ""), SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("Bubbles", " * "), SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("Bubbles", "Bubbles is"), SPOKEN_DIFFERENT);
}

/* Words, case, digits and punctuation count; a gap between words is not nothing. */
static void test_different(void **state)
{
    (void)state;
    assert_int_equal(spoken_compare("Bubbles is a classic.", "bubbles is a classic."),
                     SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("Bubbles is a classic.", "Bubbles is a classic!"),
                     SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("It costs 12 dollars.", "It costs twelve dollars."),
                     SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("Bubbles is", "Bubblesis"), SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("Bubbles is", "Bubbles i s"), SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("Café au lait", "Cafe au lait"), SPOKEN_DIFFERENT);
    /* other characters of those UTF-8 ranges are not spaces: a dash, a zero-width joiner */
    assert_int_equal(spoken_compare("a\xe2\x80\x94"
                                    "b",
                                    "a b"),
                     SPOKEN_DIFFERENT);
    assert_int_equal(spoken_compare("a\xe2\x80\x8d"
                                    "b",
                                    "a b"),
                     SPOKEN_DIFFERENT);
    /* a sequence cut short at the end of the text is no space: read, not skipped */
    assert_int_equal(spoken_compare("a\xe2\x80", "a"), SPOKEN_START);
    assert_int_equal(spoken_compare("a\xc2", "a\xc2"), SPOKEN_SAME);
}

/* Long texts: compared in one pass, whatever their gaps. */
static void test_long(void **state)
{
    (void)state;
    size_t n = 1 << 20;
    char *a = malloc(n + 1), *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        a[i] = i % 7 == 6 ? '\n' : (char)('a' + i % 7);
        b[i] = i % 7 == 6 ? ' ' : (char)('a' + i % 7);
    }
    a[n] = b[n] = 0;
    assert_int_equal(spoken_compare(a, b), SPOKEN_SAME);
    b[n / 2] = 0;
    assert_int_equal(spoken_compare(a, b), SPOKEN_START);
    free(a);
    free(b);
}

/* Nothing said: only whitespace and marks. */
static void test_empty(void **state)
{
    (void)state;
    assert_true(spoken_empty(""));
    assert_true(spoken_empty(" \n** _\xc2\xa0"));
    assert_false(spoken_empty(" a "));
    assert_false(spoken_empty("."));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_words), cmocka_unit_test(test_a_start),
        cmocka_unit_test(test_different),  cmocka_unit_test(test_long),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
