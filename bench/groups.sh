#!/usr/bin/env bash
# Message group figures for docs/benchmarks.md (docs/lifecycle.md, "Message groups"):
# persistent confirmed publish and consume (P producers, confirm window 1000; 8 consumers,
# prefetch 100, ack every message) through a queue without groups and through one with
# x-message-groups, the messages spread over G groups (wharf-perf --groups); alternated for R
# rounds of S seconds. Then the queue's groups as wharfctl shows them, mid-run. Then scale:
# 2*M messages published into one queue (no consumer; most of it paged to disk), spread over M
# groups, and drained by 8 consumers; the same without groups beside it; wharfd's RSS after
# the publish and at its peak, the drain's rate, and wharfctl's view of the groups mid-drain.
#
#   make build && bench/groups.sh [seconds S] [rounds R] [groups G] [producers P] [scale M]
#   default: seconds 15 rounds 3 groups 100000 producers 2 scale 1000000 (scale 0: skip)
#
# One wharfd on 127.0.0.1:5687 with a throw-away data directory. Bounded: every wharf-perf run
# has --duration.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5687
declare -A want=([seconds]=15 [rounds]=3 [groups]=100000 [producers]=2 [scale]=1000000)
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

[ "${want[scale]}" = 0 ] && exit 0
count=$((2 * want[scale]))
echo "scale: $count messages over ${want[scale]} groups, then drained by 8 consumers"
echo "queue rss_mb_published drain_rate rss_mb_peak"
for groups in 0 "${want[scale]}"; do
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  rm -rf "$work/data"
  start "$work/data"
  flags=(--persistent --queue "scale-$groups")
  [ "$groups" != 0 ] && flags+=(--groups "$groups")
  perf_json "${flags[@]}" --confirm 1000 --producers 1 --consumers 0 --count "$count" >/dev/null
  published=$(rss_mb "$pid")
  "$perf" --server 127.0.0.1:$port --json "${flags[@]}" --producers 0 --consumers 8 \
    --prefetch 100 --count "$count" --duration 1800 >"$work/drain.json" 2>&1 &
  run=$!
  if [ "$groups" != 0 ]; then
    sleep 5
    "$ctl" --server 127.0.0.1:$port queue show "scale-$groups" | grep -E "^(ready|groups)" || true
  fi
  wait "$run"
  rate=$(tail -1 "$work/drain.json" | field cons_rate)
  echo "$groups $published $rate $(awk '/VmHWM/ {printf "%.0f", $2/1024}' "/proc/$pid/status")"
done
