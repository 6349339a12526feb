#!/bin/sh
# The CLI's llama.cpp habits: --version; -c/--ctx-size, --top-k, --min-p, --stop, -v; --flag=value
# giving the same result as --flag value in every subcommand; one --chat FILE (and --chat-wrap);
# threads defaulting to the physical cores.
# usage: cli_habits.sh DSSPEC
set -u
d=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $*"; fail=1; }
same() { # NAME CMD_A -- CMD_B: both succeed with the same stdout
    name=$1; shift
    a=""; while [ "$1" != "--" ]; do a="$a '$1'"; shift; done; shift
    b=""; for x in "$@"; do b="$b '$x'"; done
    eval "$d $a" >"$tmp/a" 2>"$tmp/ea" || { bad "$name: '$a' failed: $(cat "$tmp/ea")"; return; }
    eval "$d $b" >"$tmp/b" 2>"$tmp/eb" || { bad "$name: '$b' failed: $(cat "$tmp/eb")"; return; }
    [ -s "$tmp/a" ] || { bad "$name: no output"; return; }
    cmp -s "$tmp/a" "$tmp/b" || bad "$name: outputs differ: $(head -c 200 "$tmp/a") / $(head -c 200 "$tmp/b")"
}

# --version
"$d" --version >"$tmp/v" || bad "--version exits non-zero"
for want in "dsspec " "(git commit " "kernel path: " "io backend: " "embedded model: "; do
    grep -qF "$want" "$tmp/v" || bad "--version lacks '$want': $(cat "$tmp/v")"
done

# aliases and --flag=value, subcommand by subcommand
ids="--ids 0,17,42 -n 6 --temp 0 --print-ids --quiet"
same "run -c" run $ids --ctx 64 -- run $ids -c 64
same "run --ctx-size=" run $ids --ctx 64 -- run $ids --ctx-size=64
same "run --n-predict=" run --ids 0,17,42 -n 6 --temp 0 --print-ids --quiet -- run --ids=0,17,42 --n-predict=6 --temp=0 --print-ids --quiet
same "run --top-k 1 is greedy" run $ids -- run --ids 0,17,42 -n 6 --temp 1 --top-k 1 --print-ids --quiet
same "run --min-p=1 is greedy" run $ids -- run --ids 0,17,42 -n 6 --temp=1 --min-p=1 --print-ids --quiet
for form in "--ids 0,17,42 -n 6 --temp 0" "--ids=0,17,42 --n-predict=6 --temp=0"; do
    # shellcheck disable=SC2086
    "$d" ab $form >"$tmp/ab" 2>&1 && grep -q "greedy outputs identical *yes" "$tmp/ab" || bad "ab $form: $(cat "$tmp/ab")"
done
same "tokenize" tokenize -p "def f(x):" --ids-only -- tokenize --prompt="def f(x):" --ids-only
same "detokenize" detokenize --ids 0,17,42 -- detokenize --ids=0,17,42
same "inspect" inspect -m "$("$d" --version | sed -n 's/^embedded model: //p')" -- inspect --model="$("$d" --version | sed -n 's/^embedded model: //p')"
same "eval" eval --ids 0,17,42 --ppl -t 1 -- eval --ids=0,17,42 --ppl --threads=1
"$d" run --ids 0,17,42 -n 16 --temp 0 --quiet --print-ids --trace-out "$tmp/trace.jsonl" --report "$tmp/r.json" >/dev/null || bad "run --trace-out"
same "cache-sim" cache-sim --trace "$tmp/trace.jsonl" --slots 8 --policy lru -- cache-sim --trace="$tmp/trace.jsonl" --slots=8 --policy=lru
same "report" report "$tmp/r.json" -- report "$tmp/r.json" --html="$tmp/r.html"
[ -s "$tmp/r.html" ] || bad "report --html= wrote nothing"
"$d" serve --port=99999 >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q -- "--port: expected an integer" "$tmp/e" || bad "serve --port=99999: $(cat "$tmp/e")"
# serve's engine flags are run's, with run's help text (serve once had its own copies: --mtp on|off
# only, "--ctx (default 4096)" where the plan picks it)
"$d" run --help | sed -n '/^speculation and memory:/,/^output and telemetry:/p' | sed '$d' >"$tmp/run_help"
"$d" serve --help | sed -n '/^speculation and memory:/,$p' >"$tmp/serve_help"
[ -s "$tmp/run_help" ] && cmp -s "$tmp/run_help" "$tmp/serve_help" || bad "serve --help's engine flags differ from run's: $(diff "$tmp/run_help" "$tmp/serve_help" | head -5)"
"$d" serve --mtp auto --port 99999 >/dev/null 2>"$tmp/e"; grep -q -- "--mtp" "$tmp/e" && bad "serve --mtp auto refused: $(cat "$tmp/e")"

# --stop: the text stops before the stop string, which is not printed; the report says why
"$d" run -p "def f(x):" -n 48 --temp 0 --quiet >"$tmp/full" || bad "run"
grep -q "import" "$tmp/full" || bad "the greedy text must contain 'import' (else --stop is untested)"
"$d" run -p "def f(x):" -n 48 --temp 0 --quiet --stop import --stop=zzz --report "$tmp/s.json" >"$tmp/stopped" || bad "run --stop"
grep -q "import" "$tmp/stopped" && bad "--stop import: the stop string was printed"
want=$(awk 'BEGIN{RS="\001"} {i = index($0, "import"); printf "%s", substr($0, 1, i - 1)}' "$tmp/full")
got=$(cat "$tmp/stopped")
[ "$got" = "$want" ] || bad "--stop import: '$got' is not the text up to it, '$want'"
grep -q '"stopped_by":[[:space:]]*"stop"' "$tmp/s.json" || bad "--stop: report stopped_by is not \"stop\""
"$d" run -p x --stop "" >/dev/null 2>"$tmp/e"; [ $? = 2 ] || bad "--stop '' must be a usage error"

# one --chat FILE everywhere; --chat-wrap for one user turn; -v shows the prompt's ids
printf '[{"role": "user", "content": "Write a function."}]' >"$tmp/m.json"
same "run --chat FILE = --chat=FILE" run --chat "$tmp/m.json" -n 6 --temp 0 --print-ids --quiet -- run --chat="$tmp/m.json" -n 6 --temp 0 --print-ids --quiet
same "run --chat FILE = --chat-wrap" run --chat "$tmp/m.json" -n 6 --temp 0 --print-ids --quiet -- run -p "Write a function." --chat-wrap -n 6 --temp 0 --print-ids --quiet
"$d" run --chat "$tmp/m.json" -n 1 --temp 0 --print-ids --quiet -v 2>"$tmp/e" >/dev/null
want=$("$d" tokenize --chat "$tmp/m.json" --ids-only | tr ',' ' ')
grep -qF "prompt of $(echo "$want" | wc -w) tokens: $want" "$tmp/e" || bad "-v: '$(cat "$tmp/e")' does not show the ids tokenize --chat gives ($want)"
"$d" run --chat -p "hi" >/dev/null 2>"$tmp/e"; [ $? = 2 ] && grep -q -- "--chat needs a value, got the flag '-p'" "$tmp/e" || bad "run --chat -p: $(cat "$tmp/e")"

# threads: the default is the physical cores
"$d" run --help | grep -q "default: the physical cores" || bad "run --help does not give the threads default"
[ $fail = 0 ] && echo "cli habits: all checks passed"
exit $fail
