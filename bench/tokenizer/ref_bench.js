// The reference's side of the tokenizer benchmark: Hugging Face tokenizers (npm tokenizers@0.23.2,
// Rust), one string at a time (a single encode does not use threads), same corpus and passes.
// usage: node ref_bench.js TOKENIZER_JSON CORPUS_DIR PASSES
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '..', '..', 'node_modules', 'tokenizers'));
const [file, dir, passesArg] = process.argv.slice(2);
const now = () => Number(process.hrtime.bigint()) / 1e9;
(async () => {
  const loads = [];
  for (let i = 0; i < 5; i++) { const t0 = now(); Tokenizer.fromFile(file); loads.push(now() - t0); }
  loads.sort((a, b) => a - b);
  const docs = fs.readdirSync(dir).filter((f) => f.endsWith('.txt')).map((f) => fs.readFileSync(path.join(dir, f), 'utf8'));
  const bytes = docs.reduce((s, d) => s + Buffer.byteLength(d), 0);
  const tok = Tokenizer.fromFile(file);
  let first = 0, best = Infinity, decodeBest = Infinity, tokens = 0;
  for (let p = 0; p < Number(passesArg || 5); p++) {
    let enc = 0, dec = 0; tokens = 0;
    for (const d of docs) {
      const t0 = now();
      const ids = (await tok.encode(d, null, { addSpecialTokens: false })).getIds();
      const t1 = now();
      await tok.decode(ids, false);
      dec += now() - t1; enc += t1 - t0; tokens += ids.length;
    }
    if (p === 0) first = enc;
    best = Math.min(best, enc); decodeBest = Math.min(decodeBest, dec);
  }
  const mb = bytes / 1e6;
  console.log(`reference load_ms_median ${(loads[2] * 1e3).toFixed(1)}`);
  console.log(`reference corpus_bytes ${bytes} tokens ${tokens}`);
  console.log(`reference encode_first_MBps ${(mb / first).toFixed(2)}`);
  console.log(`reference encode_best_MBps ${(mb / best).toFixed(2)}`);
  console.log(`reference decode_best_MBps ${(mb / decodeBest).toFixed(2)}`);
})();
