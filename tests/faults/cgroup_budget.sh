#!/usr/bin/env bash
# dsspec inside a real memory cgroup (v1 or v2), as in a container:
#  - with no --mem-budget the budget is 90% of the cgroup's limit, and the run finishes under it;
#  - loading leaves (almost) none of the checkpoint in the page cache charged to the cgroup;
#  - memory pressure: a cgroup only a little above --mem-budget; the run finishes, is never
#    OOM-killed, and its peak RSS stays under the budget;
#  - --mem-budget above the cgroup's limit is refused (exit 2, one line with the numbers).
# Fails (never skips) when it cannot make a cgroup: CI runs it as root.
# usage: cgroup_budget.sh DSSPEC MODEL_DIR
DSSPEC=$1 MODEL=$2
. "$(dirname "$0")/common.sh"
MiB=$((1 << 20))

# A fresh root (a chroot, a minimal container) may have /sys without the cgroup mounts the
# kernel offers: mount the memory controller where every program looks for it, as root can.
mount_memory_cgroup() {
  [ -d /sys/fs/cgroup ] || return 1
  if ! mountpoint -q /sys/fs/cgroup && [ -z "$(ls -A /sys/fs/cgroup 2>/dev/null)" ]; then
    if grep -qw cgroup2 /proc/filesystems && mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null &&
       grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
      cleanup_hooks="$cleanup_hooks umount /sys/fs/cgroup;"
      return 0
    fi
    mountpoint -q /sys/fs/cgroup && umount /sys/fs/cgroup
    mount -t tmpfs cgroup_root /sys/fs/cgroup || return 1
    cleanup_hooks="$cleanup_hooks umount /sys/fs/cgroup;"
  fi
  mkdir -p /sys/fs/cgroup/memory && mount -t cgroup -o memory memory /sys/fs/cgroup/memory || return 1
  cleanup_hooks="umount /sys/fs/cgroup/memory; $cleanup_hooks"
}
if [ ! -f /sys/fs/cgroup/memory/memory.limit_in_bytes ] && ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  mount_memory_cgroup || { fail "no memory cgroup controller at /sys/fs/cgroup, and mounting one failed (run as root)"; finish cgroup_budget; }
fi
if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
  v=1 base=/sys/fs/cgroup/memory
else
  v=2 base=/sys/fs/cgroup
  grep -qw memory $base/cgroup.subtree_control || echo +memory >$base/cgroup.subtree_control
fi
n_groups=0
make_cgroup() { # LIMIT_BYTES -> g := a new cgroup with that limit; ends the test when it cannot
  g=$base/dsspec_test_$$_$n_groups
  n_groups=$((n_groups + 1))
  mkdir "$g" || { fail "cannot create $g (run as root)"; finish cgroup_budget; }
  cleanup_hooks="rmdir '$g' 2>/dev/null; $cleanup_hooks"
  if [ $v = 1 ]; then echo "$1" >"$g/memory.limit_in_bytes"; else echo "$1" >"$g/memory.max"; fi ||
    { fail "cannot set the limit of $g"; finish cgroup_budget; }
}
run_in() { local g=$1; shift; sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$g" "$@"; }
oom_kills() { if [ $v = 1 ]; then grep -o 'oom_kill [0-9]*' "$1/memory.oom_control" | grep -o '[0-9]*$'; else grep -o 'oom_kill [0-9]*' "$1/memory.events" | grep -o '[0-9]*$'; fi; }
page_cache() { if [ $v = 1 ]; then grep '^cache ' "$1/memory.stat" | grep -o '[0-9]*$'; else grep '^file ' "$1/memory.stat" | grep -o '[0-9]*$'; fi; }

copy_model "$work/m"
budget_for "$work/m" 4 4096

# The default budget follows the cgroup, and loading does not leave the checkpoint cached in it.
limit=$(( (budget + 64 * MiB) / MiB * MiB ))
make_cgroup $limit
run_in "$g" "$DSSPEC" run -m "$work/m" --ids 0,5,9 -n 200 --ignore-eos --temp 0 --print-ids --quiet --ctx 4096 \
    --kv-dtype bf16 --report "$work/r1.json" >/dev/null 2>"$work/err1"
rc=$?
[ $rc -eq 0 ] || fail "run in a $((limit / MiB)) MiB cgroup: exit $rc: $(cat "$work/err1")"
[ "$(json_num "$work/r1.json" budget_bytes)" = "$((limit / 10 * 9))" ] ||
  fail "default budget $(json_num "$work/r1.json" budget_bytes), want 90% of the cgroup's $limit"
[ "$(oom_kills "$g")" = 0 ] || fail "OOM kills in the cgroup: $(oom_kills "$g")"
cached=$(page_cache "$g")
model_bytes=$(du -sb "$work/m" | cut -f1)
echo "page cache charged to the cgroup after the run: $((cached / 1024)) KiB (checkpoint $((model_bytes / 1024)) KiB)"
[ "$cached" -lt $((6 * MiB)) ] || fail "$((cached / MiB)) MiB of page cache left charged to the cgroup (resident weights not dropped)"

# Memory pressure: the cgroup is the budget plus 8 MiB; the budget leaves a quarter of the experts.
limit=$((budget + 8 * MiB))
make_cgroup $limit
run_in "$g" "$DSSPEC" run -m "$work/m" --ids 0,5,9 -n 400 --ignore-eos --temp 0 --print-ids --quiet --ctx 4096 \
    --kv-dtype bf16 --mem-budget "$budget" --report "$work/r2.json" >"$work/out2" 2>"$work/err2"
rc=$?
[ $rc -eq 0 ] || fail "run under pressure: exit $rc (137 = killed): $(cat "$work/err2")"
[ "$(oom_kills "$g")" = 0 ] || fail "OOM kills under pressure: $(oom_kills "$g")"
peak=$(json_num "$work/r2.json" peak_rss_bytes)
[ -n "$peak" ] && [ "$peak" -le "$budget" ] || fail "peak RSS $peak above --mem-budget $budget"
echo "pressure: --mem-budget $((budget / 1024)) KiB in a $((limit / 1024)) KiB cgroup: peak RSS $((peak / 1024)) KiB, exit 0, no OOM kill"

# A budget the cgroup cannot give is refused before anything loads.
run_in "$g" "$DSSPEC" run -m "$work/m" --ids 0,5,9 -n 4 --print-ids --mem-budget $((limit + 64 * MiB)) >/dev/null 2>"$work/err3"
rc=$?
[ $rc -eq 2 ] || fail "--mem-budget above the cgroup: exit $rc, want 2"
check_one_line "$work/err3" "memory cgroup's limit"
finish cgroup_budget
