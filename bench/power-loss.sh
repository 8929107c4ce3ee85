#!/usr/bin/env bash
# The long power-loss run (issue 20; docs/testing.md, "Power loss"): the broker on the real
# store over a file system that forgets every unsynced byte at a power cut, cut at a random
# call of a random phase, CYCLES times (default 100), every promise checked after each boot.
# `make test` runs the same test with 6 cycles under ASan.
#
#   bench/power-loss.sh [CYCLES] [SEED]
#
# Builds the unit tests in Release first when $BUILD (default build-power) has none yet.
# In-process and on a temporary directory: no daemon, no port, no fsync (durability is what
# the simulated file system says), about 0.6 s per cycle on the 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-power}
tests=$build/tests/wharf_unit_tests
if [ ! -x "$tests" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DWHARF_BUILD_TESTS=ON -DWHARF_BUILD_BENCH=OFF >&2
  cmake --build "$build" --target wharf_unit_tests -j "$(nproc)" >&2
fi
cycles=${1:-100}
seed=${2:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
start=$(date +%s)
WHARF_POWER_CYCLES=$cycles WHARF_POWER_SEED=$seed "$tests" \
  --gtest_filter='PowerLossTest.*' 2>/dev/null | grep -v '^\[20'
echo "wall time: $(( $(date +%s) - start )) s"
