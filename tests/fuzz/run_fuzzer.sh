#!/bin/sh
# Run one libFuzzer target for a while: new inputs go to a work directory in the build tree,
# the seed corpus is read but never written. Usage: run_fuzzer.sh FUZZER SEEDS WORKDIR SECONDS
# A crash, a sanitizer report or a leak exits 1, a failure to meson: libFuzzer's own code for
# them is 77, which meson reads as "skipped" (a crashing target once passed CI as a skip).
set -eu
mkdir -p "$3"
exec "$1" -max_total_time="$4" -max_len=16384 -timeout=10 -error_exitcode=1 \
    -print_final_stats=1 -artifact_prefix="$3/" "$3" "$2"
