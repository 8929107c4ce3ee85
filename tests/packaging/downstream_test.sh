#!/usr/bin/env bash
# The client library as a user gets it (docs/packaging.md): `cmake --install` the Release
# build into a temporary prefix, build tests/downstream (the example program) against it with
# find_package(wharf) and again with pkg-config, and run both against the installed wharfd on
# a free loopback port (publish ten messages, consume and ack them).
#   downstream_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:-}
source_dir=$2
. "$source_dir/tests/packaging/lib.sh"
[ -n "$build" ] || skip "WHARF_PACKAGE_BUILD_DIR is not set (make test sets it to build-default)"
[ -f "$build/CMakeCache.txt" ] || fail "$build is not a CMake build tree"

work=$(mktemp -d /tmp/wharf-downstream.XXXXXX)
trap 'stop_wharfd || true; rm -rf "$work"' EXIT
prefix=$work/prefix

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" || {
  cat "$work/install.log"
  fail "cmake --install"
}
for f in sbin/wharfd bin/wharfctl include/wharf/client.h include/wharf/version.h \
  etc/wharf/wharfd.toml lib/systemd/system/wharfd.service share/doc/wharf/packaging.md; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
grep -q "^ExecStart=$prefix/sbin/wharfd --config $prefix/etc/wharf/wharfd.toml" \
  "$prefix/lib/systemd/system/wharfd.service" || fail "the unit's paths are not the prefix's"
# The public headers stand alone: nothing from src/.
if grep -n '#include "\(common\|net\|protocol\|store\|broker\|server\|client\|ctl\)/' \
  "$prefix"/include/wharf/*.h; then
  fail "an installed header includes a private one"
fi
libdir=$(dirname "$(find "$prefix" -name libwharf-client.a)")

echo "== find_package(wharf CONFIG)"
cmake -S "$source_dir/tests/downstream" -B "$work/b" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" 2>&1 || {
  cat "$work/configure.log"
  fail "configuring the downstream project"
}
cmake --build "$work/b" > "$work/build.log" 2>&1 || {
  cat "$work/build.log"
  fail "building the downstream project"
}

echo "== pkg-config wharf-client"
flags=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs wharf-client) ||
  fail "pkg-config wharf-client"
echo "   $flags"
# shellcheck disable=SC2086 # the flags are words
g++ -std=c++20 -o "$work/downstream-pc" "$source_dir/src/examples/publish_consume.cc" $flags ||
  fail "building with pkg-config's flags"

echo "== against the installed wharfd"
mkdir -p "$work/data"
start_wharfd "$work/ready" "$work/wharfd.log" "$prefix/sbin/wharfd" \
  --config "$prefix/etc/wharf/wharfd.toml" --listen 127.0.0.1:0 --amqp-listen 127.0.0.1:0 --data-dir "$work/data" \
  --ready-file "$work/ready"
for program in "$work/b/downstream" "$work/downstream-pc"; do
  out=$("$program" "$WHARFD_ADDRESS") || {
    cat "$work/wharfd.log"
    fail "$program $WHARFD_ADDRESS: $out"
  }
  echo "   $program: $(echo "$out" | tail -n 1)"
  echo "$out" | grep -q "got 'hello #9'" || fail "unexpected output: $out"
done
stop_wharfd
echo "PASSED"
