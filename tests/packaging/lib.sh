# Shared by the packaging tests (sourced). Exit code 77 is ctest's "skipped" for them.

skip() {
  echo "SKIPPED: $*"
  exit 77
}

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# start_wharfd READY_FILE LOG COMMAND...: starts COMMAND (a wharfd given --ready-file
# READY_FILE) in the background, waits up to 10 s for the ready file and sets WHARFD_PID and
# WHARFD_ADDRESS (host:port from the ready file's first line).
start_wharfd() {
  local ready=$1 log=$2
  shift 2
  rm -f "$ready"
  "$@" > "$log" 2>&1 &
  WHARFD_PID=$!
  for _ in $(seq 100); do
    if [ -s "$ready" ]; then
      WHARFD_ADDRESS=$(head -n 1 "$ready")
      return 0
    fi
    kill -0 "$WHARFD_PID" 2> /dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  fail "wharfd did not become ready: $*"
}

# stop_wharfd: SIGTERM, and wharfd must exit 0 (a clean stop) within 20 s.
stop_wharfd() {
  [ -n "${WHARFD_PID:-}" ] || return 0
  local pid=$WHARFD_PID
  WHARFD_PID=
  kill -TERM "$pid"
  for _ in $(seq 200); do
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  local code=0
  wait "$pid" || code=$?
  [ "$code" = 0 ] || fail "wharfd exited with $code after SIGTERM"
}
