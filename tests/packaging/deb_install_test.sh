#!/usr/bin/env bash
# The .deb (docs/packaging.md): dpkg -i it, check what the package set up (the wharf system
# user, /var/lib/wharf, the conffile, the unit: valid and enabled), run the installed wharfd as
# the wharf user with the installed config (a free loopback port: there is no systemd to start
# it here), talk to it with the installed wharfctl, stop it, then dpkg -r and dpkg -P.
#   deb_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:-}
source_dir=$2
. "$source_dir/tests/packaging/lib.sh"
[ -n "$build" ] || skip "WHARF_PACKAGE_BUILD_DIR is not set (make test sets it to build-default)"
[ "$(id -u)" = 0 ] || skip "installing a .deb needs root (CI runs as root)"
deb=$(find "$build" -maxdepth 1 -name 'wharf_*.deb' | sort | tail -n 1)
[ -n "$deb" ] || fail "no wharf_*.deb in $build (make package builds it)"
# Never replace a real installation or its data.
if dpkg-query -W -f='${Status}' wharf 2> /dev/null | grep -q 'ok installed'; then
  skip "the wharf package is already installed on this machine"
fi
[ ! -e /var/lib/wharf ] || skip "/var/lib/wharf exists and the package is not installed: not touching it"

work=$(mktemp -d /tmp/wharf-deb.XXXXXX)
chmod 755 "$work"
cleanup() {
  stop_wharfd || true
  [ -d /run/systemd/system ] && systemctl stop wharfd > /dev/null 2>&1 || true
  dpkg -P wharf > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== dpkg -i $(basename "$deb")"
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\):/   \1:/p'
dpkg -i "$deb" || fail "dpkg -i"

[ -x /usr/sbin/wharfd ] && [ -x /usr/bin/wharfctl ] && [ -x /usr/bin/wharf-perf ] ||
  fail "binaries not in /usr/sbin, /usr/bin"
grep -q "complete -F _wharfctl wharfctl" /usr/share/bash-completion/completions/wharfctl ||
  fail "no bash completion for wharfctl"
getent passwd wharf > /dev/null || fail "no wharf user"
[ "$(getent passwd wharf | cut -d: -f6,7)" = "/var/lib/wharf:/usr/sbin/nologin" ] ||
  fail "wharf user: $(getent passwd wharf)"
[ "$(stat -c '%U:%G %a' /var/lib/wharf)" = "wharf:wharf 750" ] ||
  fail "/var/lib/wharf: $(stat -c '%U:%G %a' /var/lib/wharf)"
grep -qx '/etc/wharf/wharfd.toml' /var/lib/dpkg/info/wharf.conffiles ||
  fail "/etc/wharf/wharfd.toml is not a conffile"
grep -q '^data_dir = "/var/lib/wharf"' /etc/wharf/wharfd.toml || fail "installed config's data_dir"
unit=/lib/systemd/system/wharfd.service
grep -q '^ExecStart=/usr/sbin/wharfd --config /etc/wharf/wharfd.toml$' $unit || fail "$unit ExecStart"
grep -q '^User=wharf$' $unit || fail "$unit User"
if command -v systemd-analyze > /dev/null; then
  systemd-analyze verify $unit || fail "systemd-analyze verify $unit"
else
  echo "   (systemd-analyze is not installed: the unit is not verified)"
fi
if command -v deb-systemd-helper > /dev/null; then
  [ -L /etc/systemd/system/multi-user.target.wants/wharfd.service ] || fail "the unit is not enabled"
fi
[ -f /usr/share/doc/wharf/packaging.md ] || fail "docs not in /usr/share/doc/wharf"

# Where systemd runs, the package's postinst started the service on /var/lib/wharf: that is
# the real thing working; stop it, so the wharfd below is the only one on that data.
if [ -d /run/systemd/system ]; then
  systemctl is-active --quiet wharfd && echo "   (systemd started wharfd.service: stopping it)"
  systemctl stop wharfd || fail "systemctl stop wharfd"
fi

echo "== the installed wharfd as user wharf"
chown wharf:wharf "$work"
start_wharfd "$work/ready" "$work/wharfd.log" \
  setpriv --reuid=wharf --regid=wharf --init-groups /usr/sbin/wharfd \
  --config /etc/wharf/wharfd.toml --listen 127.0.0.1:0 --amqp-listen 127.0.0.1:0 --ready-file "$work/ready"
[ "$(stat -c %U /proc/"$WHARFD_PID")" = wharf ] || fail "wharfd does not run as wharf"
[ -d /var/lib/wharf/store ] || fail "no store under /var/lib/wharf"
ctl="/usr/bin/wharfctl --server $WHARFD_ADDRESS"
$ctl declare-queue packaged > /dev/null || fail "wharfctl declare-queue"
$ctl publish '' packaged 'from the .deb' --persistent > /dev/null || fail "wharfctl publish"
queues=$($ctl queues --json | tr -d ' \n') || fail "wharfctl queues"
echo "$queues" | grep -q '"name":"packaged"' || fail "queues: $queues"
echo "$queues" | grep -q '"ready":1' || fail "queues: $queues"
got=$($ctl consume packaged) || fail "wharfctl consume"
echo "$got" | grep -q 'from the .deb' || fail "consume: $got"
stop_wharfd

echo "== dpkg -r: binaries go, the config and the data stay"
dpkg -r wharf || fail "dpkg -r"
[ ! -e /usr/sbin/wharfd ] || fail "/usr/sbin/wharfd left after dpkg -r"
[ -f /etc/wharf/wharfd.toml ] || fail "the conffile went with dpkg -r"
[ -d /var/lib/wharf/store ] || fail "the data went with dpkg -r"

echo "== dpkg -P: the config and the data go"
dpkg -P wharf || fail "dpkg -P"
[ ! -e /etc/wharf ] || fail "/etc/wharf left after dpkg -P"
[ ! -e /var/lib/wharf ] || fail "/var/lib/wharf left after dpkg -P"
[ ! -e $unit ] || fail "$unit left after dpkg -P"
echo "PASSED"
