#!/usr/bin/env bash
# Start-up figures for docs/storage.md ("Priority lanes"):
#   start   how long wharfd takes from its start to its ready file (--ready-file: the store
#           opened and recovered, the listeners up), on an empty data directory and again on
#           the directory it left, N times each; the store's column families are made or
#           opened, and RocksDB writes and parses back its OPTIONS file, at every start.
#   lanes   the confirm time of the first message of each priority into a new queue with
#           x-max-priority 9 (the first message of a lane makes the lane's column family
#           before its write) against a second message of each (python3-pika, one publish at
#           a time with publisher confirms, persistent).
#
#   make build && bench/startup.sh [starts N]
#   default: starts 6
#
# wharfd on 127.0.0.1:5687 (AMQP 5688) with a throw-away data directory.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5687
amqp_port=5688
declare -A want=([starts]=6)
while [ $# -ge 2 ]; do want[$1]=$2; shift 2; done
name=startup
source bench/common.sh

stop() { kill "$pid" && wait "$pid" 2>/dev/null || true; pid=; }
# timed_start DATA_DIR: starts wharfd ($pid) and sets $took, the milliseconds until it was
# ready (not in a subshell: $pid must reach stop).
timed_start() {
  local from
  from=$(now_ms)
  start "$1" --amqp-listen 127.0.0.1:$amqp_port
  took=$(($(now_ms) - from))
}

empty=()
again=()
for ((i = 1; i <= want[starts]; i++)); do
  rm -rf "$work/data"
  timed_start "$work/data"
  empty+=("$took")
  stop
  timed_start "$work/data"
  again+=("$took")
  stop
done
echo "start, empty data directory: ${empty[*]} ms"
echo "start, the directory left:   ${again[*]} ms"

rm -rf "$work/data"
start "$work/data" --amqp-listen 127.0.0.1:$amqp_port
# Debian's python3, which has python3-pika (another python3 may come first in PATH).
/usr/bin/python3 - "$amqp_port" <<'PY'
import sys, time
import pika
params = pika.ConnectionParameters("127.0.0.1", int(sys.argv[1]),
                                   credentials=pika.PlainCredentials("guest", "guest"))
connection = pika.BlockingConnection(params)
channel = connection.channel()
channel.confirm_delivery()
channel.queue_declare(queue="lanes", durable=True, arguments={"x-max-priority": 9})
for which in ("first", "second"):
    took = []
    for priority in range(10):
        started = time.perf_counter()
        channel.basic_publish("", "lanes", b"x" * 256,
                              pika.BasicProperties(delivery_mode=2, priority=priority))
        took.append((time.perf_counter() - started) * 1000)
    print(f"{which} message of priorities 0-9, confirmed in: "
          + " ".join(f"{t:.1f}" for t in took) + " ms")
connection.close()
PY
stop
