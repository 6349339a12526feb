#!/usr/bin/env bash
# A real EIO from the kernel while a run streams experts: the checkpoint copy sits behind a layer
# that, mid-run, makes every read of one shard's data (after its header) fail with EIO, as a dying
# disk does; the run uses a small expert cache, a session, a report and telemetry. Then:
# exit 1, exactly one error line naming the shard and the errno text, the report's stopped_by
# "io_error", every telemetry line and the report whole JSON, and once the disk is back, --resume
# of the session ends with exactly the ids of an uninterrupted run.
#
# The failing layer, by BACKEND:
#   dm    a device-mapper device over a loop device holding an ext4 image with the checkpoint;
#         mid-run its table is swapped (suspend, load, resume) for one whose segments over the
#         shard's extents are `error` targets, and swapped back before the resume;
#   fuse  tests/faults/eio_fs.c, a FUSE file system over the copy that answers the shard's reads
#         with EIO after SIGUSR1 and serves them again after SIGUSR2 (for kernels without dm).
# Either way the reads are O_DIRECT through io_uring and the shard's pages are dropped, so no read
# is served from the page cache. Where the kernel lacks the backend, the test exits 77 (ctest's
# SKIP, registered as SKIP_RETURN_CODE) with the reason on one line.
#
# usage: eio_shard.sh DSSPEC MODEL_DIR dm|fuse [EIO_FS_BINARY]
DSSPEC=$1 MODEL=$2 BACKEND=$3 EIO_FS=${4:-}
. "$(dirname "$0")/common.sh"
skip() { echo "SKIP faults_eio_$BACKEND: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (loop, device-mapper and FUSE mounts)"

# A device node that a fresh root (a chroot, a minimal container) may lack: make_node PATH c MAJOR MINOR
make_node() { [ -e "$1" ] || { mkdir -p "$(dirname "$1")" && mknod -m 600 "$1" "$2" "$3" "$4"; } 2>/dev/null; }

shard=model-00002-of-000004.safetensors
# Bytes before a shard's data: the 8-byte length, then the JSON header.
data_start() { echo $((8 + $(od -An -t u8 -N 8 "$1" | tr -d ' '))); }

# ---------------------------------------------------------------- dm backend
dm_name="dsspec_eio_$$_$RANDOM"
dm_good_table="" dm_bad_table=""
dm_setup() {
  command -v dmsetup >/dev/null && command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null && command -v filefrag >/dev/null ||
    skip "dmsetup, losetup, mkfs.ext4 or filefrag is not installed"
  make_node /dev/mapper/control c 10 236
  make_node /dev/loop-control c 10 237
  dmsetup version >/dev/null 2>"$work/dm_err" || skip "the kernel has no device-mapper: $(grep -m1 . "$work/dm_err")"
  truncate -s 96M "$work/disk.img"
  loop=$(losetup -f --show "$work/disk.img" 2>"$work/loop_err") || skip "no loop device: $(head -1 "$work/loop_err")"
  cleanup_hooks="losetup -d $loop; $cleanup_hooks"
  local sectors=$(( $(blockdev --getsz "$loop") ))
  dm_good_table="0 $sectors linear $loop 0"
  echo "$dm_good_table" | dmsetup create "$dm_name" 2>"$work/dm_err" || skip "dmsetup create refused: $(head -1 "$work/dm_err")"
  cleanup_hooks="umount -l $work/mnt 2>/dev/null; dmsetup resume $dm_name 2>/dev/null; dmsetup remove --retry $dm_name; $cleanup_hooks"
  mkfs.ext4 -q -F "/dev/mapper/$dm_name" || { fail "mkfs.ext4 failed"; finish eio_shard; }
  mkdir -p "$work/mnt"
  mount "/dev/mapper/$dm_name" "$work/mnt" || { fail "cannot mount the dm device"; finish eio_shard; }
  # Read-only from here: nothing but the run's reads may touch the device once sectors fail.
  cp "$work/src"/* "$work/mnt"/ && sync && mount -o remount,ro,noatime "$work/mnt" || { fail "cannot fill the dm device"; finish eio_shard; }
  dm_bad_table=$(dm_table_failing "$work/mnt/$shard" "$sectors")
  [ -n "$dm_bad_table" ] || { fail "no extents found for $shard"; finish eio_shard; }
}
# The linear table with `error` segments over the device sectors that hold the file's bytes from
# its data start on (filefrag's physical extents, in filesystem blocks).
dm_table_failing() {
  local file=$1 total=$2 bs spb from
  bs=$(stat -f -c %S "$file"); spb=$((bs / 512)); from=$(( $(data_start "$file") / bs ))
  filefrag -e -b"$bs" "$file" | awk -v spb=$spb -v from=$from -v total=$total -v dev="$loop" -F'[: .]+' '
    BEGIN { n = 0 }
    /^ *[0-9]+:/ { lo = $3; hi = $4; p = $5; if (hi < from) next; if (lo < from) { p += from - lo; lo = from }
                   s[n] = p * spb; len[n] = (hi - lo + 1) * spb; n++ }
    END { if (!n) exit 1; at = 0
          for (i = 0; i < n; i++) { if (s[i] > at) print at, s[i] - at, "linear", dev, at; print s[i], len[i], "error"; at = s[i] + len[i] }
          if (at < total) print at, total - at, "linear", dev, at }' | sort -n
}
dm_swap() {
  dmsetup suspend "$dm_name" && echo "$1" | dmsetup load "$dm_name" && dmsetup resume "$dm_name" || fail "dm table swap failed"
}
dm_fail() { dm_swap "$dm_bad_table"; dd if="$work/mnt/$shard" iflag=nocache count=0 status=none 2>/dev/null; }
dm_heal() { dm_swap "$dm_good_table"; }

# ---------------------------------------------------------------- fuse backend
fuse_setup() {
  [ -x "$EIO_FS" ] || skip "eio_fs was not built (libfuse3-dev missing when configuring)"
  make_node /dev/fuse c 10 229
  grep -qw fuse /proc/filesystems || skip "the kernel has no FUSE"
  mkdir -p "$work/mnt"
  "$EIO_FS" "$work/src" "$work/mnt" "$shard" "$(data_start "$work/src/$shard")" >"$work/fs_out" 2>"$work/fs_err" &
  fs_pid=$!
  cleanup_hooks="umount -l $work/mnt 2>/dev/null; kill $fs_pid 2>/dev/null; wait $fs_pid 2>/dev/null; $cleanup_hooks"
  local i=0
  while ! mountpoint -q "$work/mnt" && kill -0 $fs_pid 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  mountpoint -q "$work/mnt" || skip "the FUSE mount failed: $(head -1 "$work/fs_err")"
}
fuse_fail() { kill -USR1 $fs_pid; }
fuse_heal() { kill -USR2 $fs_pid; }

# ---------------------------------------------------------------- the run
copy_model "$work/src"
case $BACKEND in
  dm) dm_setup ;;
  fuse) fuse_setup ;;
  *) echo "usage: eio_shard.sh DSSPEC MODEL_DIR dm|fuse [EIO_FS_BINARY]" >&2; exit 2 ;;
esac
m="$work/mnt"
# 26 of the 256 experts cached: nearly every token misses and reads from the shards.
run() { "$DSSPEC" run -m "$1" --ids 0,5,9 -n 400 --ignore-eos --temp 0.8 --seed 11 --mtp on --print-ids --quiet \
          --ctx 2048 --cache-gib 0.002 -t 1 "${@:2}"; }
run "$work/src" >"$work/reference" 2>"$work/ref_err" || { fail "the uninterrupted run failed: $(cat "$work/ref_err")"; finish eio_shard; }

run "$m" --session "$work/s.session" --report "$work/r.json" --telemetry "$work/t.jsonl" --telemetry-every 4 \
    >"$work/out" 2>"$work/err" &
pid=$!
wait_lines "$work/t.jsonl" 120 3
${BACKEND}_fail
wait $pid
rc=$?
[ $rc -eq 1 ] || fail "exit $rc, want 1 (a runtime error)"
check_one_line "$work/err" "$m/$shard"
echo "the error line: $(cat "$work/err")"
grep -q "Input/output error" "$work/err" || fail "the error line does not say Input/output error: $(cat "$work/err")"
grep -q "at offset [0-9]" "$work/err" || fail "the error line does not give the offset: $(cat "$work/err")"
check_report_valid "$work/r.json"
[ "$(json_str "$work/r.json" stopped_by)" = io_error ] || fail "stopped_by $(json_str "$work/r.json" stopped_by), want io_error"
generated=$(json_num "$work/r.json" generated)
[ "${generated:-0}" -gt 0 ] && [ "$generated" -lt 400 ] || fail "the report says $generated generated, want 1..399 (the fault came mid-run)"
check_telemetry_lines "$work/t.jsonl"
check_json_lines "$work/t.jsonl"
check_json whole "$work/r.json"
[ "$(wc -w <"$work/out")" -eq "$generated" ] || fail "stdout has $(wc -w <"$work/out") ids, the report $generated"

${BACKEND}_heal
run "$m" --session "$work/s.session" --resume >"$work/resumed" 2>"$work/resume_err" || fail "--resume failed: $(cat "$work/resume_err")"
cmp -s "$work/reference" "$work/resumed" || fail "the resumed run's ids differ from the uninterrupted run's"
if [ "$BACKEND" = fuse ]; then
  # The last close of a file on the mount can lag the process's exit by a moment.
  for i in $(seq 50); do umount "$m" 2>/dev/null && break; sleep 0.1; done
  wait $fs_pid
  grep -q "eio_fs: [1-9][0-9]* reads failed" "$work/fs_out" || fail "the file system failed no read: $(cat "$work/fs_out")"
fi
finish "eio_shard ($BACKEND)"
