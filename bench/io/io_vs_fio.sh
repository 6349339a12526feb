#!/usr/bin/env bash
# io/ against fio on the same files, for each queue depth, each run with a cold page cache:
#   fio-random: fio's io_uring engine, O_DIRECT, random 4 KiB-aligned offsets over the slice's
#               shards, one expert-sized block per read, as many reads as the reader does;
#   fio-replay: fio (same engine) replaying the reader's own request stream (--read_iolog written
#               by bench_expert_io --write-iolog): the same offsets and lengths. fio 3.33 leaves the
#               last iodepth-1 reads of a replay out of its byte count (and, it seems, its time), so
#               its figure is the steady state: a slightly generous peer;
#   io/:        bench_expert_io through the io_uring backend (routing-shaped stream).
# Ratio = io/ / fio. Target: >= 90%.
#
# The disk under a VM is noisy (+-15% run to run): each side runs REPEAT times, alternating, and
# the medians are compared.
#
# usage: bench/io/io_vs_fio.sh SLICE_DIR [BUILD_DIR] [QD_LIST] [READS] [CHUNK_KIB] [REPEAT] [FIXED]
#   SLICE_DIR  an R1-shaped checkpoint (build/bench/make_r1_slice --out SLICE_DIR)
#   BUILD_DIR  the cmake build directory holding bench/bench_expert_io (default ./build)
#   QD_LIST    comma-separated queue depths (default 1,2,4,8)
#   READS      expert reads per run (default 96, ~4.2 GB)
#   CHUNK_KIB  the reader's chunk size (default 0: one read per piece)
#   REPEAT     runs per side and queue depth (default 3)
#   FIXED      off|on: the reader registers its slots as io_uring fixed buffers (default off)
# needs: fio (apt-get install fio); root for drop_caches (without it, says so and goes on: both
# sides use O_DIRECT, so the page cache is not read either way).
set -euo pipefail

slice=${1:?usage: io_vs_fio.sh SLICE_DIR [BUILD_DIR] [QD_LIST] [READS] [CHUNK_KIB]}
build=${2:-build}
qds=${3:-1,2,4,8}
reads=${4:-96}
chunk=${5:-0}
repeat=${6:-3}
fixed=${7:-off}
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

fio_terse_gbps() { # terse v3: field 6 = KiB read, field 9 = read runtime in ms
    awk -F';' '{ printf "%.4f\n", $6 * 1024 / ($9 / 1000) / 1e9 }'
}

fio_random_gbps() { # qd -> GB/s
    drop_caches
    fio --name=experts --filename="$shards" --ioengine=io_uring --direct=1 --rw=randread \
        --bs="$bs" --blockalign=4k --iodepth="$1" --numjobs=1 --norandommap --randrepeat=0 \
        --io_size=$((bs * reads)) --output-format=terse --terse-version=3 2>/dev/null | fio_terse_gbps
}

fio_replay_gbps() { # qd -> GB/s
    drop_caches
    fio --name=replay --read_iolog="$iolog" --ioengine=io_uring --direct=1 --iodepth="$1" --replay_no_stall=1 \
        --output-format=terse --terse-version=3 2>/dev/null | fio_terse_gbps
}

reader_gbps() { # qd -> GB/s of bytes transferred (widened), the same measure as fio
    drop_caches
    "$bench" -m "$slice" --backend uring --qd "$1" --chunk-kib "$chunk" --fixed "$fixed" --reads "$reads" |
        awk '/^RESULT/ { for (i = 1; i <= NF; i++) if ($i ~ /^wire_gbps=/) { sub("wire_gbps=", "", $i); print $i } }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

iolog=$(mktemp /tmp/io_vs_fio.XXXXXX.iolog)
trap 'rm -f "$iolog"' EXIT
"$bench" -m "$slice" --backend none --reads "$reads" --write-iolog "$iolog" >/dev/null

printf "%-3s %-22s %-22s %-22s %8s %8s %8s %7s %7s\n" qd "fio-random runs" "fio-replay runs" "io/ runs" \
    "fio-rnd" "fio-rep" "io/" "/rnd" "/rep"
IFS=, read -ra qd_list <<< "$qds"
for qd in "${qd_list[@]}"; do
    fr=() fp=() rs=()
    for ((i = 0; i < repeat; i++)); do
        fr+=("$(fio_random_gbps "$qd")")
        fp+=("$(fio_replay_gbps "$qd")")
        rs+=("$(reader_gbps "$qd")")
    done
    a=$(printf "%s\n" "${fr[@]}" | median)
    b=$(printf "%s\n" "${fp[@]}" | median)
    r=$(printf "%s\n" "${rs[@]}" | median)
    printf "%-3s %-22s %-22s %-22s %8.3f %8.3f %8.3f %6.1f%% %6.1f%%\n" "$qd" "$(printf "%.2f " "${fr[@]}")" \
        "$(printf "%.2f " "${fp[@]}")" "$(printf "%.2f " "${rs[@]}")" "$a" "$b" "$r" \
        "$(awk -v r="$r" -v f="$a" 'BEGIN { print 100 * r / f }')" "$(awk -v r="$r" -v f="$b" 'BEGIN { print 100 * r / f }')"
done
echo "(GB/s, medians of $repeat alternating runs; block $bs bytes = one expert widened to 4 KiB; $reads reads per run;"
echo " reader chunk ${chunk} KiB, fixed buffers ${fixed}; O_DIRECT everywhere)"
