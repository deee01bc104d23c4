/*
 * spoken: a reply and a voice platform's copy of it, compared as the caller hears them.
 *
 * A platform sends back what its text-to-speech said, not what the model wrote: Pipecat's
 * context takes the TTS's words, joined by single spaces, after its markdown filter; other
 * platforms' transcripts are made alike. So a reply of two paragraphs, or one with **bold**,
 * comes back in another form, and cut at the word where the caller barged in. Compared byte
 * for byte, that copy is neither the stored reply nor its start: reconciliation would store
 * the reply a second time and miss the interruption (memory/reconcile.h).
 *
 * What is ignored: runs of whitespace (one space between words, none at either end; ASCII's
 * and Unicode's, the set Python's str.split() splits on: a no-break space, French's narrow
 * one before "!", an ideographic space) and the marks markdown uses for emphasis, code and
 * headings: * _ ` # ~. Everything else counts: letters and their case, digits, punctuation.
 *
 * Pure, no allocation; linear in the two texts. Both must be NUL-terminated.
 */
#ifndef MEMPROXY_SPOKEN_H
#define MEMPROXY_SPOKEN_H

enum spoken_match {
    SPOKEN_DIFFERENT, /* neither of the below */
    SPOKEN_SAME,      /* the same words */
    SPOKEN_START,     /* heard is a strict start of said (and not empty) */
};

enum spoken_match spoken_compare(const char *said, const char *heard);

/* Does text say nothing (only whitespace and marks)? A platform's copy of a reply the caller
 * barged into before its first word. */
int spoken_empty(const char *text);

#endif
