// Reference outputs from Hugging Face's tokenizers (npm tokenizers@0.23.2, the Rust library) and
// @huggingface/jinja. Used to make the committed goldens and, live, by the fuzz test.
//   node ref.js corpus TOKENIZER_JSON CORPUS_DIR OUT_DIR    each NAME.txt -> NAME.u32 (ids, u32 LE)
//   node ref.js cases  TOKENIZER_JSON OUT.bin              hand-picked edge cases + seeded random ones
//   node ref.js fuzz   TOKENIZER_JSON OUT.bin SEED COUNT   random mixed-script strings and id lists
//   node ref.js chat   TOKENIZER_DIR TEMPLATE CHAT_DIR      each NAME.json -> NAME.gen.txt, NAME.nogen.txt, NAME.ids
// Case file: "TKC1", then records {u8 kind; u32 len; bytes; u32 n; u32 ids[n]}, kind 0 = encode
// (bytes = input, possibly invalid UTF-8; ids = expected), 1/2 = decode without/with
// skip_special (ids = input, bytes = expected text).
'use strict';
const fs = require('fs');
const path = require('path');
const ROOT = path.resolve(__dirname, '..', '..');
const { Tokenizer } = require(path.join(ROOT, 'node_modules', 'tokenizers'));

const u32 = (ids) => Buffer.from(Uint32Array.from(ids).buffer);
const encodeIds = async (tok, s) => (await tok.encode(s, null, { addSpecialTokens: false })).getIds();

class CaseWriter {
  constructor() { this.parts = [Buffer.from('TKC1')]; this.count = 0; }
  add(kind, bytes, ids) {
    const head = Buffer.alloc(5); head.writeUInt8(kind, 0); head.writeUInt32LE(bytes.length, 1);
    const n = Buffer.alloc(4); n.writeUInt32LE(ids.length, 0);
    this.parts.push(head, bytes, n, u32(ids)); this.count++;
  }
  save(file) { fs.writeFileSync(file, Buffer.concat(this.parts)); }
}

// ---- deterministic random strings ----
function rng(seed) { // xorshift32
  let x = (seed >>> 0) || 0x9e3779b9;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 4294967296; };
}
const range = (lo, hi) => (r) => String.fromCodePoint(lo + Math.floor(r() * (hi - lo + 1)));
const pick = (list) => (r) => list[Math.floor(r() * list.length)];
// any scalar value of planes 0-3 and 14, assigned or not (catches Unicode-version differences)
const anyCodePoint = (r) => {
  let cp;
  do { cp = Math.floor(r() * 0x40000); } while (cp >= 0xd800 && cp <= 0xdfff);
  return String.fromCodePoint(r() < 0.05 ? 0xe0000 + (cp & 0xfff) : cp);
};
const SPECIAL = ['<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>', '<｜User｜>', '<｜Assistant｜>', '<think>',
  '</think>', '<｜tool▁calls▁begin｜>', '<｜tool▁sep｜>', '<｜▁pad▁｜>', '<｜fim▁hole｜>', '<｜User', '<think', '｜>', '<｜'];
const EMOJI = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷', '🇯🇵', '❤️', '🧑🏿‍💻', '✌🏻', '👩‍❤️‍💋‍👨', '🙂', '🎉', '⭐', '🫠'];
const WORDS = ['the', 'The', ' of', 'tokenizer', "don't", "It's", 'Ünïcödé', 'naïve', 'über', 'façade',
  'x', 'foo_bar', 'fooBar', 'HTTP', 'https://example.com/a?b=c', 'e.g.', '3.14159', '1,000,000', '2024-01-31',
  '12:30', '$5', '100%', '#include', '<stdio.h>', 'printf("%d\\n", x);', '==', '!=', '->', '::', '...'];
const POOLS = [
  [6, pick(WORDS)], [3, range(0x61, 0x7a)], [2, range(0x41, 0x5a)], [3, range(0x30, 0x39)],
  [3, pick([' ', ' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', ' \n', '\u00a0', '\u3000', '\u2028', '\u0085', '\u200b'])],
  [3, range(0x21, 0x2f)], [1, range(0x3a, 0x40)], [1, range(0x5b, 0x60)], [1, range(0x7b, 0x7e)],
  [3, range(0x4e00, 0x9fa5)], [1, range(0x3400, 0x4dbf)], [2, range(0x3041, 0x3096)], [2, range(0x30a1, 0x30fa)],
  [2, range(0xac00, 0xd7a3)], [2, range(0x0410, 0x044f)], [2, range(0x0621, 0x064a)], [1, range(0x0905, 0x0939)],
  [1, range(0x0e01, 0x0e30)], [1, range(0x05d0, 0x05ea)], [1, range(0x03b1, 0x03c9)], [1, range(0x00c0, 0x00ff)],
  [1, range(0x0300, 0x036f)], [1, range(0xff01, 0xff5e)], [1, range(0x2200, 0x22ff)], [1, range(0x2460, 0x24ff)],
  [1, range(0x3000, 0x303f)], [1, range(0x0660, 0x0669)], [1, range(0xff10, 0xff19)], [1, range(0x2150, 0x218b)],
  [2, pick(EMOJI)], [1, range(0x1f300, 0x1f5ff)], [1, range(0x1d400, 0x1d4ff)], [2, pick(SPECIAL)],
  [2, anyCodePoint], [1, range(0x1fa70, 0x1faff)], [1, range(0x31350, 0x323af)], [1, range(0x13460, 0x143ff)],
];
const POOL_TOTAL = POOLS.reduce((s, [w]) => s + w, 0);
function randomPiece(r) {
  let x = r() * POOL_TOTAL;
  for (const [w, f] of POOLS) { if ((x -= w) < 0) return f(r); }
  return 'a';
}
function randomString(r, maxPieces) {
  const n = 1 + Math.floor(r() * maxPieces);
  let s = '';
  for (let i = 0; i < n; i++) {
    const piece = randomPiece(r);
    s += r() < 0.15 ? piece.repeat(1 + Math.floor(r() * 6)) : piece;
  }
  return s;
}
// Raw bytes with some invalid UTF-8 spliced in; the reference sees them as a WHATWG decoder (=
// Rust's from_utf8_lossy) does.
const BAD = [[0xff], [0xc0, 0xaf], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98], [0x80], [0xf4, 0x90, 0x80, 0x80],
  [0xe0, 0x80], [0xc3], [0xf8, 0x88, 0x80, 0x80, 0x80]];
function withInvalidBytes(r, s) {
  const parts = [Buffer.from(s, 'utf8')];
  const k = 1 + Math.floor(r() * 3);
  for (let i = 0; i < k; i++) parts.splice(Math.floor(r() * (parts.length + 1)), 0, Buffer.from(pick(BAD)(r)));
  return Buffer.concat(parts);
}
function randomIds(r, vocab) {
  const n = 1 + Math.floor(r() * 24), ids = [];
  for (let i = 0; i < n; i++) {
    const x = r();
    ids.push(x < 0.1 ? Math.floor(r() * 3) : x < 0.2 ? 128000 + Math.floor(r() * 815)
      : x < 0.23 ? vocab + Math.floor(r() * 1000) : x < 0.5 ? 100 + Math.floor(r() * 200) : Math.floor(r() * 128000));
  }
  return ids;
}

async function addRandom(w, tok, seed, count) {
  const r = rng(seed);
  for (let i = 0; i < count; i++) {
    const s = randomString(r, 40);
    if (r() < 0.2) {
      const bytes = withInvalidBytes(r, s);
      w.add(0, bytes, await encodeIds(tok, bytes.toString('utf8')));
    } else {
      w.add(0, Buffer.from(s, 'utf8'), await encodeIds(tok, s));
    }
    if (i % 4 === 0) {
      const ids = randomIds(r, 128815);
      w.add(1, Buffer.from(await tok.decode(ids, false), 'utf8'), ids);
      w.add(2, Buffer.from(await tok.decode(ids, true), 'utf8'), ids);
    }
  }
}

const EDGE = ['', ' ', '  ', '\n', '\r\n', '\t\t', 'a', 'Hello world', ' Hello', 'Hello  world', 'Hello\n\nworld',
  'x   \n\n  y', '    indented()', '\t\tfoo = bar;\t', 'a\u00a0b', 'x\u3000y', 'x\u0085y', 'z\u2028', '\u200b', 'ab\u180ecd',
  '123', '1234567', '١٢٣٤', '१२३', '½ ⅓ Ⅻ', '3.14159', '2024-01-31T12:30:00Z', '$1,234.56', '12:30pm',
  '你好世界', '你好，世界！', '東京都渋谷区', 'ひらがなカタカナ', 'ｶﾀｶﾅ', '한국어 텍스트', 'Привет, мир!', 'مرحبا بالعالم',
  'שלום', 'नमस्ते', 'สวัสดี', 'Ελληνικά', 'e\u0301', '👨‍👩‍👧‍👦 family', '🇫🇷🇯🇵', '🏳️‍🌈', '👍🏽',
  '<｜begin▁of▁sentence｜>', 'abc<｜begin▁of▁sentence｜>def', '<｜User｜>hi<｜Assistant｜>', '<think>\nfoo\n</think>\n\nbar',
  '<think><think></think>', '<｜User', '<｜User｜', '<<｜User｜>>', ' <｜User｜> ', '<｜▁pad▁｜>', '<｜fim▁hole｜>',
  "I'm don't we'll they've", "'s 't 'RE", 'foo.bar(baz)', '!!!???', '...', '—–-', '«»“”', 'a-b_c', '#!/bin/sh\n',
  'int main(void) {\n\treturn 0;\n}\n', 'def f(x):\n    return x ** 2\n', 'SELECT * FROM t WHERE a = 1;',
  '    ', '\n\n\n\n', ' \n \n ', '\r\n\r\n', 'a\r\nb\r\n', 'x'.repeat(300), ' '.repeat(100), '你'.repeat(200),
  '😀'.repeat(50), '1'.repeat(50), 'ab'.repeat(100)];

async function main() {
  const [cmd, ...a] = process.argv.slice(2);
  if (cmd === 'corpus') {
    const tok = Tokenizer.fromFile(a[0]);
    let total = 0;
    for (const f of fs.readdirSync(a[1]).filter((f) => f.endsWith('.txt')).sort()) {
      const ids = await encodeIds(tok, fs.readFileSync(path.join(a[1], f), 'utf8'));
      fs.writeFileSync(path.join(a[2], f.replace(/\.txt$/, '.u32')), u32(ids));
      console.log(f, ids.length); total += ids.length;
    }
    console.log('total', total);
  } else if (cmd === 'cases' || cmd === 'fuzz') {
    const tok = Tokenizer.fromFile(a[0]);
    const w = new CaseWriter();
    if (cmd === 'cases') {
      for (const s of EDGE) w.add(0, Buffer.from(s, 'utf8'), await encodeIds(tok, s));
      for (const b of BAD) {
        const bytes = Buffer.concat([Buffer.from('a'), Buffer.from(b), Buffer.from('b c')]);
        w.add(0, bytes, await encodeIds(tok, bytes.toString('utf8')));
      }
      const fixedIds = [[0, 19923, 2058, 1], [0, 1, 2, 128798, 128799, 128803, 128804], [16, 223, 99999999],
        [30594, 3427], [2058, 129280, 128815, 5]];
      for (const ids of fixedIds) {
        w.add(1, Buffer.from(await tok.decode(ids, false), 'utf8'), ids);
        w.add(2, Buffer.from(await tok.decode(ids, true), 'utf8'), ids);
      }
      await addRandom(w, tok, 20250131, 1000);
    } else {
      await addRandom(w, tok, Number(a[2]), Number(a[3]));
    }
    w.save(a[1]);
    console.log(`${a[1]}: ${w.count} cases`);
  } else if (cmd === 'chat') {
    const { Template } = require(path.join(ROOT, 'node_modules', '@huggingface', 'jinja'));
    const tok = Tokenizer.fromFile(path.join(a[0], 'tokenizer.json'));
    const config = JSON.parse(fs.readFileSync(path.join(a[0], 'tokenizer_config.json'), 'utf8'));
    const template = new Template(fs.readFileSync(a[1], 'utf8'));
    const bos = config.bos_token.content, eos = config.eos_token.content;
    for (const f of fs.readdirSync(a[2]).filter((f) => f.endsWith('.json')).sort()) {
      const messages = JSON.parse(fs.readFileSync(path.join(a[2], f), 'utf8'));
      const base = path.join(a[2], f.replace(/\.json$/, ''));
      const gen = template.render({ messages, bos_token: bos, eos_token: eos, add_generation_prompt: true });
      const nogen = template.render({ messages, bos_token: bos, eos_token: eos, add_generation_prompt: false });
      fs.writeFileSync(base + '.gen.txt', gen);
      fs.writeFileSync(base + '.nogen.txt', nogen);
      fs.writeFileSync(base + '.ids', u32(await encodeIds(tok, gen)));
      console.log(f, gen.length);
    }
  } else {
    console.error('usage: see the header of ref.js');
    process.exit(2);
  }
}
main().catch((e) => { console.error('ref.js:', e.message); process.exit(1); });
