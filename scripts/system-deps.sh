#!/usr/bin/env bash
# System packages the project needs beyond Node and npm (installed from Debian's archive):
#   espeak-ng + lame — the guide's local speech engine (TTS_ENGINE=espeak) and its tests;
#   chromium — the browser tests: QA report, 3D viewer, /docs (playwright-core; never `playwright install`);
#   redis-server — the tests of the shared rate-limit store (REDIS_URL) start their own;
#   postgresql — the tests of the shared state store (DATABASE_URL) start their own server
#     (initdb/postgres from /usr/lib/postgresql/<major>/bin, as the `postgres` user when run as root).
set -euo pipefail
missing=()
command -v espeak-ng >/dev/null 2>&1 || missing+=(espeak-ng)
command -v lame >/dev/null 2>&1 || missing+=(lame)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing system packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || {
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
}
