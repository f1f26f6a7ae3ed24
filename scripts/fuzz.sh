#!/usr/bin/env bash
# Builds the libFuzzer target fuzz/fuzz_safetensors.cpp (the safetensors parser and the GPT
# checkpoint loader, under ASan + UBSan) with clang in build-fuzz, runs it once over every file of
# the seed corpus fuzz/corpus/ (the regression run), then fuzzes for SECONDS (default 60).
# New inputs go to build-fuzz/corpus, not into the repository; a crash is written to build-fuzz/
# as crash-<sha1> and the script exits non-zero. See fuzz/README.md.
#
#   scripts/fuzz.sh [SECONDS]
#   (needs: apt-get install clang libfuzzer-14-dev)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
jobs="$(nproc)"

cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DHEED_FUZZ=ON \
  -DHEED_BUILD_TESTS=OFF -DHEED_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_safetensors

fuzzer=./build-fuzz/fuzz_safetensors
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Runs the fuzzer with "$@", its output in build-fuzz/$log; on a finding prints the end of it.
run() {
  local log="$1"
  shift
  if ! (cd build-fuzz && "$@") >"build-fuzz/$log" 2>&1; then
    tail -n 80 "build-fuzz/$log"
    echo "fuzz: FINDING (full output in build-fuzz/$log; the input is build-fuzz/crash-*, oom-* or timeout-*)"
    exit 1
  fi
}

echo "== regression: every file of fuzz/corpus once"
# -runs=0 with files as arguments runs each file once; any finding fails.
run regression.log ./fuzz_safetensors -runs=0 "$PWD"/fuzz/corpus/*
echo "$(grep -c '^Executed' build-fuzz/regression.log) of $(ls fuzz/corpus | wc -l) files ran without a finding"

if [ "$seconds" -gt 0 ]; then
  echo "== fuzzing for $seconds s (one process)"
  mkdir -p build-fuzz/corpus
  # -max_len covers the seed checkpoints (each < 10 KB); -timeout and -rss_limit_mb make a hang or
  # a runaway allocation a finding too.
  run fuzz.log ./fuzz_safetensors -max_total_time="$seconds" -max_len=12000 -timeout=10 -rss_limit_mb=2048 \
    -dict=../fuzz/safetensors.dict -print_final_stats=1 corpus ../fuzz/corpus
  grep -E "^Done|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" build-fuzz/fuzz.log
fi
