#!/usr/bin/env bash
# ctest browser.console: installs playwright-core from the lock file (npm ci) into a scratch
# directory and runs console.test.mjs with node's test runner against WHARFD, in Debian's
# chromium (make test installs it). Usage: run.sh WHARFD [SCREENSHOT_DIR]
set -euo pipefail
# make test installs chromium (Makefile, TEST_PKGS) and node with npm (deps); a bare ctest
# without them, or with a Node.js older than playwright-core's 20, skips (77).
for tool in /usr/bin/chromium npm node; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed (make test installs it)"; exit 77; }
done
node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)' ||
  { echo "skipped: playwright-core needs Node.js 20 or newer, this is $(node --version)"; exit 77; }
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$here/console.test.mjs" "$work/"
(cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
export WHARFD="$1"
if [ $# -ge 2 ]; then
  mkdir -p "$2"
  export SCREENSHOTS="$(cd "$2" && pwd)"
fi
cd "$work" && node --test --test-concurrency=1 console.test.mjs
