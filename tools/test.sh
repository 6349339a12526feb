#!/usr/bin/env bash
# The test suite, twice: the release build, then everything rebuilt with ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
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
