#!/usr/bin/env bash
# Builds every libFuzzer target fuzz/fuzz_<name>.cpp (under ASan + UBSan) with clang, runs each once
# over every file of its seed corpus fuzz/corpus/<name>/ (the regression run), then fuzzes them for
# SECONDS in all (default 60), split evenly between the targets:
#   fuzz_safetensors          the safetensors parser and the GPT checkpoint loader
#   fuzz_train_state          train_state.safetensors, as `heed train --resume` reads and restores it
#   fuzz_seq2seq_checkpoint   the seq2seq checkpoint loader
#   fuzz_seq2seq_state        seq2seq_state.safetensors, as `heed seq2seq --resume` reads and restores it
# The build tree is build-fuzz, configured here with just the library and the readers the targets
# use; or BUILD_DIR, a tree already configured with -DCMAKE_CXX_COMPILER=clang++ -DHEED_FUZZ=ON
# (CI's build-asan, where the test suite is built too: the targets then reuse its objects),
# relative to the repository's root.
# New inputs go to BUILD_DIR/corpus/<name>, not into the repository; a finding is written to
# BUILD_DIR as crash-<sha1> (or oom-, timeout-) and the script exits non-zero. See fuzz/README.md.
#
#   scripts/fuzz.sh [SECONDS [BUILD_DIR]]
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

root="$PWD"
if [ -n "${2:-}" ]; then
  dir="$2"
  if ! grep -Eiq '^HEED_FUZZ:BOOL=(ON|1|TRUE|YES|Y)$' "$dir/CMakeCache.txt" 2>/dev/null; then
    echo "fuzz.sh: $dir is not a build tree configured with -DHEED_FUZZ=ON (clang++)" >&2
    exit 2
  fi
else
  dir=build-fuzz
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DHEED_FUZZ=ON \
    -DHEED_BUILD_TESTS=OFF -DHEED_BUILD_EXAMPLES=OFF >/dev/null
fi
cmake --build "$dir" -j"$jobs" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Runs a fuzzer with "$@" in $dir, its output in $dir/$log; on a finding prints the end.
run() {
  local log="$1"
  shift
  if ! (cd "$dir" && "$@") >"$dir/$log" 2>&1; then
    tail -n 80 "$dir/$log"
    echo "fuzz: FINDING (full output in $dir/$log; the input is $dir/crash-*, oom-* or timeout-*)"
    exit 1
  fi
}

for t in "${targets[@]}"; do
  echo "== regression: fuzz_$t over every file of fuzz/corpus/$t once"
  # -runs=0 with files as arguments runs each file once; any finding fails.
  run "regression_$t.log" "./fuzz_$t" -runs=0 "$root"/fuzz/corpus/"$t"/*
  echo "$(grep -c '^Executed' "$dir/regression_$t.log") of $(ls fuzz/corpus/"$t" | wc -l) files ran without a finding"
done

if [ "$seconds" -gt 0 ]; then
  share=$(( seconds / ${#targets[@]} ))
  [ "$share" -gt 0 ] || share=1
  for t in "${targets[@]}"; do
    echo "== fuzzing fuzz_$t for $share s (one process)"
    mkdir -p "$dir/corpus/$t"
    dict="fuzz/$t.dict"
    [ -f "$dict" ] || dict=fuzz/safetensors.dict
    # -max_len covers the target's seeds (16000 bytes, or its largest seed if larger: libFuzzer
    # truncates longer inputs, and a truncated seed fails at the first check); -timeout and
    # -rss_limit_mb make a hang or a runaway allocation a finding too.
    max_len=$(stat -c %s fuzz/corpus/"$t"/* | sort -n | tail -n 1)
    [ "$max_len" -gt 16000 ] || max_len=16000
    run "fuzz_$t.log" "./fuzz_$t" -max_total_time="$share" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -dict="$root/$dict" -print_final_stats=1 "corpus/$t" "$root/fuzz/corpus/$t"
    grep -E "^Done|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" "$dir/fuzz_$t.log"
  done
fi
