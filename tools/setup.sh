#!/usr/bin/env bash
# Installs what building and running dsspec needs on a bare Debian 12 (as root, or with sudo) and
# builds it into build/. What only the tests need (node, npm, curl) tools/test.sh installs itself.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PKGS="build-essential cmake pkg-config liburing-dev libjemalloc-dev libcjson-dev libpcre2-dev libmicrohttpd-dev zlib1g-dev ca-certificates"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
