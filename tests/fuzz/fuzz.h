/* The libFuzzer entry point every target defines; replay.c drives it without libFuzzer. */
#ifndef MEMPROXY_FUZZ_H
#define MEMPROXY_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
