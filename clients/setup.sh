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
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
    if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        $sudo apt-get update -qq
        $sudo apt-get install -y --no-install-recommends "${missing[@]}"
    fi
fi

js="$here/js"
# npm ci wipes node_modules; skip it when node_modules was installed from this very lockfile.
stamp="$js/node_modules/.rlbridge-lock.sha256"
lock_hash="$(sha256sum "$js/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_hash" ]; then
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$lock_hash" > "$stamp"
fi
make -s -C "$here/c"
