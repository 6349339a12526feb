#!/bin/sh
# dsspec tokenize / detokenize end to end: exit codes, one-line errors, reference ids.
# usage: cli.sh DSSPEC MODEL_DIR DATA_DIR
set -u
dsspec=$1 model=$2 data=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
check() { # name, condition result
    if [ "$2" = 0 ]; then passes=$((passes + 1)); else fails=$((fails + 1)); echo "FAIL: $1"; fi
}
expect_out() { # name, expected stdout, command...
    name=$1 want=$2; shift 2
    got=$("$@" 2>"$tmp/err"); rc=$?
    [ $rc = 0 ] && [ "$got" = "$want" ]; r=$?
    [ $r = 0 ] || echo "  got rc=$rc: $got / $(cat "$tmp/err")"
    check "$name" $r
}
expect_error() { # name, exit code, stderr substring, command...
    name=$1 code=$2 msg=$3; shift 3
    "$@" >/dev/null 2>"$tmp/err"; rc=$?
    [ $rc = "$code" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -qF -- "$msg" "$tmp/err"; r=$?
    [ $r = 0 ] || echo "  got rc=$rc, stderr: $(cat "$tmp/err")"
    check "$name" $r
}
# ids from Hugging Face tokenizers for "Hello world": 19923, 2058; BOS is 0
expect_out "encode with BOS" "0,19923,2058" "$dsspec" tokenize -m "$model" -p "Hello world" --ids-only
expect_out "encode without BOS" "19923,2058" "$dsspec" tokenize -m "$model" -p "Hello world" --ids-only --no-bos
expect_out "decode" "<｜begin▁of▁sentence｜>Hello world" "$dsspec" detokenize -m "$model" --ids 0,19923,2058
expect_out "decode skip special" "Hello world" "$dsspec" detokenize -m "$model" --ids "0, 19923 2058" --skip-special
expect_out "tokenizer.json path" "19923,2058" "$dsspec" tokenize -m "$model/tokenizer.json" -p "Hello world" --ids-only --no-bos
printf 'Hello world' >"$tmp/in.txt"
expect_out "encode a file" "19923,2058" "$dsspec" tokenize -m "$model" -f "$tmp/in.txt" --ids-only --no-bos
want=$(od -An -tu4 -v "$data/chat/07_tool_call.ids" | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
expect_out "chat" "$want" "$dsspec" tokenize -m "$model" --chat "$data/chat/07_tool_call.json" --ids-only
expect_out "help" "0" sh -c "\"$dsspec\" tokenize --help >/dev/null; echo \$?"
expect_error "bad tokenizer.json" 1 'token "zz" is not in the vocab' "$dsspec" tokenize -m "$data/bad/merge_not_in_vocab" -p hi
expect_error "bad regex" 1 "rejected by PCRE2" "$dsspec" tokenize -m "$data/bad/bad_regex" -p hi
expect_error "missing model" 1 "/nonexistent-model" "$dsspec" tokenize -m /nonexistent-model -p hi
expect_error "no input" 2 "give exactly one of" "$dsspec" tokenize -m "$model"
expect_error "unknown flag" 2 "--bogus" "$dsspec" tokenize -m "$model" -p hi --bogus
echo '[{"role": "user"}]' >"$tmp/bad.json"
expect_error "bad chat" 1 'messages[0]: user "content" must be a string' "$dsspec" tokenize -m "$model" --chat "$tmp/bad.json"
expect_error "bad ids" 2 "'x1' is not a token id" "$dsspec" detokenize -m "$model" --ids 1,x1
expect_error "no ids" 2 "--ids LIST is required" "$dsspec" detokenize -m "$model"
echo "$passes passed, $fails failed"
[ $fails = 0 ]
