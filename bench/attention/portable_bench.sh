#!/bin/sh
# bench_attention made to run on another x86-64 Linux machine that lacks this one's libraries (the
# device machine's CPU, say): the binary with the dynamic loader, libc, libm and libcjson it was
# linked against, and a script at DIR/build/bench/bench_attention that runs it through that loader,
# so that roof_table.sh takes DIR/build as a build directory there.
#   bench/attention/portable_bench.sh [BUILD] [DIR]     (default build, .cache/devbench)
#   then, on the other machine: bench/attention/roof_table.sh DIR/build 3 "avx512 avx2" --seconds 0.25
set -eu
build=${1:-build}
dir=${2:-.cache/devbench}
bin="$build/bench/bench_attention"
[ -x "$bin" ] || { echo "portable_bench.sh: no $bin (cmake --build $build --target bench_attention first)" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir/lib" "$dir/build/bench"
cp "$bin" "$dir/lib/bench_attention"
strip "$dir/lib/bench_attention" 2>/dev/null || true
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | while read -r f; do
    cp -L "$f" "$dir/lib/"
done
loader=$(cd "$dir/lib" && ls ld-linux* | head -n 1)
cat >"$dir/build/bench/bench_attention" <<SCRIPT
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/../.." && pwd)
exec "\$here/lib/$loader" --library-path "\$here/lib" "\$here/lib/bench_attention" "\$@"
SCRIPT
chmod +x "$dir/build/bench/bench_attention"
echo "$dir: $(du -sh "$dir" | cut -f1); run $dir/build/bench/bench_attention --help there"
