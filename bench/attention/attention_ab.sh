#!/usr/bin/env bash
# A change to the attention kernels measured against an older commit in one process: OLD's
# core/attention*.c and the working tree's (or NEW's) compiled with the project's flags, their
# symbols renamed old/new (objcopy), linked with bench/attention/attention_ab.c and the build's
# core library; each line alternates the two builds' attention_row call by call on the same cache
# copies and prints their times, the median old/new ratio [quartiles] and whether every output
# compared is bit-identical. Both commits must share core/attention.h's interface.
#
#   bench/attention/attention_ab.sh [--new REV] [--build DIR] OLD_REV [attention_ab options]
#   e.g. bench/attention/attention_ab.sh 7b0d5e7 --shape embedded --dtype bf16 --T 4096 --threads 1
#        (several lines: call it once per line; attention_ab --help lists the options)
# needs: git, a C compiler, binutils (nm, objcopy), pkg-config, DIR built (default build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
new="" build=build
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    --new) [ $# -ge 2 ] || { echo "attention_ab.sh: --new needs a revision" >&2; exit 2; }; new=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || { echo "attention_ab.sh: --build needs a directory" >&2; exit 2; }; build=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "attention_ab.sh: no OLD_REV (see --help)" >&2; exit 2; }
old=$1; shift
lib="$build/core/libdsspec_core.a"
[ -f "$lib" ] || { echo "attention_ab.sh: no $lib (cmake --build $build first)" >&2; exit 2; }
for r in "$old" ${new:+"$new"}; do
  git rev-parse --verify -q "$r^{commit}" >/dev/null || { echo "attention_ab.sh: '$r' is not a commit here" >&2; exit 2; }
done
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# side REV|"" PREFIX: that revision's attention objects (the working tree's for ""), symbols PREFIX_*
side() {
  local rev=$1 p=$2 dir="$tmp/$2"
  mkdir -p "$dir"
  if [ -n "$rev" ]; then git archive "$rev" core | tar -x -C "$dir"; else cp -r core "$dir/"; fi
  for f in attention attention_avx2 attention_avx512; do
    local isa=""
    case $f in
      *avx2) isa="-mavx2 -mfma -mf16c" ;;
      *avx512) isa="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c" ;;
    esac
    # shellcheck disable=SC2086
    "$cc" -O2 -g -std=c17 -Wall -Wextra -Werror -D_GNU_SOURCE -falign-functions=64 $isa -I"$dir" -c "$dir/core/$f.c" -o "$dir/$f.o"
  done
  local renames=()
  for s in $(nm -g --defined-only "$dir"/attention*.o | awk 'NF == 3 { print $3 }' | sort -u); do
    renames+=(--redefine-sym "$s=${p}_$s")
  done
  for o in "$dir"/attention*.o; do objcopy "${renames[@]}" "$o"; done
}
side "$old" a
side "$new" b
# shellcheck disable=SC2046
"$cc" -O2 -std=c17 -Wall -Wextra -Werror -D_GNU_SOURCE -I. bench/attention/attention_ab.c "$tmp"/a/attention*.o \
  "$tmp"/b/attention*.o "$lib" $(pkg-config --libs libcjson) -lm -lpthread -o "$tmp/attention_ab"
if [ -n "$new" ]; then label=$(git rev-parse --short "$new"); else label="the working tree"; fi
echo "old: $(git rev-parse --short "$old"); new: $label"
"$tmp/attention_ab" "$@"
