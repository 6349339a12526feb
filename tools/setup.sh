#!/usr/bin/env bash
# Installs what dsspec needs on a bare Debian 12 (as root, or with sudo) and builds it into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PKGS="build-essential cmake pkg-config liburing-dev libjemalloc-dev libcjson-dev libpcre2-dev zlib1g-dev fio ca-certificates"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
# node + npm run the reference tokenizer in the tests. A machine may already have them from
# elsewhere (NodeSource's nodejs bundles npm and conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
