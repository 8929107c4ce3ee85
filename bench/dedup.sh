#!/usr/bin/env bash
# Publish deduplication figures for docs/benchmarks.md (docs/lifecycle.md, "Deduplication"):
#   throughput  persistent confirmed publish (P producers, each with keys of its own: the
#               run's start time and its number, then its sequence number; confirm window
#               1000, no consumer, S seconds) into a queue without a window ("off"), the same with every publish
#               carrying its own deduplication_id ("keys": what the key costs), into one with a
#               5-minute window and the keys ("on"), and the same with each key in the
#               message's x-deduplication-header instead ("header"), and "on" with keys in no
#               order, like UUIDs or hashes ("random"), or in byte order, zero-padded like
#               ULIDs ("ordered": the bare sequence numbers of "on" are not in byte order;
#               both run only when named in KINDS); the kinds in KINDS (default "off keys on
#               header") alternated for R rounds.
#               Each run on a wharfd of its own with an empty data directory, so that none
#               pays for the flushes and compactions of the one before it. With wharfd's CPU
#               time per message (user + system, from /proc) and, for a window, the store's
#               counters at the end (wharf_store_dedup_*: keys read, keys found new in a
#               stream unread, streams learnt; docs/operations.md).
#   window      K keys published and consumed through one queue with a 7-day window (the queue
#               stays near empty, the keys stay): wharfd's RSS and the store's size every 10 s.
#
#   make build && bench/dedup.sh [seconds S] [rounds R] [keys K] [kinds "KIND ..."] [producers P]
#   default: seconds 15 rounds 3 keys 10000000 kinds "off keys on header" producers 1
#
# wharfd on 127.0.0.1:5684, one per run, with a throw-away data directory. Bounded: every
# wharf-perf run has --duration or --count. Needs about 60 bytes of disk per key.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5684
declare -A want=([seconds]=15 [rounds]=3 [keys]=10000000 [kinds]="off keys on header"
                 [producers]=1)
while [ $# -ge 2 ]; do want[$1]=$2; shift 2; done
name=dedup
source bench/common.sh

echo "throughput: ${want[producers]} producers, ${want[seconds]} s per run, ${want[rounds]} rounds"
echo "round window pub_rate conf_p99_us wharfd_cpu_us_per_msg [reads stream_keys streams]"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
metrics=$((port + 1))
dedup_counters() {
  python3 -c "import urllib.request; print(' '.join(l.split()[0][18:-6] + '=' + l.split()[1] \
for l in urllib.request.urlopen('http://127.0.0.1:$metrics/metrics').read().decode().splitlines() \
if l.split(' ')[0] in ('wharf_store_dedup_reads_total', 'wharf_store_dedup_stream_keys_total', \
'wharf_store_dedup_streams_total')))"
}
for round in $(seq "${want[rounds]}"); do
  for window in ${want[kinds]}; do
    flags=(--persistent --confirm 1000 --producers "${want[producers]}" --consumers 0
           --duration "${want[seconds]}" --delete --queue "dedup-$window-$round")
    [ "$window" = keys ] && flags+=(--dedup-keys)
    [ "$window" = on ] && flags+=(--dedup-window 300000)
    [ "$window" = header ] && flags+=(--dedup-window 300000 --dedup-header)
    [ "$window" = random ] && flags+=(--dedup-window 300000 --dedup-random)
    [ "$window" = ordered ] && flags+=(--dedup-window 300000 --dedup-ordered)
    restart --metrics-listen 127.0.0.1:$metrics --amqp-listen off
    before=$(cpu_ticks)
    out=$(perf_json "${flags[@]}")
    ticks=$(($(cpu_ticks) - before))
    cpu=$(echo "$out" | python3 -c "import json,sys,os; j=json.loads(sys.stdin.read()); \
print(round($ticks * 1e6 / os.sysconf('SC_CLK_TCK') / max(j['published'], 1), 2))")
    counters=
    case $window in off | keys) ;; *) counters=$(dedup_counters) ;; esac
    echo "$round $window $(echo "$out" | field pub_rate) $(echo "$out" | field conf_p99_us) $cpu" \
      $counters
  done
done

echo "window: ${want[keys]} keys through a queue with a 7-day window"
restart --amqp-listen off
echo "seconds rss_mb store_mb"
began=$(now_ms)
"$perf" --server 127.0.0.1:$port --persistent --confirm 1000 --producers 1 --consumers 1 \
  --prefetch 1000 --ack-every 100 --count "${want[keys]}" --dedup-window 604800000 \
  --queue window --json >"$work/window.json" 2>&1 &
run=$!
while kill -0 "$run" 2>/dev/null; do
  sleep 10
  echo "$(( ($(now_ms) - began) / 1000 )) $(rss_mb "$pid") $(du -sm "$work/data/store" | cut -f1)"
done
wait "$run"
tail -1 "$work/window.json" | python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print('window run: pub_rate', j['pub_rate'], 'cons_rate', j['cons_rate'], 'errors', j['errors'])"
echo "rss_mb at the end: $(rss_mb "$pid"); store: $(du -sm "$work/data/store" | cut -f1) MB"
