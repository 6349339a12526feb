#!/usr/bin/env python3
"""Builds tests/tokenizer/corpus/ from real text found on a Debian 12 machine (see corpus/SOURCES.md).
Run once by hand (needs gettext's msgunfmt); the output is committed, the reference ids are made
by `node tests/tokenizer/ref.js corpus ...`. Each part is cut to a byte budget at a line boundary."""
import ast, glob, os, re, subprocess, sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')


def read(path):
    with open(path, 'rb') as f:
        return f.read().decode('utf-8', 'replace')


def cut(text, budget):
    data = text.encode('utf-8')
    if len(data) <= budget:
        return text
    data = data[:budget]
    data = data[:data.rfind(b'\n') + 1] or data
    return data.decode('utf-8', 'ignore')


def files_text(paths, budget):
    out = []
    for p in paths:
        if sum(len(x.encode()) for x in out) >= budget:
            break
        if os.path.isfile(p):
            out.append(read(p))
    return cut(''.join(out), budget)


def po_text(lang, budget):
    """msgid/msgstr pairs of the gettext catalogs of one language (translations of UI strings)."""
    out, size = [], 0
    for mo in sorted(glob.glob(f'/usr/share/locale/{lang}/LC_MESSAGES/*.mo')):
        try:
            po = subprocess.run(['msgunfmt', mo], capture_output=True, check=True).stdout.decode('utf-8', 'replace')
        except subprocess.CalledProcessError:
            continue
        out.append(po)
        size += len(po.encode())
        if size > budget * 2:
            break
    return cut(''.join(out), budget)


def emoji_text(budget):
    """Emoji (ZWJ families, flags, skin tones) with their names, from rich's emoji table."""
    src = sorted(glob.glob('/root/.pyenv/versions/*/lib/python3*/site-packages/pip/_vendor/rich/_emoji_codes.py'))[-1]
    pairs = [(n, ast.literal_eval('"' + e + '"')) for n, e in re.findall(r'"([^"]+)": "([^"]+)"', read(src))]
    # ZWJ sequences and flags first (they are what byte-level BPE must get right), then a sample
    special = [p for p in pairs if '\u200d' in p[1] or any(0x1F1E6 <= ord(c) <= 0x1F1FF for c in p[1])]
    rest = [p for p in pairs if p not in special]
    pairs = special[:len(special) // 2 * 2:2] + rest[::4]
    lines = []
    for i, (name, emo) in enumerate(pairs):
        name = name.replace('_', ' ')
        lines.append(f'{emo} {name}' if i % 3 else f'{name}: {emo}{emo} ({emo})')
    return cut('\n'.join(lines) + '\n', budget)


def mixed_text(parts, budget):
    """Real lines re-dressed with what the other parts lack: CRLF line ends, non-breaking spaces,
    ideographic spaces and DeepSeek's special-token strings inline."""
    specials = ['<｜begin▁of▁sentence｜>', '<｜User｜>', '<｜Assistant｜>', '<think>', '</think>',
                '<｜end▁of▁sentence｜>', '<｜tool▁calls▁begin｜>', '<｜tool▁sep｜>', '<｜▁pad▁｜>']
    lines = [l for t in parts for l in t.splitlines() if l.strip()]
    out = []
    for i, line in enumerate(lines[::7]):
        k = i % 6
        if k == 0: out.append(line + '\r\n')
        elif k == 1: out.append(line.replace(' ', '\u00a0', 3) + '\n')
        elif k == 2: out.append(specials[i % len(specials)] + line + '\n')
        elif k == 3: out.append(line + specials[(i * 7) % len(specials)] + '\r\n')
        elif k == 4: out.append(line.replace(' ', '\u3000', 2) + '\n\n')
        else: out.append('\t' + line + '  \n')
    return cut(''.join(out), budget)


def main():
    os.makedirs(OUT, exist_ok=True)
    parts = {
        'en_licenses': files_text(sorted(glob.glob('/usr/share/common-licenses/*')), 160_000),
        'code_c': files_text(sorted(glob.glob('/usr/include/*.h')), 90_000),
        'code_python': files_text(sorted(glob.glob('/root/.pyenv/versions/3.12.1/lib/python3.12/*.py')), 90_000),
        'code_perl': files_text(sorted(glob.glob('/usr/share/perl/5.36/*.pm')), 50_000),
        'code_cmake': files_text(sorted(glob.glob('/usr/share/cmake-3.25/Modules/Check*.cmake')), 40_000),
        'code_shell': files_text(sorted(p for p in glob.glob('/usr/bin/*') if os.path.isfile(p) and
                                        open(p, 'rb').read(2) == b'#!' and os.path.getsize(p) < 60_000), 50_000),
        'numbers_tzdata': files_text(['/usr/share/zoneinfo/tzdata.zi'], 50_000),
        'numbers_services': files_text(['/etc/services'], 15_000),
        'po_zh_CN': po_text('zh_CN', 110_000),
        'po_ja': po_text('ja', 110_000),
        'po_ko': po_text('ko', 90_000),
        'po_ru': po_text('ru', 90_000),
        'po_ar': po_text('ar', 80_000),
        'emoji': emoji_text(60_000),
    }
    parts['mixed_crlf_nbsp_specials'] = mixed_text([parts['en_licenses'], parts['po_zh_CN'], parts['code_c'],
                                                    parts['po_ru']], 60_000)
    for name, text in parts.items():
        with open(os.path.join(OUT, name + '.txt'), 'w', encoding='utf-8', newline='') as f:
            f.write(text)
        print(f'{name}: {len(text.encode())} bytes', file=sys.stderr)


if __name__ == '__main__':
    main()
