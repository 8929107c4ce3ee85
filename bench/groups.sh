#!/usr/bin/env bash
# Message group figures for docs/benchmarks.md (docs/lifecycle.md, "Message groups"):
# persistent confirmed publish and consume (P producers, confirm window 1000; 8 consumers,
# prefetch 100, ack every message) through a queue without groups and through one with
# x-message-groups, the messages spread over G groups (wharf-perf --groups); alternated for R
# rounds of S seconds. Then the queue's groups as wharfctl shows them, mid-run.
#
#   make build && bench/groups.sh [seconds S] [rounds R] [groups G] [producers P]
#   default: seconds 15 rounds 3 groups 100000 producers 2
#
# One wharfd on 127.0.0.1:5687 with a throw-away data directory. Bounded: every wharf-perf run
# has --duration.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5687
declare -A want=([seconds]=15 [rounds]=3 [groups]=100000 [producers]=2)
while [ $# -ge 2 ]; do want[$1]=$2; shift 2; done
name=groups
source bench/common.sh

start "$work/data"
echo "${want[seconds]} s per run, ${want[rounds]} rounds, ${want[producers]} producers, 8 consumers"
echo "round groups pub_rate cons_rate"
for round in $(seq "${want[rounds]}"); do
  for groups in 0 "${want[groups]}"; do
    flags=(--persistent --confirm 1000 --producers "${want[producers]}" --consumers 8
           --prefetch 100 --duration "${want[seconds]}" --delete --queue "groups-$groups-$round")
    [ "$groups" != 0 ] && flags+=(--groups "$groups")
    out=$(perf_json "${flags[@]}")
    echo "$round $groups $(echo "$out" | field pub_rate) $(echo "$out" | field cons_rate)"
  done
done

echo "mid-run: wharfctl queue show of a queue with ${want[groups]} groups"
"$perf" --server 127.0.0.1:$port --persistent --confirm 1000 --producers "${want[producers]}" \
  --consumers 8 --prefetch 100 --duration 6 --groups "${want[groups]}" --queue shown \
  >/dev/null 2>&1 &
run=$!
sleep 4
"$ctl" --server 127.0.0.1:$port queue show shown | grep -E "^(ready|groups|in flight)" || true
wait "$run"
