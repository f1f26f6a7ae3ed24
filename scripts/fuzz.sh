#!/usr/bin/env bash
# Builds every libFuzzer target fuzz/fuzz_<name>.cpp (under ASan + UBSan) with clang in build-fuzz,
# runs each once over every file of its seed corpus fuzz/corpus/<name>/ (the regression run), then
# fuzzes them for SECONDS in all (default 60), split evenly between the targets:
#   fuzz_safetensors          the safetensors parser and the GPT checkpoint loader
#   fuzz_train_state          train_state.safetensors, as `heed train --resume` reads and restores it
#   fuzz_seq2seq_checkpoint   the seq2seq checkpoint loader
#   fuzz_seq2seq_state        seq2seq_state.safetensors, as `heed seq2seq --resume` reads and restores it
# New inputs go to build-fuzz/corpus/<name>, not into the repository; a finding is written to
# build-fuzz/ as crash-<sha1> (or oom-, timeout-) and the script exits non-zero. See fuzz/README.md.
#
#   scripts/fuzz.sh [SECONDS]
#   (needs: apt-get install clang libfuzzer-14-dev)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
jobs="$(nproc)"
targets=()
for src in fuzz/fuzz_*.cpp; do
  name="$(basename "$src" .cpp)"
  targets+=("${name#fuzz_}")
done

cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DHEED_FUZZ=ON \
  -DHEED_BUILD_TESTS=OFF -DHEED_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-fuzz -j"$jobs" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Runs a fuzzer with "$@" in build-fuzz, its output in build-fuzz/$log; on a finding prints the end.
run() {
  local log="$1"
  shift
  if ! (cd build-fuzz && "$@") >"build-fuzz/$log" 2>&1; then
    tail -n 80 "build-fuzz/$log"
    echo "fuzz: FINDING (full output in build-fuzz/$log; the input is build-fuzz/crash-*, oom-* or timeout-*)"
    exit 1
  fi
}

for t in "${targets[@]}"; do
  echo "== regression: fuzz_$t over every file of fuzz/corpus/$t once"
  # -runs=0 with files as arguments runs each file once; any finding fails.
  run "regression_$t.log" "./fuzz_$t" -runs=0 "$PWD"/fuzz/corpus/"$t"/*
  echo "$(grep -c '^Executed' "build-fuzz/regression_$t.log") of $(ls fuzz/corpus/"$t" | wc -l) files ran without a finding"
done

if [ "$seconds" -gt 0 ]; then
  share=$(( seconds / ${#targets[@]} ))
  [ "$share" -gt 0 ] || share=1
  for t in "${targets[@]}"; do
    echo "== fuzzing fuzz_$t for $share s (one process)"
    mkdir -p "build-fuzz/corpus/$t"
    dict="fuzz/$t.dict"
    [ -f "$dict" ] || dict=fuzz/safetensors.dict
    # -max_len covers the target's seeds (16000 bytes, or its largest seed if larger: libFuzzer
    # truncates longer inputs, and a truncated seed fails at the first check); -timeout and
    # -rss_limit_mb make a hang or a runaway allocation a finding too.
    max_len=$(stat -c %s fuzz/corpus/"$t"/* | sort -n | tail -n 1)
    [ "$max_len" -gt 16000 ] || max_len=16000
    run "fuzz_$t.log" "./fuzz_$t" -max_total_time="$share" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -dict="../$dict" -print_final_stats=1 "corpus/$t" "../fuzz/corpus/$t"
    grep -E "^Done|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" "build-fuzz/fuzz_$t.log"
  done
fi
