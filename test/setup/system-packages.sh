#!/usr/bin/env bash
# The system packages the test suite needs, in one place; `npm test` and .ci/run both run
# this. It installs what is missing on Debian/Ubuntu when it can (root, or passwordless
# sudo), else prints the one command that does and exits 1. Installed already: silent, exit 0.
#
#   bash test/setup/system-packages.sh           install what is missing (or say how)
#   bash test/setup/system-packages.sh --list    print the package names, one per line
#   bash test/setup/system-packages.sh --check   print what is missing; exit 1 if anything is
set -euo pipefail

# Package: what needs it.
PACKAGES=(
  golang-go               # test/interop (and ../shared/tlogcheck): Go's reference tlog/note
  golang-golang-x-mod-dev # golang.org/x/mod source, so the Go build needs no module proxy
  chromium                # test/explorer: the explorer in a real headless browser
  fonts-dejavu-core       # a font for headless Chromium
  softhsm2                # PKCS#11 signer tests against a software HSM
  ceph-mon                # object-store tests against a real Ceph RADOS Gateway (S3)
  ceph-osd
  radosgw
  ceph-common
  uuid-runtime            # uuidgen, for the Ceph cluster's fsid
)

mode=${1:-install}
case "$mode" in
  --list) printf '%s\n' "${PACKAGES[@]}"; exit 0 ;;
  --check | install) ;;
  *) echo "usage: $0 [--list|--check]" >&2; exit 2 ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  # Not Debian or Ubuntu: nothing here can tell what is installed; the tests that need a
  # missing tool fail and name it.
  echo "test setup: not a Debian/Ubuntu machine (no dpkg/apt); the tests expect the equivalents of: ${PACKAGES[*]}" >&2
  exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  [[ $status == ii* ]] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$mode" = --check ]; then
  printf '%s\n' "${missing[@]}"
  exit 1
fi

install_cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "test setup: missing system packages: ${missing[*]}" >&2
  echo "install them with (as root):" >&2
  echo "  sudo sh -c '$install_cmd'" >&2
  exit 1
fi

echo "test setup: installing ${missing[*]}" >&2
"${as_root[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
