#!/usr/bin/env bash
# Priority queue figures for docs/benchmarks.md (docs/lifecycle.md, "Priorities"):
#   throughput  persistent confirmed publish and consume (1 producer, 1 consumer, confirm
#               window 1000, prefetch 1000, S seconds) through a queue without priorities and
#               through one with x-max-priority 9, messages cycling through the 10 levels;
#               then the same publish-only (no consumer: the queue deepens and pages), each
#               publish-only run on a wharfd of its own with an empty data directory (so no
#               run pays for removing the millions of messages the run before it left);
#               alternated for R rounds.
#   urgent      B persistent priority-0 messages into a queue with x-max-priority 9 (nearly all
#               paged to disk), then one of priority 9: how long until a consumer (basic.get
#               over AMQP, python3-pika) has it, and that it is the first delivered; wharfd's
#               RSS. On a wharfd of its own too.
#
#   make build && bench/priority.sh [seconds S] [rounds R] [backlog B]
#   default: seconds 15 rounds 3 backlog 10000000
#
# One wharfd on 127.0.0.1:5685 (AMQP 5686) with a throw-away data directory. Bounded: every
# wharf-perf run has --duration or --count. Needs about 300 bytes of disk per backlog message.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5685
amqp_port=5686
declare -A want=([seconds]=15 [rounds]=3 [backlog]=10000000)
while [ $# -ge 2 ]; do want[$1]=$2; shift 2; done
name=priority
source bench/common.sh

start "$work/data" --amqp-listen 127.0.0.1:$amqp_port

echo "throughput: ${want[seconds]} s per run, ${want[rounds]} rounds"
echo "round mode levels pub_rate cons_rate"
for round in $(seq "${want[rounds]}"); do
  for mode in pubsub publish; do
    for levels in 1 10; do
      flags=(--persistent --confirm 1000 --producers 1 --duration "${want[seconds]}" --delete
             --queue "prio-$mode-$levels-$round")
      if [ "$mode" = pubsub ]; then
        flags+=(--consumers 1 --prefetch 1000 --ack-every 100)
      else
        flags+=(--consumers 0)
        restart --amqp-listen 127.0.0.1:$amqp_port
      fi
      [ "$levels" = 10 ] && flags+=(--max-priority 9)
      out=$(perf_json "${flags[@]}")
      echo "$round $mode $levels $(echo "$out" | field pub_rate) $(echo "$out" | field cons_rate)"
    done
  done
done

echo "urgent: one priority-9 message behind ${want[backlog]} of priority 0"
restart --amqp-listen 127.0.0.1:$amqp_port
began=$(now_ms)
perf_json --persistent --confirm 1000 --producers 1 --consumers 0 --count "${want[backlog]}" \
  --max-priority 9 --priority 0 --queue urgent >/dev/null
echo "backlog published in $(( ($(now_ms) - began) / 1000 )) s; rss_mb $(rss_mb "$pid")"
perf_json --persistent --confirm 1 --producers 1 --consumers 0 --count 1 --max-priority 9 \
  --priority 9 --queue urgent >/dev/null
/usr/bin/python3 - "$amqp_port" <<'PY'
import sys, time
import pika
conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(sys.argv[1])))
ch = conn.channel()
began = time.monotonic()
while True:
    method, props, body = ch.basic_get("urgent")
    if method is not None:
        break
    time.sleep(0.001)
print("first delivered: priority %d after %.1f ms (basic.get, %d still ready)"
      % (props.priority or 0, (time.monotonic() - began) * 1000, method.message_count))
conn.close()
PY
echo "rss_mb at the end: $(rss_mb "$pid"); store: $(du -sm "$work/data/store" | cut -f1) MB"
