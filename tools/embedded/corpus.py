"""Training text for dsspec-tiny: Python sources (code, comments, docstrings) of installed packages.

Files are deduplicated by content (site-packages vendor the same modules many times) and split by a
hash of their path into train and held-out, so held-out is a different set of files. Part of the
training functions with docstrings are also given in R1's chat format, so that the chat template
(<｜User｜> ... <｜Assistant｜><think>\\n ... </think>) is something the model has seen.
"""
import ast
import hashlib
import os
from multiprocessing import Pool

MAX_FILE_BYTES = 400_000  # larger .py files are generated tables, not prose or code a person wrote


def _digest(s):
    return hashlib.sha1(s.encode("utf-8", "surrogatepass")).hexdigest()


def list_files(roots, exts=(".py",)):
    """(root, relative path) of every candidate file, sorted for reproducibility."""
    out = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith(exts):
                    out.append((root, os.path.relpath(os.path.join(dirpath, f), root)))
    return out


def read_text(path):
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, "rb") as fh:
            data = fh.read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    text = text.replace("\r\n", "\n")
    return text if text.strip() else None


def is_heldout(relpath, heldout_percent):
    return int(_digest(relpath)[:8], 16) % 1000 < heldout_percent * 10


def collect(roots, max_train_bytes, max_heldout_bytes, heldout_percent=1.0):
    """-> (train docs, held-out docs, stats). Docs are (relpath, text). Files are visited in the
    order of a hash of their path so a byte budget samples every package, not the first ones."""
    files = list_files(roots)
    files.sort(key=lambda rp: _digest(rp[1]))
    seen = set()
    train, held = [], []
    tb = hb = 0
    skipped = 0
    for root, rel in files:
        heldout = is_heldout(rel, heldout_percent)
        if (heldout and hb >= max_heldout_bytes) or (not heldout and tb >= max_train_bytes):
            if tb >= max_train_bytes and hb >= max_heldout_bytes:
                break
            continue
        text = read_text(os.path.join(root, rel))
        if text is None:
            skipped += 1
            continue
        h = _digest(text)
        if h in seen:
            skipped += 1
            continue
        seen.add(h)
        if heldout:
            held.append((rel, text))
            hb += len(text.encode())
        else:
            train.append((rel, text))
            tb += len(text.encode())
    stats = {"candidate_files": len(files), "train_files": len(train), "train_bytes": tb,
             "heldout_files": len(held), "heldout_bytes": hb, "skipped_or_duplicate": skipped}
    return train, held, stats


def _chat_samples_of(text, max_per_file=4):
    """Functions with a docstring -> (request, reasoning, code) triples."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node)
        if not doc or len(doc) < 20:
            continue
        code = ast.get_source_segment(text, node)
        if not code or len(code) > 3000:
            continue
        summary = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
        args = ", ".join(a.arg for a in node.args.args)
        request = f"Write a Python function `{node.name}({args})`: {summary}"
        reasoning = f"The function `{node.name}` takes ({args}). {summary}"
        out.append((request, reasoning, code))
        if len(out) >= max_per_file:
            break
    return out


def chat_documents(train_docs, every=8, workers=8):
    """R1 chat-format documents (without BOS/EOS: the packer adds them) from every `every`-th file."""
    texts = [t for i, (_, t) in enumerate(train_docs) if i % every == 0]
    with Pool(workers) as pool:
        per_file = pool.map(_chat_samples_of, texts, chunksize=64)
    docs = []
    for samples in per_file:
        for request, reasoning, code in samples:
            docs.append(f"<｜User｜>{request}<｜Assistant｜><think>\n{reasoning}\n</think>\n\n"
                        f"```python\n{code}\n```")
    return docs
