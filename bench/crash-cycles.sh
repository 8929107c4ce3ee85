#!/usr/bin/env bash
# The crash test at length, for docs/testing.md (docs/storage.md, "kill -9"):
# Durability.KillNineUnderLoadLosesNoConfirmedMessage (tests/integration/crash_cycles_test.cc)
# with WHARF_CRASH_CYCLES kills of wharfd under publish + consume + delayed + dead-letter load,
# on a Release build. `make test` runs the same test with its default 20 kills on the ASan build.
#
#   bench/crash-cycles.sh [CYCLES]      default 100 (about a minute on 2 cores, once built)
#   WHARF_CRASH_SEED=N bench/crash-cycles.sh   repeats a run's kill points and due times
#
# Builds what it needs in build-crash/ (Release, tests on; BUILD=DIR uses another configured
# Release build with tests on), then runs the one test and prints its figures, the wall time
# and the command. Exits with the test's status. wharfd runs on 127.0.0.1, port 0, in a
# temporary directory (kept, with its log, when the test fails).
set -euo pipefail
cd "$(dirname "$0")/.."
cycles=${1:-100}
build=${BUILD:-build-crash}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DWHARF_BUILD_TESTS=ON \
    -DWHARF_BUILD_BENCH=OFF -DWHARF_WERROR=ON >/dev/null
fi
type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
if [ "$type" != Release ]; then
  echo "$build is a '$type' build, not Release: the figures would not be comparable" >&2
  exit 2
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target wharfd wharf_integration_tests >/dev/null

test=Durability.KillNineUnderLoadLosesNoConfirmedMessage
command="WHARF_CRASH_CYCLES=$cycles${WHARF_CRASH_SEED:+ WHARF_CRASH_SEED=$WHARF_CRASH_SEED}"
command+=" $build/tests/wharf_integration_tests --gtest_filter=$test"
echo "== $(git describe --always --dirty), $(nproc) cores: $command"
started=$(date +%s%3N)
set +e
WHARF_CRASH_CYCLES=$cycles "$build/tests/wharf_integration_tests" --gtest_filter="$test" \
  --gtest_color=no 2>&1 | grep -v '^\[\|^Running main\|^Note: \|^$'
status=${PIPESTATUS[0]}
set -e
wall=$(awk -v ms=$(($(date +%s%3N) - started)) 'BEGIN { printf "%.1f", ms / 1000 }')
echo "== wall time $wall s; $([ "$status" = 0 ] && echo passed || echo FAILED)"
exit "$status"
