#!/usr/bin/env bash
# The README's two commands as a user runs them, on whatever Node is first on PATH (.ci/run
# runs this on Node 22; the whole suite runs on Node 24): `npm start` on a fresh data
# directory, then the README's client steps against it, `stele ledger init`, `anchor` and
# `verify` of a file, each of which must exit 0, and `verify` of a changed file, which must
# exit 1. Needs `npm ci` (which builds dist/) first. Prints one line per step.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    # The server writes its data directory until it has shut down: removed only after that.
    for _ in $(seq 1 100); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# Port 0: any free port; --json: the banner (url, keyId) as the first line on stdout.
STELE_DATA_DIR="$tmp/data" STELE_PORT=0 setsid npm start --silent -- --json >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
for _ in $(seq 1 600); do
  [ -s "$tmp/serve.out" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.err" >&2; echo "readme smoke: npm start exited" >&2; exit 1; }
  sleep 0.1
done
sleep 0.2
banner=$(head -n 1 "$tmp/serve.out")
url=$(node -p "JSON.parse(process.argv[1]).url" "$banner")
key=$(node -p "JSON.parse(process.argv[1]).keyId" "$banner")
echo "readme smoke: npm start serves $url on Node $(node --version)"

export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/share"
mkdir -p "$HOME"
stele() { node dist/cli/main.js "$@"; }
printf 'the release bytes\n' >"$tmp/release-1.2.3.tgz"
stele ledger init --endpoint "$url" --tenant demo --scope demo --trust-key "$key" >/dev/null
echo "readme smoke: ledger init: ok"
stele ledger anchor "$tmp/release-1.2.3.tgz" >/dev/null
echo "readme smoke: ledger anchor: ok"
stele ledger verify "$tmp/release-1.2.3.tgz" >/dev/null
echo "readme smoke: ledger verify: ok"
printf 'tampered\n' >"$tmp/release-1.2.3.tgz"
code=0
stele ledger verify "$tmp/release-1.2.3.tgz" >/dev/null 2>&1 || code=$?
[ "$code" -eq 1 ] || { echo "readme smoke: verify of a changed file exited $code, not 1" >&2; exit 1; }
echo "readme smoke: ledger verify of a changed file: exit 1 (as it must)"
