#!/usr/bin/env bash
# Installs the pinned flying-squid server (package-lock.json) into node_modules; idempotent:
# does nothing when the installed tree already matches the lockfile.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup.sh: node and npm are required (node >= 18; tested with v20)." >&2
  echo "  Debian/Ubuntu: apt-get install -y nodejs npm" >&2
  exit 1
fi

stamp="node_modules/.rlbridge-lock.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f node_modules/flying-squid/package.json ]]; then
  exit 0
fi

# minecraft-protocol declares node >= 22 but runs here on node 20 (the server's code paths we use
# need nothing newer), so engine mismatches are warnings, not errors.
npm ci --no-audit --no-fund --engine-strict=false --loglevel=error
echo "$want" > "$stamp"
echo "flying-squid $(node -p "require('./node_modules/flying-squid/package.json').version") installed in $here/node_modules"
