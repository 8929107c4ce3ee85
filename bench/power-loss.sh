#!/usr/bin/env bash
# The long power-loss run (issue 20; docs/testing.md, "Power loss"): the broker on the real
# store over a file system that forgets every unsynced byte at a power cut, cut at a random
# call of a random phase, CYCLES times (default 100), every promise checked after each boot.
# `make test` runs the same test with 6 cycles under ASan.
#
#   make build-default && bench/power-loss.sh [CYCLES] [SEED]
#
# In-process and on a temporary directory: no daemon, no port, no fsync (durability is what
# the simulated file system says), about 0.6 s per cycle on the 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-default}
tests=$build/tests/wharf_unit_tests
[ -x "$tests" ] || { echo "missing $tests: run 'make build-default' first" >&2; exit 1; }
cycles=${1:-100}
seed=${2:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
start=$(date +%s)
WHARF_POWER_CYCLES=$cycles WHARF_POWER_SEED=$seed "$tests" \
  --gtest_filter='PowerLossTest.*' 2>/dev/null | grep -v '^\[20'
echo "wall time: $(( $(date +%s) - start )) s"
