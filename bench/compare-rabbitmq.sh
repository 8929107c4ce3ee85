#!/usr/bin/env bash
# Runs the same wharf-perf scenarios against wharfd (over its native protocol, and over AMQP
# 0-9-1 with the same AMQP driver, rabbitmq-c, that drives RabbitMQ) and RabbitMQ on this
# machine, one after the other, and prints one table: each figure for each, the ratio
# Wharf / RabbitMQ (native, and over AMQP) and Wharf's AMQP path against its native one.
#
#   bench/compare-rabbitmq.sh [--quick] [--amqp-writes batched|each] [--build-dir DIR] [--out FILE]
#
# --amqp-writes is the AMQP driver's (wharf-perf --amqp-writes): batched (the default) writes
# many publishes and acks per send(), as Wharf's native client does, so that the AMQP columns
# measure the brokers rather than rabbitmq-c's three send() calls per publish; each is
# rabbitmq-c's own amqp_basic_publish / amqp_basic_ack. Both AMQP columns use the same mode.
#
# Installs rabbitmq-server, fio and iperf3 from Debian if missing (needs root or sudo), starts
# RabbitMQ on 127.0.0.1 only with a throw-away data dir, starts wharfd on 127.0.0.1, measures the
# machine's limits (fsync latency, loopback bandwidth), runs the scenarios, stops both brokers.
# Bounded: about 10 minutes by default, under 4 with --quick. All traffic stays on 127.0.0.1.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
quick=0
out=""
amqp_writes=batched
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --build-dir) build="$2"; shift ;;
    --out) out="$2"; shift ;;
    --amqp-writes) amqp_writes="$2"; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
perf="$build/bench/wharf-perf"
wharfd="$build/src/server/wharfd"
[ -x "$perf" ] && [ -x "$wharfd" ] || { echo "build first: make build" >&2; exit 2; }

sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
missing=""
for p in rabbitmq-server fio iperf3; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

if [ $quick = 1 ]; then d=6; backlog=100000; long=8; lat=4; else d=20; backlog=500000; long=30; lat=10; fi

work=$(mktemp -d /tmp/wharf-compare-XXXXXX)
chmod 755 "$work"
cleanup() {
  [ -n "${wharfd_pid:-}" ] && kill "$wharfd_pid" 2>/dev/null && wait "$wharfd_pid" 2>/dev/null || true
  if [ -n "${rabbit_started:-}" ]; then
    RABBITMQ_NODENAME=wharfbench@localhost rabbitmqctl -n wharfbench@localhost stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== machine limits ($(date -u +%Y-%m-%d), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB)"
fio --name=fsync --directory="$work" --rw=write --bs=4k --size=16m --fsync=1 \
    --ioengine=sync --runtime=5 --time_based=0 --output-format=json > "$work/fio.json" 2>/dev/null || true
python3 - "$work/fio.json" <<'PY' || true
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
s = j.get("sync", {})
p = s.get("lat_ns", {}).get("percentile", {})
print("fsync latency (fio, 4k write + fsync): p50 %.0f us  p99 %.0f us  (%d fsyncs)" % (
    p.get("50.000000", 0) / 1000, p.get("99.000000", 0) / 1000, s.get("total_ios", 0)))
PY
iperf3 -s -B 127.0.0.1 -p 5299 -1 >/dev/null 2>&1 &
sleep 0.5
iperf3 -c 127.0.0.1 -p 5299 -t 3 -J 2>/dev/null | python3 -c \
  'import json,sys; j=json.load(sys.stdin); print("loopback TCP bandwidth (iperf3, 1 stream): %.1f Gbit/s" % (j["end"]["sum_received"]["bits_per_second"]/1e9))' || true

echo "== starting RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server) on 127.0.0.1:5672"
export RABBITMQ_NODENAME=wharfbench@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
export RABBITMQ_NODE_PORT=5672 RABBITMQ_DIST_PORT=25672 ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_MNESIA_BASE="$work/rabbit/mnesia" RABBITMQ_LOG_BASE="$work/rabbit/log"
export RABBITMQ_CONFIG_FILE="$work/rabbit/rabbitmq" RABBITMQ_ENABLED_PLUGINS_FILE="$work/rabbit/plugins"
mkdir -p "$work/rabbit/mnesia" "$work/rabbit/log"
printf 'loopback_users.guest = true\nlisteners.tcp.default = 127.0.0.1:5672\n' > "$work/rabbit/rabbitmq.conf"
echo '[].' > "$work/rabbit/plugins"
chown -R rabbitmq:rabbitmq "$work/rabbit" 2>/dev/null || true
rabbitmq-server > "$work/rabbit/stdout.log" 2>&1 &
rabbit_started=1
# await_startup fails at once while the node is not reachable yet: retry for up to 90 s.
deadline=$((SECONDS + 90))
until rabbitmqctl -n wharfbench@localhost await_startup >/dev/null 2>&1; do
  [ $SECONDS -lt $deadline ] || { echo "RabbitMQ did not start:"; tail -20 "$work/rabbit/stdout.log"; exit 1; }
  sleep 1
done

echo "== starting wharfd on 127.0.0.1:5681 (AMQP on 127.0.0.1:5682)"
"$wharfd" --listen 127.0.0.1:5681 --amqp-listen 127.0.0.1:5682 --data-dir "$work/wharf" \
  --log-level warn 2> "$work/wharfd.log" &
wharfd_pid=$!
sleep 0.5

# run NAME ARGS...: runs the scenario on both brokers, keeps the RESULT lines.
results="$work/results.txt"
: > "$results"
# target BROKER: wharf-perf's flags to reach it.
target() {
  case $1 in
    wharf) echo --driver native --server 127.0.0.1:5681 ;;
    wharf-amqp) echo --driver amqp --amqp-writes "$amqp_writes" --uri amqp://guest:guest@127.0.0.1:5682/ ;;
    rabbitmq) echo --driver amqp --amqp-writes "$amqp_writes" --uri amqp://guest:guest@127.0.0.1:5672/ ;;
  esac
}
brokers="wharf wharf-amqp rabbitmq"
# settle: waits (at most 60 s) until the machine is idle, 90% over one second, so that one
# broker's background work after its run (Wharf's compactions of the messages just deleted,
# RabbitMQ's) does not land in the next broker's run.
settle() {
  local deadline=$((SECONDS + 60)) a b
  while [ $SECONDS -lt $deadline ]; do
    read -r -a a < <(head -1 /proc/stat)
    sleep 1
    read -r -a b < <(head -1 /proc/stat)
    local total=0 i
    for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
    local idle=$((b[4] - a[4] + b[5] - a[5]))
    [ $total -gt 0 ] && [ $((idle * 100 / total)) -ge 90 ] && return 0
  done
}
run() {
  local name=$1; shift
  for broker in $brokers; do
    settle
    local target
    read -r -a target <<< "$(target $broker)"
    local line
    line=$("$perf" "${target[@]}" --queue "bench-$name" "$@" 2>/dev/null | grep '^RESULT' || true)
    echo "$name $broker ${line#RESULT }" >> "$results"
    echo "  $name / $broker: ${line#RESULT }"
  done
}

echo "== scenarios (256-byte bodies; AMQP driver writes: $amqp_writes)"
run persistent-confirm-1p --persistent --confirm 1000 --producers 1 --consumers 0 --duration $d --delete
run persistent-confirm-4p --persistent --confirm 1000 --producers 4 --consumers 0 --duration $d --delete
# Transient, with confirms so that neither broker is flooded past what it can hold in memory.
run transient-1p1c --confirm 1000 --producers 1 --consumers 1 --duration $d --delete
# Drain: fill a persistent backlog (publishers with confirms), then consume it (prefetch 100, ack each).
for broker in $brokers; do
  settle
  read -r -a target <<< "$(target $broker)"
  "$perf" "${target[@]}" --queue bench-drain --persistent --confirm 1000 --producers 2 \
    --consumers 0 --count $backlog >/dev/null 2>&1
  settle
  line=$("$perf" "${target[@]}" --queue bench-drain --persistent --producers 0 --consumers 1 \
    --prefetch 100 --count $backlog --duration 120 --delete 2>/dev/null | grep '^RESULT' || true)
  # The drain run publishes nothing; its consume rate is the figure.
  echo "drain-backlog $broker ${line#RESULT }" >> "$results"
  echo "  drain-backlog / $broker: ${line#RESULT }"
done
run sustained-1p1c --persistent --confirm 1000 --producers 1 --consumers 1 --duration $long --delete
run latency-confirm-1 --persistent --confirm 1 --producers 1 --consumers 0 --duration $lat --delete

echo
python3 - "$results" <<'PY' | tee ${out:+"$out"}
import sys
rows = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) < 2: continue
    kv = dict(p.split("=", 1) for p in parts[2:] if "=" in p)
    rows.setdefault(parts[0], {})[parts[1]] = kv
metrics = {
    "persistent-confirm-1p": [("pub_rate", "msg/s", True), ("conf_p99_us", "us p99", False)],
    "persistent-confirm-4p": [("pub_rate", "msg/s", True), ("conf_p99_us", "us p99", False)],
    "transient-1p1c": [("pub_rate", "msg/s", True), ("cons_rate", "msg/s", True)],
    "drain-backlog": [("cons_rate", "msg/s", True)],
    "sustained-1p1c": [("pub_rate", "msg/s", True), ("cons_rate", "msg/s", True),
                       ("e2e_p99_us", "us p99", False)],
    "latency-confirm-1": [("conf_p50_us", "us p50", False), ("conf_p99_us", "us p99", False)],
}
def verdict(w, b, higher):
    if not (w and b):
        return "n/a"
    if higher:
        return f"{w / b:.1f}x faster" if w >= b else f"{b / w:.1f}x slower"
    return f"{b / w:.1f}x lower" if w <= b else f"{w / b:.1f}x higher"

print("| scenario | figure | Wharf (native) | Wharf over AMQP | RabbitMQ "
      "| Wharf / RabbitMQ | Wharf over AMQP / RabbitMQ | AMQP / native |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, ms in metrics.items():
    r = rows.get(name, {})
    for key, unit, higher in ms:
        w = float(r.get("wharf", {}).get(key, 0) or 0)
        a = float(r.get("wharf-amqp", {}).get(key, 0) or 0)
        b = float(r.get("rabbitmq", {}).get(key, 0) or 0)
        ratio = f"{a / w:.2f}" if a and w else "n/a"
        print(f"| {name} | {key} ({unit}) | {w:,.0f} | {a:,.0f} | {b:,.0f} | "
              f"{verdict(w, b, higher)} | {verdict(a, b, higher)} | {ratio} |")
    errs = [r.get(x, {}).get("errors", "?") for x in ("wharf", "wharf-amqp", "rabbitmq")]
    if errs != ["0", "0", "0"]:
        print(f"| {name} | errors | {errs[0]} | {errs[1]} | {errs[2]} | | | |")
PY
