#!/usr/bin/env bash
# The morning report in a real browser: `dsspec report --html` pages for a run (with its
# telemetry), an ab run and a comparison of two runs are loaded by headless chromium; its DOM must
# hold the expected charts (svg[data-chart] with one mark per telemetry interval, the MTP layer
# labelled) and its screenshots must be real images. The text report must print no exponents.
# chromium comes from tools/test.sh; without it this test fails rather than skipping.
set -euo pipefail
DSSPEC="$1"
MODEL="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v chromium >/dev/null || fail "chromium is not installed (tools/test.sh installs it: apt-get install chromium)"
dir="$(mktemp -d /tmp/dsspec_report_XXXXXX)"
trap 'rm -rf "$dir"' EXIT
cd "$dir"

"$DSSPEC" run -m "$MODEL" -p "def fibonacci(n):" -n 120 --temp 0.6 --quiet --cache-gib 0.008 \
  --report run.json --telemetry tele.jsonl --telemetry-every 8 >/dev/null
"$DSSPEC" run -m "$MODEL" -p "def fibonacci(n):" -n 120 --temp 0.6 --quiet --mtp off --report run2.json >/dev/null
"$DSSPEC" ab -m "$MODEL" -p "Hello" -n 40 --temp 0 --report ab.json --no-progress >/dev/null
"$DSSPEC" report run.json --html run.html >run.txt
"$DSSPEC" report ab.json --html ab.html >ab.txt
"$DSSPEC" report run.json run2.json --html cmp.html >cmp.txt

# Text: readable numbers, the metadata, the MTP layer named, the comparison's verdict.
! grep -E '[0-9]e[+-][0-9]' run.txt ab.txt cmp.txt || fail "a number printed with an exponent"
grep -q "^command .*dsspec run -m" run.txt || fail "the report has no command line"
grep -q "^started " run.txt && grep -q "^prompt .*fibonacci" run.txt && grep -q "^output " run.txt || fail "metadata or excerpts missing"
grep -q "MTP (layer 4)" run.txt || fail "the MTP layer is not labelled"
grep -q "^  MTP .*on -> off" cmp.txt && grep -q "^effect on speed" cmp.txt || fail "the comparison does not say what changed"

# Telemetry intervals: lines whose generated count grows (the last line may repeat the count).
intervals=$(grep -o '"generated":[0-9]*' tele.jsonl | cut -d: -f2 | awk 'BEGIN{p=0;n=0} $1>p{n++} {p=$1} END{print n}')
[ "$intervals" -ge 10 ] || fail "only $intervals telemetry intervals"

browser() {
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d "$dir/profile_XXXXXX")" "$@" 2>/dev/null
}
# The data-points of the svg with data-chart=$2 in DOM file $1, and the marks (circles, bars other
# than the 12-px legend swatches) inside it. Each chart starts on its own line and ends with </svg>.
marks() {
  local svg
  svg="$(sed -n "/data-chart=\"$2\"/,/<\/svg>/p" "$1" | sed 's|</svg>.*||')"
  [ -n "$svg" ] || { echo "none 0"; return; }
  echo "$(grep -o 'data-points="[0-9]*"' <<<"$svg" | head -1 | tr -dc 0-9)" \
       "$(grep -o '<circle\|<rect [^>]*>' <<<"$svg" | grep -vc 'width="12"')"
}
for page in run ab cmp; do
  browser --dump-dom "file://$dir/$page.html" >"$page.dom" || fail "chromium could not load $page.html"
  browser --window-size=820,2000 --screenshot="$dir/$page.png" "file://$dir/$page.html" >/dev/null || fail "no screenshot of $page.html"
  [ "$(head -c 8 "$page.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || fail "$page.png is not a PNG"
  [ "$(stat -c %s "$page.png")" -gt 20000 ] || fail "$page.png is nearly empty"
done
for chart in tok_s hit_rate mib_per_token stall acceptance; do
  read -r pts n <<<"$(marks run.dom $chart)"
  [ "$pts" = "$intervals" ] && [ "$n" = "$intervals" ] || fail "chart $chart: data-points $pts, $n marks; telemetry has $intervals intervals"
done
read -r pts n <<<"$(marks run.dom layer_hit_rate)"
[ "$pts" = 4 ] && [ "$n" = 4 ] || fail "per-layer chart: $pts points, $n bars, want 4 (3 MoE layers + MTP)"
grep -q "MTP (layer 4)" run.dom || fail "the per-layer chart does not label the MTP layer"
read -r pts n <<<"$(marks run.dom read_latency)"
[ "$pts" -ge 1 ] && [ "$n" = "$pts" ] || fail "latency histogram: $pts points, $n bars"
read -r pts n <<<"$(marks ab.dom ab)"
[ "$pts" = 28 ] && [ "$n" = 28 ] || fail "ab chart: $pts points, $n bars, want 28 (the table's 14 metrics, off and on)"
read -r pts n <<<"$(marks cmp.dom compare)"
[ "$pts" = 20 ] && [ "$n" = 20 ] || fail "comparison chart: $pts points, $n bars, want 20"
grep -q "<script" run.dom ab.dom cmp.dom && fail "the pages must need no scripts"
grep -Eq "(src|href)=.http" run.html ab.html cmp.html && fail "the pages must not reach the network"
echo "report: run, ab and comparison pages render in chromium with every chart ($intervals telemetry intervals)"
