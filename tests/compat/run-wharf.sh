#!/bin/bash
# Runs the scenarios against a private wharfd and diffs the results with the RabbitMQ recording.
#
#   tests/compat/run-wharf.sh [WHARFD] [run.py options, e.g. --only NAME]
#
# WHARFD defaults to build-asan/src/server/wharfd (then build/src/server/wharfd). wharfd gets
# ephemeral loopback ports and a temporary data directory, and is stopped with SIGTERM at the
# end. Its log is scanned for sanitizer reports; the results stay in $OUT (default
# /tmp/wharf-compat-results.json) and the log in $LOG (default /tmp/wharf-compat-wharfd.log).
# Exit status: 0 when there is no unexplained difference, no sanitizer report and wharfd exited
# cleanly; 1 otherwise.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PY=/usr/bin/python3
wharfd="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$wharfd" ]; then
    for cand in "$root/build-asan/src/server/wharfd" "$root/build/src/server/wharfd"; do
        [ -x "$cand" ] && { wharfd="$cand"; break; }
    done
fi
[ -x "$wharfd" ] || { echo "no wharfd binary (give its path as the first argument)" >&2; exit 2; }
out="${OUT:-/tmp/wharf-compat-results.json}"
log="${LOG:-/tmp/wharf-compat-wharfd.log}"

tmp="$(mktemp -d /tmp/wharf-compat.XXXXXX)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
"$wharfd" --listen 127.0.0.1:0 --amqp-listen 127.0.0.1:0 --data-dir "$tmp/data" \
    --ready-file "$tmp/ready" > "$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; rm -rf "$tmp"' EXIT

port=""
for _ in $(seq 1 300); do
    port="$(sed -n 's/^amqp .*:\([0-9]*\)$/\1/p' "$tmp/ready" 2>/dev/null | head -n1)"
    [ -n "$port" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "wharfd did not start; its log:" >&2
    tail -n 50 "$log" >&2
    exit 1
fi
echo "wharfd $wharfd pid $pid amqp 127.0.0.1:$port" >&2

"$PY" "$here/run.py" --host 127.0.0.1 --port "$port" --out "$out" --broker "wharf" "$@"
alive=1
kill -0 $pid 2>/dev/null || alive=0
kill -TERM $pid 2>/dev/null
code=0
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
if kill -0 $pid 2>/dev/null; then
    echo "wharfd did not stop within 20 s of SIGTERM" >&2
    kill -KILL $pid
    code=1
fi
wait $pid 2>/dev/null
status=$?
trap 'rm -rf "$tmp"' EXIT

status_line="wharfd exit status $status"
[ $alive = 0 ] && { status_line="$status_line (it was gone before the run ended: crash?)"; code=1; }
[ $status -ne 0 ] && [ $status -ne 143 ] && code=1
echo "$status_line" >&2
if grep -q -E "ERROR: (Address|Leak|Undefined|Thread)Sanitizer|runtime error:|AddressSanitizer" "$log"; then
    echo "SANITIZER REPORT in $log:" >&2
    grep -n -E -A20 "ERROR: .*Sanitizer|runtime error:" "$log" | head -n 80 >&2
    code=1
fi

if [ -z "${ONLY_RUN:-}" ]; then
    "$PY" "$here/diff.py" "$here/rabbitmq-3.10.8.json" "$out" || code=1
fi
exit $code
