#!/bin/bash
# Records tests/compat/rabbitmq-3.10.8.json: runs the scenarios against a private RabbitMQ
# node (Debian 12's rabbitmq-server, 3.10.8) listening on 127.0.0.1 only.
#
#   tests/compat/record-rabbitmq.sh [OUT.json] [run.py options, e.g. --only NAME]
#
# Needs root (apt-get install, and the node runs as root with its own HOME). Installs
# rabbitmq-server if missing; if the package's own service got started by that install, it is
# stopped and disabled again. The private node keeps everything (mnesia, logs, cookie, config)
# in a temporary directory, uses its own node name, AMQP port, distribution port and epmd port,
# and is stopped at the end.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/rabbitmq-3.10.8.json}"
shift || true
PY=/usr/bin/python3

free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

if ! dpkg -s rabbitmq-server >/dev/null 2>&1; then
    echo "installing rabbitmq-server" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q rabbitmq-server >&2
    # Some images start the packaged service on install; this script wants only its own node.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet rabbitmq-server 2>/dev/null; then
        systemctl stop rabbitmq-server || true
        systemctl disable rabbitmq-server || true
    elif command -v service >/dev/null 2>&1 && service rabbitmq-server status >/dev/null 2>&1; then
        service rabbitmq-server stop || true
        update-rc.d rabbitmq-server disable >/dev/null 2>&1 || true
    fi
fi
dpkg -s python3-pika >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-pika >&2

version="$(dpkg-query -W -f='${Version}' rabbitmq-server)"
echo "rabbitmq-server $version" >&2

tmp="$(mktemp -d /tmp/wharf-compat-rabbitmq.XXXXXX)"
amqp_port="${RABBITMQ_COMPAT_PORT:-5673}"
if ! "$PY" -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', $amqp_port))" 2>/dev/null; then
    amqp_port="$(free_port)"
fi
dist_port="$(free_port)"
epmd_port="$(free_port)"

export HOME="$tmp/home"                       # the Erlang cookie lives here
export RABBITMQ_HOME=/usr/lib/rabbitmq
export RABBITMQ_NODENAME="wharfcompat@localhost"
export RABBITMQ_USE_LONGNAME=false
export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
export RABBITMQ_NODE_PORT="$amqp_port"
export RABBITMQ_DIST_PORT="$dist_port"
export ERL_EPMD_PORT="$epmd_port"
export ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_MNESIA_BASE="$tmp/mnesia"
export RABBITMQ_LOG_BASE="$tmp/log"
export RABBITMQ_PID_FILE="$tmp/rabbit.pid"
export RABBITMQ_CONF_ENV_FILE="$tmp/rabbitmq-env.conf"
export RABBITMQ_CONFIG_FILE="$tmp/rabbitmq"            # .conf is appended
export RABBITMQ_ADVANCED_CONFIG_FILE="$tmp/advanced.config"
export RABBITMQ_ENABLED_PLUGINS_FILE="$tmp/enabled_plugins"
export RABBITMQ_LOGS="$tmp/log/rabbit.log"
mkdir -p "$HOME" "$RABBITMQ_MNESIA_BASE" "$RABBITMQ_LOG_BASE"
: > "$RABBITMQ_CONF_ENV_FILE"
echo '[].' > "$RABBITMQ_ENABLED_PLUGINS_FILE"
echo '[].' > "$RABBITMQ_ADVANCED_CONFIG_FILE"
cat > "$tmp/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$amqp_port
loopback_users.guest = true
log.file.level = info
EOF

server_pid=""
cleanup() {
    set +e
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RABBITMQ_NODENAME" stop "$RABBITMQ_PID_FILE" >/dev/null 2>&1 \
            || kill "$server_pid"
        for _ in $(seq 1 60); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$server_pid" 2>/dev/null && kill -9 "$server_pid"
    fi
    # the epmd this node started on its private port
    epmd -port "$epmd_port" -kill >/dev/null 2>&1
    if [ "${KEEP_TMP:-0}" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

echo "starting private node $RABBITMQ_NODENAME on 127.0.0.1:$amqp_port (dist $dist_port, epmd $epmd_port)" >&2
/usr/lib/rabbitmq/bin/rabbitmq-server > "$tmp/log/startup.log" 2>&1 &
server_pid=$!

if ! timeout 120 /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RABBITMQ_NODENAME" wait --timeout 110 "$RABBITMQ_PID_FILE" >/dev/null 2>&1 \
   || ! timeout 60 /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RABBITMQ_NODENAME" await_startup >/dev/null 2>&1; then
    echo "RabbitMQ did not start; last lines of its logs:" >&2
    tail -n 40 "$tmp/log/startup.log" "$tmp/log/rabbit.log" >&2 || true
    exit 1
fi
/usr/lib/rabbitmq/bin/rabbitmqctl -n "$RABBITMQ_NODENAME" status 2>/dev/null | grep -i -m1 'RabbitMQ version' >&2 || true

"$PY" "$here/run.py" --host 127.0.0.1 --port "$amqp_port" --out "$out" --broker "rabbitmq $version" "$@"
