#!/usr/bin/env bash
# Install what the C and JavaScript agents need: Debian's libzmq and msgpack-c dev packages,
# and the npm packages pinned by clients/js/package-lock.json. Safe to run again: it only
# installs what is missing (apt-get update runs only when a package must be installed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

packages=(libzmq3-dev libmsgpack-dev pkg-config gcc make)
missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        $sudo apt-get update -qq
        $sudo apt-get install -y --no-install-recommends "${missing[@]}"
    fi
fi

if ! command -v npm >/dev/null; then
    echo "clients/setup.sh: node and npm are needed for clients/js (apt-get install nodejs npm)" >&2
    exit 1
fi
js="$here/js"
# npm ci wipes node_modules; skip it when the installed tree already matches the lockfile.
if [ ! -f "$js/node_modules/.package-lock.json" ] \
        || ! cmp -s <(sed -n '/"packages"/,$p' "$js/package-lock.json" | grep -v '"": {' ) \
                    <(sed -n '/"packages"/,$p' "$js/node_modules/.package-lock.json" | grep -v '"": {') ; then
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
fi
make -s -C "$here/c"
