#!/usr/bin/env bash
# TLS cost for docs/benchmarks.md (docs/security.md, "TLS"): persistent confirmed publish
# (1 producer, confirm window 1000, 256-byte bodies, S seconds) to the clear-text native
# listener and to the TLS one of the same wharfd, alternated for R rounds; "publish" has no
# consumer, "pubsub" one consumer (prefetch 1000, ack every 100). With wharfd's CPU time per
# message (user + system, from /proc). Certificates: tests/integration/tls/make-certs.sh.
#
#   make build && bench/tls.sh [seconds S] [rounds R]
#   default: seconds 15 rounds 3
#
# One wharfd on 127.0.0.1:5688 (TLS on 5689) with a throw-away data directory. Bounded: every
# wharf-perf run has --duration.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
port=5688
tls_port=5689
declare -A want=([seconds]=15 [rounds]=3)
while [ $# -ge 2 ]; do want[$1]=$2; shift 2; done
name=tls
source bench/common.sh

tests/integration/tls/make-certs.sh "$work/certs"
cat >"$work/wharfd.toml" <<CONFIG
[tls]
listen = "127.0.0.1:$tls_port"
cert = "$work/certs/server.pem"
key = "$work/certs/server.key"
CONFIG
start "$work/data" --config "$work/wharfd.toml"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
echo "${want[seconds]} s per run, ${want[rounds]} rounds"
echo "round kind transport rate wharfd_cpu_us_per_msg"
for round in $(seq "${want[rounds]}"); do
  for kind in publish pubsub; do
    for transport in plain tls; do
      flags=(--persistent --confirm 1000 --producers 1 --duration "${want[seconds]}" --delete
             --queue "tls-$kind-$transport-$round")
      if [ "$kind" = publish ]; then flags+=(--consumers 0); else
        flags+=(--consumers 1 --prefetch 1000 --ack-every 100); fi
      if [ "$transport" = tls ]; then
        flags+=(--server 127.0.0.1:$tls_port --tls --ca "$work/certs/ca.pem")
      else
        flags+=(--server 127.0.0.1:$port)
      fi
      before=$(cpu_ticks)
      out=$("$perf" --json "${flags[@]}" | tail -1)
      ticks=$(($(cpu_ticks) - before))
      rate=$(echo "$out" | field pub_rate)
      cpu=$(echo "$out" | python3 -c "import json,sys,os; j=json.loads(sys.stdin.read()); \
print(round($ticks * 1e6 / os.sysconf('SC_CLK_TCK') / max(j['published'], 1), 2))")
      echo "$round $kind $transport $rate $cpu"
    done
  done
done
