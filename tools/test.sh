#!/usr/bin/env bash
# The test suite, twice: the release build, then everything rebuilt with ASan + UBSan; then each
# fuzz harness (tests/fuzz) searches for 30 s in a clang build. Any failure fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
echo "== release build: ctest"
ctest --test-dir build --output-on-failure -j"$jobs"
echo "== ASan + UBSan build: ctest"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DDSSPEC_SANITIZE=ON
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
echo "== fuzzing: every harness of tests/fuzz for a bounded time (libFuzzer + ASan + UBSan)"
# clang and its runtime (libFuzzer, the sanitizers) are needed only for this step.
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
missing=""
for p in clang libclang-rt-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
fi
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DDSSPEC_FUZZ=ON -DDSSPEC_FUZZ_SECONDS=30
cmake --build build-fuzz -j"$jobs" --target fuzz_harnesses
ctest --test-dir build-fuzz -L fuzz --output-on-failure -j"$jobs"
