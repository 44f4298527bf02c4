#!/usr/bin/env bash
# Starts the local flying-squid server (offline, 127.0.0.1 only) with the rlbridge RCON plugin.
# Usage: start.sh [--port MC_PORT] [--rcon-port PORT] [--password PW] [--version 1.21.4]
# The password may also come from $RCON_PASSWORD. Runs in the foreground; stop it with SIGTERM.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export MC_PORT="${MC_PORT:-25565}" RCON_PORT="${RCON_PORT:-25575}" MC_VERSION="${MC_VERSION:-1.21.4}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --port) MC_PORT="$2"; shift 2 ;;
    --rcon-port) RCON_PORT="$2"; shift 2 ;;
    --password) RCON_PASSWORD="$2"; shift 2 ;;
    --version) MC_VERSION="$2"; shift 2 ;;
    *) echo "start.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
export RCON_PASSWORD="${RCON_PASSWORD:?start.sh: give --password or set RCON_PASSWORD}"
if [[ ! -f "$here/node_modules/flying-squid/package.json" ]]; then
  echo "start.sh: flying-squid is not installed; run $here/setup.sh first" >&2
  exit 1
fi
cd "$here"
exec node server.js
