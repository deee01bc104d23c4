#!/bin/sh
# Run one libFuzzer target for a while: new inputs go to a work directory in the build tree,
# the seed corpus is read but never written. Usage: run_fuzzer.sh FUZZER SEEDS WORKDIR SECONDS
set -eu
mkdir -p "$3"
exec "$1" -max_total_time="$4" -max_len=16384 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$3/" "$3" "$2"
