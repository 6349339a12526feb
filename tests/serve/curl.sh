#!/bin/sh
# dsspec serve through curl: status codes, error bodies, limits, a reply and a stream.
# usage: curl.sh API_KEY URL   (the server runs with --api-key-file holding API_KEY and --max-body 4K)
set -u
key=$1; url=$2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME STATUS TEXT CURL_ARGS...: the reply's status is STATUS and its body contains TEXT.
expect() {
    name=$1; want=$2; text=$3; shift 3
    got=$(curl -s -o "$tmp/body" -w '%{http_code}' "$@")
    if [ "$got" != "$want" ]; then echo "FAIL $name: status $got, expected $want: $(head -c 300 "$tmp/body")"; fail=1; return; fi
    if ! grep -qF -- "$text" "$tmp/body"; then echo "FAIL $name: body lacks '$text': $(head -c 300 "$tmp/body")"; fail=1; fi
}
auth="Authorization: Bearer $key"
json="Content-Type: application/json"

expect "health needs no key" 200 '"status":"ok"' "$url/health"
expect "models without a key" 401 '"type":"invalid_request_error"' "$url/v1/models"
expect "models with a wrong key" 401 'API key' -H "Authorization: Bearer not-$key" "$url/v1/models"
expect "models" 200 '"id":"dsspec-tiny"' -H "$auth" "$url/v1/models"
expect "unknown route" 404 'no route /nope' -H "$auth" "$url/nope"
expect "GET on a POST route" 405 'takes POST' -H "$auth" "$url/v1/chat/completions"
expect "broken JSON" 400 'not valid JSON' -H "$auth" -H "$json" -d '{"messages": [' "$url/v1/chat/completions"
expect "not an object" 400 'must be a JSON object' -H "$auth" -H "$json" -d '[1, 2]' "$url/v1/completions"
expect "no prompt" 400 "'prompt' must be" -H "$auth" -H "$json" -d '{"max_tokens": 4}' "$url/v1/completions"
expect "top_p 0" 400 "'top_p' must be a number" -H "$auth" -H "$json" -d '{"prompt": "x", "top_p": 0}' "$url/v1/completions"
expect "stream not a bool" 400 "'stream' must be true or false" -H "$auth" -H "$json" -d '{"prompt": "x", "stream": "yes"}' "$url/v1/completions"
head -c 8000 /dev/zero | tr '\0' 'a' > "$tmp/big"
expect "body over --max-body" 413 'exceeds 4096 bytes' -H "$auth" -H "$json" --data-binary @"$tmp/big" "$url/v1/completions"
expect "empty body" 400 'not valid JSON' -H "$auth" -H "$json" --data-binary @/dev/null "$url/v1/completions"
expect "chat" 200 '"reasoning_content":' -H "$auth" -H "$json" \
    -d '{"model": "x", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "max_tokens": 8, "temperature": 0}' \
    "$url/v1/chat/completions"
expect "chat stream" 200 'data: [DONE]' -N -H "$auth" -H "$json" \
    -d '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 8, "stream": true}' \
    "$url/v1/chat/completions"
grep -q '"object":"chat.completion.chunk"' "$tmp/body" || { echo "FAIL chat stream: no chunk objects"; fail=1; }
expect "completion by token ids" 200 '"prompt_tokens":3' -H "$auth" -H "$json" -d '{"prompt": [0, 17, 42], "max_tokens": 2}' "$url/v1/completions"
expect "metrics" 200 'dsspec_requests_total{code="413"} 1' -H "$auth" "$url/metrics"
[ $fail = 0 ] && echo "serve: curl checks passed"
exit $fail
