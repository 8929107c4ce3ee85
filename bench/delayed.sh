#!/usr/bin/env bash
# Delayed-delivery figures for docs/benchmarks.md (docs/scheduler.md):
#   pending  N delayed persistent messages (a day ahead): schedules per second end to end,
#            broker RSS and disk per message, then kill -9 and restart: time to listening,
#            RSS, time until the delayed count is exact;
#   lateness a steady R messages per second falling due (delay 2 s): delivery minus due time;
#   burst    B messages that fell due while the broker was down, released at start-up while a
#            live queue runs at 2,000 msg/s: the burst's drain time and the live queue's latency.
#
#   make build && bench/delayed.sh [pending N] [lateness R] [burst B]
#   default: pending 10000000 lateness 10000 burst 1000000
#
# One wharfd on 127.0.0.1:5683 with a throw-away data directory per scenario. Bounded: every
# wharf-perf run has --count and/or --duration. Needs about 400 bytes of disk per pending message.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5683
declare -A want=([pending]=10000000 [lateness]=10000 [burst]=1000000)
if [ $# -gt 0 ]; then
  want=()
  while [ $# -ge 2 ]; do want[$1]=$2; shift 2; done
fi
name=delayed
source bench/common.sh

stop() {
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
}
ctl() { "$ctl" --server 127.0.0.1:$port "$@"; }

if [ -n "${want[pending]:-}" ]; then
  n=${want[pending]}
  data=$work/pending
  start "$data"
  echo "== pending: $n persistent messages delayed by one day"
  "$perf" --server 127.0.0.1:$port --queue later --persistent --confirm 1000 --producers 2 \
    --consumers 0 --delay 86400000 --count "$n" --duration 1800 | grep '^RESULT' |
    sed 's/^/  publish: /'
  sleep 2
  echo "  rss with $n pending: $(rss_mb $pid) MB"
  echo "  disk per message: $(($(du -sb "$data" | cut -f1) / n)) bytes"
  ctl queues --json | grep -o '"delayed": *[0-9]*' | sed 's/^/  /'
  stop
  t0=$(now_ms)
  start "$data"
  t1=$(now_ms)
  echo "  restart to listening: $((t1 - t0)) ms"
  echo "  rss after restart: $(rss_mb $pid) MB"
  for _ in $(seq 1 1200); do
    grep -q "queue=later counted .* delayed" "$work/wharfd.log" && break
    sleep 0.1
  done
  echo "  restart to exact delayed count: $(($(now_ms) - t0)) ms"
  ctl queues --json | grep -o '"delayed": *[0-9]*' | sed 's/^/  /'
  ctl delayed list later -n 2 | sed 's/^/  /'
  echo "  rss when counted: $(rss_mb $pid) MB; peak $(awk '/VmHWM/ {printf "%.0f", $2/1024}' \
    /proc/$pid/status) MB"
  stop
  rm -rf "$data"
  : >"$work/wharfd.log"
fi

if [ -n "${want[lateness]:-}" ]; then
  r=${want[lateness]}
  data=$work/lateness
  start "$data"
  echo "== lateness: $r msg/s delayed by 2 s, persistent, for 30 s"
  "$perf" --server 127.0.0.1:$port --queue late --persistent --confirm 1000 --rate "$r" \
    --delay 2000 --duration 40 --count $((r * 30)) | grep -E '^RESULT|lateness' |
    sed 's/^/  /' || true
  stop
  rm -rf "$data"
fi

if [ -n "${want[burst]:-}" ]; then
  b=${want[burst]}
  data=$work/burst
  start "$data"
  echo "== burst: $b persistent messages due while the broker is down"
  "$perf" --server 127.0.0.1:$port --queue burst --persistent --confirm 1000 --producers 2 \
    --consumers 0 --delay 30000 --count "$b" --duration 600 | grep '^RESULT' |
    sed 's/^/  publish: /' || true
  ctl declare-queue live >/dev/null
  stop
  sleep 31  # every message falls due while the broker is down
  t0=$(now_ms)
  start "$data"
  # The live queue runs beside the release; the burst queue is drained by one consumer.
  "$perf" --server 127.0.0.1:$port --queue live --persistent --confirm 100 --rate 2000 \
    --duration 15 --count 30000 >"$work/live.txt" 2>/dev/null &
  live=$!
  "$perf" --server 127.0.0.1:$port --queue burst --persistent --producers 0 --consumers 1 \
    --count "$b" --duration 600 2>/dev/null | grep '^RESULT' | sed 's/^/  burst drain: /' || true
  echo "  restart to burst drained: $(($(now_ms) - t0)) ms"
  wait $live || true
  grep '^RESULT' "$work/live.txt" | sed 's/^/  live queue meanwhile: /'
  stop
  rm -rf "$data"
fi
