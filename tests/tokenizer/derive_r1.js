// Derives DeepSeek-R1's tokenizer files (DEST/r1/) from DeepSeek-V3's: the two files differ only in ids
// 128798/128799, which R1 turns into the added (not special, normalized) tokens <think> and </think>.
// The edit is textual so that everything else stays byte-identical to the upstream file.
'use strict';
const fs = require('fs');
const path = require('path');
const [dir, templatePath] = process.argv.slice(2);
const src = fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8');

function replaceAdded(text, id, content) {
  const re = new RegExp('\\{\\s*"id": ' + id + ',[^{}]*\\}');
  const m = text.match(re);
  if (!m) throw new Error('added token ' + id + ' not found');
  const indent = (m[0].match(/\n(\s*)"id"/) || [, '      '])[1];
  const close = (m[0].match(/\n(\s*)\}$/) || [, '    '])[1];
  const fields = [['id', id], ['content', content], ['single_word', false], ['lstrip', false],
                  ['rstrip', false], ['normalized', true], ['special', false]];
  const body = fields.map(([k, v]) => indent + JSON.stringify(k) + ': ' + JSON.stringify(v)).join(',\n');
  return text.replace(re, '{\n' + body + '\n' + close + '}');
}

let r1 = replaceAdded(src, 128798, '<think>');
r1 = replaceAdded(r1, 128799, '</think>');
const parsed = JSON.parse(r1);  // proves the edit kept the file valid
for (const t of parsed.added_tokens)
  if ((t.id === 128798 && t.content !== '<think>') || (t.id === 128799 && t.content !== '</think>'))
    throw new Error('edit failed');
fs.writeFileSync(path.join(dir, 'r1', 'tokenizer.json'), r1);

// A third variant exercises the added-token flags that DeepSeek's own files leave false, so the
// fuzz test can compare lstrip / rstrip / single_word handling with the reference.
function setFlags(text, id, flags) {
  const re = new RegExp('\\{\\s*"id": ' + id + ',[^{}]*\\}');
  const m = text.match(re);
  if (!m) throw new Error('added token ' + id + ' not found');
  let obj = m[0];
  for (const [k, v] of Object.entries(flags)) obj = obj.replace(new RegExp('"' + k + '": (true|false)'), '"' + k + '": ' + v);
  return text.replace(re, obj);
}
let flags = setFlags(r1, 128803, { lstrip: true, rstrip: true });        // <｜User｜>
flags = setFlags(flags, 128804, { single_word: true });                    // <｜Assistant｜>
flags = setFlags(flags, 128798, { lstrip: true, single_word: true });     // <think>
flags = setFlags(flags, 1, { rstrip: true });                              // <｜end▁of▁sentence｜>
JSON.parse(flags);
fs.mkdirSync(path.join(dir, 'flags'), { recursive: true });
fs.writeFileSync(path.join(dir, 'flags', 'tokenizer.json'), flags);

const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
config.model_max_length = 16384;
config.chat_template = fs.readFileSync(templatePath, 'utf8');
fs.writeFileSync(path.join(dir, 'r1', 'tokenizer_config.json'), JSON.stringify(config, null, 2) + '\n');
