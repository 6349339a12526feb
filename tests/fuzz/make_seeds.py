#!/usr/bin/env python3
"""Rebuilds tests/fuzz/seeds/* and tests/fuzz/dicts/* from the real files in the tree.

usage: python3 tests/fuzz/make_seeds.py SYNTH_DIR RUN_REPORT AB_REPORT
  SYNTH_DIR   a directory fuzz_write_synth_checkpoint wrote (the index and checkpoint harnesses'
              own checkpoint: its index and config.json seed those harnesses)
  RUN_REPORT  a `dsspec run --report` file, AB_REPORT a `dsspec ab --report` file
Seeds larger than a harness's -max_len are left out (libFuzzer would cut them)."""
import glob, json, os, shutil, struct, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
seeds = os.path.join(root, "tests/fuzz/seeds")
dicts = os.path.join(root, "tests/fuzz/dicts")
synth, run_report, ab_report = sys.argv[1:4]


def put(harness, name, data, limit=65536):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > limit:
        return
    d = os.path.join(seeds, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path if os.path.isabs(path) else os.path.join(root, path), "rb") as f:
        return f.read()


def keys_of(obj, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(k)
            keys_of(v, out)
    elif isinstance(obj, list):
        for v in obj:
            keys_of(v, out)


def write_tokens(harness, tokens):
    os.makedirs(dicts, exist_ok=True)
    with open(os.path.join(dicts, harness + ".dict"), "w") as f:
        for t in dict.fromkeys(tokens):
            esc = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else
                          "".join("\\x%02x" % b for b in c.encode()) for c in t)
            f.write('"%s"\n' % esc)


def write_dict(harness, texts, extra=()):
    keys = set()
    for t in texts:
        try:
            keys_of(json.loads(t), keys)
        except ValueError:
            pass
    tokens = sorted('"%s"' % k for k in keys if k.isprintable() and len(k) < 64) + list(extra)
    tokens += ["{", "}", "[", "]", ":", ",", "null", "true", "false", "-1", "0", "1e308", "65", "4294967296", '""']
    write_tokens(harness, tokens)


shutil.rmtree(seeds, ignore_errors=True)
shutil.rmtree(dicts, ignore_errors=True)
models = ["models/dsspec-tiny", "tests/fixtures/tiny_r1", "tests/fixtures/tiny_b"]

configs = []
for m in models:
    for f in ("config.json", "generation_config.json"):
        configs.append(read(f"{m}/{f}"))
        put("config", f"{os.path.basename(m)}_{f}", configs[-1])
configs.append(read(f"{synth}/config.json"))
put("config", "synth_config.json", configs[-1])
put("checkpoint", "synth_config.json", configs[-1])
write_dict("config", configs)
write_dict("checkpoint", configs)

headers = []
for f in sorted(glob.glob(os.path.join(root, "tests/fixtures/*/*.safetensors")) + glob.glob(f"{synth}/*.safetensors")
                + glob.glob(os.path.join(root, "models/dsspec-tiny/*.safetensors"))):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        h = fh.read(n)
    headers.append(h)
    put("safetensors", os.path.basename(os.path.dirname(f)) + "_" + os.path.basename(f) + ".json", h)
write_dict("safetensors", headers, ["F8_E4M3", "BF16", "F32", "F16", "I64", "__metadata__"])

index = read(f"{synth}/model.safetensors.index.json")
put("index", "synth_index.json", index, 1 << 18)
write_dict("index", [index], [os.path.basename(f) for f in glob.glob(f"{synth}/*.safetensors")] + ["..", "/"])

toks = []
for f in sorted(glob.glob(os.path.join(root, "tests/tokenizer/data/*/tokenizer.json"))
                + glob.glob(os.path.join(root, "tests/tokenizer/data/bad/*/tokenizer.json"))):
    toks.append(read(f))
    put("tokenizer_load", os.path.basename(os.path.dirname(f)) + ".json", toks[-1])
write_dict("tokenizer_load", toks, ["ByteLevel", "BPE", "Split", "Sequence", "Isolated", "Removed", "MergedWithPrevious",
                                    "MergedWithNext", "Contiguous", "Digits", "Regex"])

tcfgs = []
for f in ["models/dsspec-tiny/tokenizer_config.json", "tests/tokenizer/data/tiny/tokenizer_config.json",
          "tests/tokenizer/data/bad/bad_config/tokenizer_config.json"]:
    tcfgs.append(read(f))
    put("tokenizer_config", f.replace("/", "_"), tcfgs[-1])
write_dict("tokenizer_config", tcfgs, ["AddedToken", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"])

chats = []
for f in sorted(glob.glob(os.path.join(root, "tests/tokenizer/data/chat/*.json"))):
    chats.append(read(f))
    put("chat", os.path.basename(f), chats[-1])
    put("encode", os.path.basename(f)[:-5] + ".gen.txt", read(f[:-5] + ".gen.txt"))
write_dict("chat", chats, ["system", "user", "assistant", "tool", "function", "</think>", "<think>"])

specials = [t["content"] for t in json.loads(read("models/dsspec-tiny/tokenizer.json"))["added_tokens"]]
for f in sorted(glob.glob(os.path.join(root, "tests/tokenizer/corpus/*.txt"))):
    put("encode", os.path.basename(f), read(f)[:1024])
write_tokens("encode", specials + ["\r\n", "   ", "\t", "123456", "'s", "'ll", "\xa0", "\u200b"])

for f in sorted(glob.glob(os.path.join(root, "tests/tokenizer/data/chat/*.ids"))):
    raw = read(f)
    ids = struct.unpack("<%di" % (len(raw) // 4), raw)
    put("decode", os.path.basename(f), b"".join(struct.pack("<H", i + 256) for i in ids if 0 <= i + 256 < 0xFF00))
put("decode", "raw_ids", b"\xff\xff\xff\xff\x7f\xff\x00\x00\x00\x80\x00\x01\x00\x11\x41")
with open(os.path.join(dicts, "decode.dict"), "w") as fh:  # raw 32-bit ids: INT32_MAX, INT32_MIN, -1
    fh.write('"\\xff\\xff\\xff\\xff\\x7f"\n"\\xff\\x00\\x00\\x00\\x80"\n"\\xff\\xff\\xff\\xff\\xff"\n')

trace = read("tools/embedded/trace_heldout.jsonl").split(b"\n")
put("trace", "embedded_64_tokens.jsonl", b"\n".join(trace[:64]) + b"\n")
put("trace", "embedded_8_tokens.jsonl", b"\n".join(trace[:8]) + b"\n")
put("trace", "hand.jsonl", b'{"3": [1, 2], "4": [2, 1]}\n\n{"3": [2], "5": []}\n{"4": [1, 1, 1]}\n')
write_dict("trace", [], ['"0"', '"3"', '"65535"', "1048575", "\n"])

put("report", "run_report.json", read(run_report))
put("report", "ab_report.json", read(ab_report))
write_dict("report", [read(run_report), read(ab_report)])

argvs = [["-p", "def fibonacci(n):", "-n", "64"], ["--chat", "-p", "Write a function", "-n", "300"],
         ["--chat=messages.json", "-n", "300"],
         ["-m", "/nvme/DeepSeek-R1", "-f", "prompt.txt", "-n", "20000", "--mem-budget", "24G", "--cache-policy", "lfu",
          "--ctx", "32768", "-t", "6", "--telemetry", "night.jsonl", "--report", "night.json", "--trace-out", "t.jsonl"],
         ["--ids", "3,17,42", "-n", "16", "--temp", "0", "--print-ids", "--mtp=off", "--kv-dtype", "bf16"],
         ["--ids=1 2 3", "--top-p", "0.9", "--seed", "18446744073709551615", "--io", "pread", "--queue-depth=8",
          "--prefetch", "off", "--cache-gib", "1.5", "--cpu-features", "avx2", "--prefill-chunk", "7", "--no-bos",
          "--ignore-eos", "--quiet", "--telemetry-every", "4"]]
for i, a in enumerate(argvs):
    put("flags", f"argv_{i}", "\0".join(a))
write_tokens("flags", ["-m", "-p", "-f", "--ids", "--chat", "--chat=", "--no-bos", "-n", "--ignore-eos", "--temp", "--top-p",
                       "--seed", "--mtp", "--mem-budget", "--cache-gib", "--cache-policy", "--prefetch", "--io", "--queue-depth",
                       "--ctx", "--kv-dtype", "-t", "--cpu-features", "--prefill-chunk", "--print-ids", "--quiet", "--telemetry",
                       "--telemetry-every", "--report", "--trace-out", "--help", "on", "off", "bf16", "f32", "lfu", "arc",
                       "uring", "avx512", "scalar", "1T", "1.5GiB", "nan", "inf", "-1", "1e308", "2147483648", "\0"])
