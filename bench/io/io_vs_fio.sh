#!/usr/bin/env bash
# io/ against fio on the same files: for each queue depth, fio (io_uring engine, O_DIRECT, random
# 4 KiB-aligned offsets over the slice's shards, one expert-sized block per read) and then
# bench_expert_io (the same number of expert reads, routing-shaped), each with a cold page cache,
# and the ratio reader / fio. Target: >= 90%.
#
# The disk under a VM is noisy (+-15% run to run): each side runs REPEAT times, alternating, and
# the medians are compared.
#
# usage: bench/io/io_vs_fio.sh SLICE_DIR [BUILD_DIR] [QD_LIST] [READS] [CHUNK_KIB] [REPEAT]
#   SLICE_DIR  an R1-shaped checkpoint (build/bench/make_r1_slice --out SLICE_DIR)
#   BUILD_DIR  the cmake build directory holding bench/bench_expert_io (default ./build)
#   QD_LIST    comma-separated queue depths (default 1,2,4,8)
#   READS      expert reads per run (default 96, ~4.2 GB)
#   CHUNK_KIB  the reader's chunk size (default 0: one read per piece)
#   REPEAT     runs per side and queue depth (default 3)
# needs: fio (apt-get install fio); root for drop_caches (without it, says so and goes on: both
# sides use O_DIRECT, so the page cache is not read either way).
set -euo pipefail

slice=${1:?usage: io_vs_fio.sh SLICE_DIR [BUILD_DIR] [QD_LIST] [READS] [CHUNK_KIB]}
build=${2:-build}
qds=${3:-1,2,4,8}
reads=${4:-96}
chunk=${5:-0}
repeat=${6:-3}
bench="$build/bench/bench_expert_io"

command -v fio >/dev/null || { echo "io_vs_fio.sh: fio not found (apt-get install fio)" >&2; exit 2; }
[ -x "$bench" ] || { echo "io_vs_fio.sh: $bench not built (cmake --build $build --target bench_expert_io)" >&2; exit 2; }
shards=$(ls "$slice"/model-*-of-*.safetensors 2>/dev/null | paste -sd: -)
[ -n "$shards" ] || { echo "io_vs_fio.sh: no model-*-of-*.safetensors in $slice" >&2; exit 2; }
case "$shards" in *" "*) echo "io_vs_fio.sh: shard paths must not contain spaces" >&2; exit 2;; esac

# One expert as the reader asks for it: 44,050,944 bytes widened to 4 KiB pages.
expert_bytes=44050944
bs=$(( (expert_bytes + 4095) / 4096 * 4096 ))

drop_caches() {
    sync
    if ! echo 3 2>/dev/null > /proc/sys/vm/drop_caches; then
        [ -n "${warned:-}" ] || echo "io_vs_fio.sh: drop_caches refused (not root); both sides use O_DIRECT anyway" >&2
        warned=1
    fi
}

fio_gbps() { # qd -> GB/s
    drop_caches
    # terse v3: field 6 = KiB read, field 9 = read runtime in ms
    fio --name=experts --filename="$shards" --ioengine=io_uring --direct=1 --rw=randread \
        --bs="$bs" --blockalign=4k --iodepth="$1" --numjobs=1 --norandommap --randrepeat=0 \
        --io_size=$((bs * reads)) --output-format=terse --terse-version=3 2>/dev/null |
        awk -F';' '{ printf "%.4f\n", $6 * 1024 / ($9 / 1000) / 1e9 }'
}

reader_gbps() { # qd -> GB/s of bytes transferred (widened), the same measure as fio
    drop_caches
    "$bench" -m "$slice" --backend uring --qd "$1" --chunk-kib "$chunk" --fixed off --reads "$reads" |
        awk '/^RESULT/ { for (i = 1; i <= NF; i++) if ($i ~ /^wire_gbps=/) { sub("wire_gbps=", "", $i); print $i } }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf "%-4s %-24s %-24s %12s %12s %8s\n" qd "fio runs GB/s" "io/ runs GB/s" "fio median" "io/ median" "ratio"
IFS=, read -ra qd_list <<< "$qds"
for qd in "${qd_list[@]}"; do
    fs=() rs=()
    for ((i = 0; i < repeat; i++)); do
        fs+=("$(fio_gbps "$qd")")
        rs+=("$(reader_gbps "$qd")")
    done
    f=$(printf "%s\n" "${fs[@]}" | median)
    r=$(printf "%s\n" "${rs[@]}" | median)
    awk -v qd="$qd" -v fl="$(printf "%.2f " "${fs[@]}")" -v rl="$(printf "%.2f " "${rs[@]}")" -v f="$f" -v r="$r" \
        'BEGIN { printf "%-4s %-24s %-24s %12.3f %12.3f %7.1f%%\n", qd, fl, rl, f, r, 100 * r / f }'
done
echo "(block $bs bytes = one expert widened to 4 KiB; $reads reads per run; reader chunk ${chunk} KiB; O_DIRECT both)"
