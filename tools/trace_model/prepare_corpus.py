#!/usr/bin/env python3
"""Prose and documentation text for the trace model, from Debian packages (run on the CPU machine).

The GPU machine has no network; its own text is the .py files of its site-packages (the code genre,
read there by tools/embedded/corpus.py). This script turns the files of a few Debian packages into
one gzip-compressed JSONL file of documents {"genre", "source", "name", "split", "text"} that the
training run carries along (.trace_carry/, ignored by git through .git/info/exclude).

Packages (Debian 12 "bookworm", fetched with `apt-get download`, unpacked with `dpkg-deb -x`):
  prose: r-cran-janeaustenr 1.0.0 (Jane Austen's six novels, decoded here from R's lazy-load
         database), debian-handbook 11.20220922 (en-US HTML -> text), dict-jargon 4.4.7 (the Jargon
         File), fortunes 1.99.1 (fortune cookies);
  docs:  python3.11-doc 3.11.2 (reStructuredText sources), perl-doc 5.36.0 (POD), git-doc 2.39.5
         (AsciiDoc), debian-reference-en 2.100 (text), debian-policy 4.6.2.0 (text),
         developers-reference 12.18 (reStructuredText).
Held out (never trained on): the novel "Persuasion" (the prose genre's context) and 3% of the
Python documentation pages by a hash of their path (the docs genre's context).

  mkdir -p /tmp/tm_debs && cd /tmp/tm_debs && apt-get download r-cran-janeaustenr debian-handbook \
      dict-jargon fortunes python3.11-doc perl-doc git-doc debian-reference-en debian-policy \
      developers-reference && for f in *.deb; do dpkg-deb -x $f /tmp/tm_ex; done
  python3 tools/trace_model/prepare_corpus.py --root /tmp/tm_ex --out .trace_carry/corpus.jsonl.gz
"""
import argparse
import bz2
import glob
import gzip
import hashlib
import html.parser
import json
import lzma
import os
import re
import struct
import zlib

HELDOUT_NOVEL = "persuasion"
DOCS_HELDOUT_PERCENT = 3


def digest_percent(name):
    return int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % 100


# ------------------------------------------------------------------------------------------------
# Jane Austen: R lazy-load database (Rdata.rdx index, Rdata.rdb compressed serialized objects).

def _r_unserialize_strings(x):
    """An R XDR serialization of a character vector -> list of str."""
    assert x[:2] == b"X\n", "not an XDR R serialization"
    p = 2
    version = struct.unpack(">I", x[p:p + 4])[0]
    p += 12
    if version == 3:
        n = struct.unpack(">I", x[p:p + 4])[0]
        p += 4 + n
    flags, count = struct.unpack(">II", x[p:p + 8])
    p += 8
    assert flags & 0xFF == 16, "not a STRSXP"
    out = []
    for _ in range(count):
        _, ln = struct.unpack(">Ii", x[p:p + 8])
        p += 8
        if ln < 0:
            out.append("")
            continue
        out.append(x[p:p + ln].decode("utf-8", "replace"))
        p += ln
    return out


def _r_decompress(blob):
    ulen = struct.unpack(">I", blob[:4])[0]
    for fn, skip in ((zlib.decompress, 4), (bz2.decompress, 5), (lzma.decompress, 5)):
        try:
            x = fn(blob[skip:])
        except Exception:  # noqa: BLE001 (try the next codec)
            continue
        if len(x) == ulen:
            return x
    raise ValueError("cannot decompress an R lazy-load object")


def austen(root):
    d = os.path.join(root, "usr/lib/R/site-library/janeaustenr/data")
    index = gzip.decompress(open(os.path.join(d, "Rdata.rdx"), "rb").read())
    rdb = open(os.path.join(d, "Rdata.rdb"), "rb").read()
    # The index is a small R list: variables' (offset, length) pairs, then their names. Read the
    # names and the INTSXP (offset, length) pairs in order (both simple to find in the XDR stream).
    names = re.findall(rb"\x00\x04\x00\t\x00\x00\x00.([a-z]+)", index, re.S)
    names = [n.decode() for n in names if n not in (b"names", b"variables", b"references", b"compressed")]
    pairs = [struct.unpack(">ii", m) for m in re.findall(rb"\x00\x00\x00\x0d\x00\x00\x00\x02(.{8})", index, re.S)]
    docs = []
    for name, (off, ln) in zip(names, pairs):
        lines = _r_unserialize_strings(_r_decompress(rdb[int(off):int(off) + int(ln)]))
        docs.append({"genre": "prose", "source": "r-cran-janeaustenr", "name": "austen/" + name,
                     "split": "heldout" if name == HELDOUT_NOVEL else "train", "text": "\n".join(lines)})
    if len(docs) != 6:
        raise SystemExit("janeaustenr: expected 6 novels, found %s" % names)
    return docs


# ------------------------------------------------------------------------------------------------
# HTML -> text (debian-handbook)

class _Text(html.parser.HTMLParser):
    BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "pre", "dt", "dd", "table"}
    SKIP_CLASSES = {"docnav", "banner", "title", "toc", "index"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []
        self.skip = 0
        self.stack = []
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        skip = tag in ("script", "style", "head") or a.get("id") in ("banner", "title") \
            or (a.get("class") or "").split(" ")[0] in self.SKIP_CLASSES
        if tag in ("br", "img", "meta", "link", "hr", "input"):
            if tag == "br":
                self.parts.append("\n")
            return
        self.stack.append((tag, skip))
        self.skip += skip
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        while self.stack:
            t, skip = self.stack.pop()
            self.skip -= skip
            if t == "pre":
                self.pre -= 1
            if t == tag:
                break
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.skip:
            return
        self.parts.append(data if self.pre else re.sub(r"\s+", " ", data))


def html_text(path):
    p = _Text()
    p.feed(open(path, encoding="utf-8", errors="replace").read())
    text = "".join(p.parts)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n[ \t]+(?=\S)", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def read_any(path):
    data = open(path, "rb").read()
    if path.endswith((".gz", ".dz")):
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace").replace("\r\n", "\n")


def doc(genre, source, name, text, split="train"):
    return {"genre": genre, "source": source, "name": name, "split": split, "text": text}


def collect(root):
    docs = austen(root)
    for f in sorted(glob.glob(os.path.join(root, "usr/share/doc/debian-handbook/html/en-US/*.html"))):
        t = html_text(f)
        if len(t) > 500:
            docs.append(doc("prose", "debian-handbook", os.path.basename(f), t))
    jargon = read_any(os.path.join(root, "usr/share/dictd/jargon.dict.dz"))
    for i in range(0, len(jargon), 50000):  # one document per 50 kB, cut at an entry boundary
        docs.append(doc("prose", "dict-jargon", "jargon/%d" % i, jargon[i:i + 50000]))
    for f in sorted(glob.glob(os.path.join(root, "usr/share/games/fortunes/*"))):
        if "." not in os.path.basename(f) and os.path.isfile(f):
            docs.append(doc("prose", "fortunes", os.path.basename(f), read_any(f).replace("\n%\n", "\n\n")))
    for f in sorted(glob.glob(os.path.join(root, "usr/share/doc/python3.11/html/_sources/**/*.rst.txt"), recursive=True)):
        rel = os.path.relpath(f, os.path.join(root, "usr/share/doc/python3.11/html/_sources"))
        split = "heldout" if digest_percent(rel) < DOCS_HELDOUT_PERCENT else "train"
        docs.append(doc("docs", "python3.11-doc", rel, read_any(f), split))
    for f in sorted(glob.glob(os.path.join(root, "usr/share/perl/5.36.0/pod/*.pod"))):
        docs.append(doc("docs", "perl-doc", os.path.basename(f), read_any(f)))
    for f in sorted(glob.glob(os.path.join(root, "usr/share/doc/git-doc/*.txt"))):
        docs.append(doc("docs", "git-doc", os.path.basename(f), read_any(f)))
    for f in sorted(glob.glob(os.path.join(root, "usr/share/developers-reference/_sources/*.rst.txt"))):
        docs.append(doc("docs", "developers-reference", os.path.basename(f), read_any(f)))
    for rel in ("usr/share/debian-reference/debian-reference.en.txt.gz", "usr/share/doc/debian-policy/policy.txt.gz"):
        f = os.path.join(root, rel)
        if os.path.exists(f):
            docs.append(doc("docs", "debian-reference-en" if "reference" in rel else "debian-policy", os.path.basename(f), read_any(f)))
    return [d for d in docs if d["text"].strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="/tmp/tm_ex", help="where the .deb files were unpacked")
    ap.add_argument("--out", default=".trace_carry/corpus.jsonl.gz")
    args = ap.parse_args()
    docs = collect(args.root)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    summary = {}
    for d in docs:
        k = "%s/%s/%s" % (d["genre"], d["source"], d["split"])
        n, b = summary.get(k, (0, 0))
        summary[k] = (n + 1, b + len(d["text"].encode()))
    for k, (n, b) in sorted(summary.items()):
        print("%-45s %5d docs %10d bytes" % (k, n, b))
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))


if __name__ == "__main__":
    main()
