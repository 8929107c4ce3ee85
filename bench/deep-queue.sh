#!/usr/bin/env bash
# Deep-queue figures for docs/benchmarks.md: broker RSS and disk per queued message, restart
# time with a deep queue (kill -9, then time until the first message is delivered), and the
# drain rate of the whole backlog.
#
#   make build && bench/deep-queue.sh [COUNT...]      default: 1000000 10000000
#
# One wharfd on 127.0.0.1:5682 with a throw-away data directory per count; 256-byte persistent
# messages published by wharf-perf with confirms. Bounded: every wharf-perf run has --count and
# --duration. Needs about 100 bytes of disk per message.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5682
counts=("$@")
[ ${#counts[@]} -eq 0 ] && counts=(1000000 10000000)
name=deep
source bench/common.sh

printf '%-10s %-28s %s\n' count figure value
for n in "${counts[@]}"; do
  data=$work/data-$n
  start "$data"
  "$perf" --server 127.0.0.1:$port --queue deep --persistent --confirm 1000 --producers 2 \
    --consumers 0 --count "$n" --duration 1800 | grep '^RESULT' | sed "s/^/  publish: /"
  sleep 2
  rss=$(rss_mb $pid)
  disk=$(du -sb "$data" | cut -f1)
  printf '%-10s %-28s %s MB\n' "$n" "rss with the backlog" "$rss"
  printf '%-10s %-28s %s bytes\n' "$n" "disk per message" "$((disk / n))"

  kill -9 $pid; wait $pid 2>/dev/null || true
  t0=$(now_ms)
  start "$data"
  t1=$(now_ms)
  "$ctl" --server 127.0.0.1:$port consume deep --count 1 --requeue --wait 60 >/dev/null
  t2=$(now_ms)
  printf '%-10s %-28s %s ms\n' "$n" "restart to listening" "$((t1 - t0))"
  printf '%-10s %-28s %s ms\n' "$n" "restart to first delivery" "$((t2 - t0))"
  printf '%-10s %-28s %s MB\n' "$n" "rss after restart" "$(rss_mb $pid)"
  # The exact count arrives in the background; wait for it before draining.
  for _ in $(seq 1 600); do
    grep -q "queue=deep counted" "$work/wharfd.log" && break
    sleep 0.1
  done
  t3=$(now_ms)
  printf '%-10s %-28s %s ms\n' "$n" "restart to exact count" "$((t3 - t0))"
  line=$("$perf" --server 127.0.0.1:$port --queue deep --persistent --producers 0 --consumers 1 \
    --prefetch 100 --count "$n" --duration 1800 | grep '^RESULT')
  echo "  drain: $line"
  printf '%-10s %-28s %s MB\n' "$n" "peak rss (whole run)" \
    "$(awk '/VmHWM/ {printf "%.0f", $2/1024}' /proc/$pid/status)"
  kill -9 $pid; wait $pid 2>/dev/null || true
  pid=
  : > "$work/wharfd.log"
  rm -rf "$data"
done
