# Shared by the bench/*.sh scripts (sourced): a throw-away directory $work (removed at exit,
# with the wharfd started here killed), timing, RSS, wharf-perf's JSON, and starting wharfd on
# $port with its log in $work/wharfd.log. The caller sets build, port and name (the directory's name).
wharfd=$build/src/server/wharfd
perf=$build/bench/wharf-perf
ctl=$build/src/ctl/wharfctl
for tool in "$wharfd" "$perf" "$ctl"; do
  [ -x "$tool" ] || { echo "missing $tool: run 'make build' first" >&2; exit 1; }
done

work=$(mktemp -d "/tmp/wharf-$name-XXXXXX")
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

now_ms() { date +%s%3N; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
# wharf-perf against the wharfd on $port: its JSON summary (the last line); a field of it.
perf_json() { "$perf" --server 127.0.0.1:$port --json "$@" | tail -1; }
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }
# start DATA_DIR [WHARFD_FLAGS...]: wharfd in the background ($pid), returns once it listens.
start() {
  local data=$1
  shift
  rm -f "$work/ready"
  "$wharfd" --listen 127.0.0.1:$port --data-dir "$data" --ready-file "$work/ready" \
    --log-level info "$@" 2>>"$work/wharfd.log" &
  pid=$!
  while [ ! -s "$work/ready" ]; do sleep 0.01; done
}
# restart [WHARFD_FLAGS...]: the wharfd started here killed (if any), and a new one started
# on an empty $work/data.
restart() {
  { [ -n "$pid" ] && kill -9 "$pid" && wait "$pid"; } 2>/dev/null || true
  rm -rf "$work/data"
  start "$work/data" "$@"
}
