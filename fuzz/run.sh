#!/usr/bin/env bash
# Runs the libFuzzer targets built in BUILD_DIR (make fuzz) for SECONDS each, FUZZ_JOBS
# (default: the cores) at a time, and prints executions per second and coverage per target.
#
#   fuzz/run.sh BUILD_DIR SECONDS [TARGET...]     (default: every fuzz/*_fuzzer.cc)
#
# Each target starts from its seed corpus (fuzz/corpus/<target>) and its kept crash inputs
# (fuzz/regressions/<target>), both read-only; what it finds goes to
# BUILD_DIR/fuzz-work/<target>/corpus. A crash, leak, sanitizer report, failed check or
# timeout fails the run; the input is left in BUILD_DIR/fuzz-work/<target>/ to be fixed and
# then kept in fuzz/regressions/<target>/, which `make test` replays.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
seconds=$2
shift 2
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/*_fuzzer.cc; do
    f=${f#fuzz/}
    targets+=("${f%_fuzzer.cc}")
  done
fi
jobs=${FUZZ_JOBS:-$(nproc)}
work=$build/fuzz-work

run_one() {
  local t=$1
  local dir=$work/$t
  mkdir -p "$dir/corpus" "fuzz/regressions/$t"
  rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*
  local code=0
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" "fuzz/corpus/$t" \
    "fuzz/regressions/$t" >"$dir/log" 2>&1 || code=$?
  echo "$code" >"$dir/exit"
}

mkdir -p "$work"
running=0
for t in "${targets[@]}"; do
  if [ ! -x "$build/fuzz/${t}_fuzzer" ]; then
    echo "no fuzz target $build/fuzz/${t}_fuzzer (make fuzz builds them)" >&2
    exit 2
  fi
  echo "fuzzing $t for ${seconds}s"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

failed=0
printf '\n%-18s %12s %10s %8s %8s %8s  %s\n' target executions "exec/s" cov ft corpus result
for t in "${targets[@]}"; do
  dir=$work/$t
  log=$dir/log
  code=$(cat "$dir/exit")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  # The last status line: "#N <event> cov: C ft: F corp: U/S ...".
  last=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  result=ok
  if [ "$code" != 0 ]; then
    result="FAILED (exit $code)"
    failed=1
  fi
  printf '%-18s %12s %10s %8s %8s %8s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "${cov:-?}" \
    "${ft:-?}" "${corp:-?}" "$result"
done
if [ "$failed" != 0 ]; then
  for t in "${targets[@]}"; do
    dir=$work/$t
    [ "$(cat "$dir/exit")" = 0 ] && continue
    echo
    echo "=== $t: $dir/log (last 60 lines)"
    tail -60 "$dir/log"
    ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* 2>/dev/null || true
  done
  exit 1
fi
