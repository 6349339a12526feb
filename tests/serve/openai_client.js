// dsspec serve through OpenAI's official Node client (npm openai) and a Prometheus text-format
// parser (npm parse-prometheus-text-format), neither written here. Replies are checked against
// `dsspec run` with the same prompt and sampling flags: the server must give the very same text.
// usage: node openai_client.js NODE_MODULES_DIR DSSPEC API_KEY URL
'use strict';
const { createRequire } = require('module');
const { spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [nmDir, dsspec, apiKey, url] = process.argv.slice(2);
const need = createRequire(path.resolve(nmDir, 'package.json'));
const openaiModule = need('openai');
const OpenAI = openaiModule.OpenAI || openaiModule.default || openaiModule;
const parsePrometheus = need('parse-prometheus-text-format');
const parseMetrics = parsePrometheus.default || parsePrometheus;

let failures = 0;
function check(cond, msg) {
    if (!cond) { failures++; console.error('FAIL: ' + msg); }
}
const codes = {};          // HTTP status -> responses the server sent us
const sent = (code) => { codes[code] = (codes[code] || 0) + 1; };
const usage = { prompt: 0, completion: 0 };
const addUsage = (u) => { usage.prompt += u.prompt_tokens; usage.completion += u.completion_tokens; };

const client = new OpenAI({ baseURL: url + '/v1', apiKey, maxRetries: 0, timeout: 600000 });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'dsspec-serve-'));

function dsspecRun(args) {
    const r = spawnSync(dsspec, ['run', '--quiet', ...args], { encoding: 'utf8', maxBuffer: 1 << 26 });
    if (r.status !== 0) throw new Error('dsspec run ' + args.join(' ') + ': exit ' + r.status + ': ' + r.stderr);
    return r.stdout.replace(/\n$/, ''); // run ends its text with one newline
}

// DeepSeek's split: reasoning up to "</think>", then the answer without its leading newlines.
function splitThink(text) {
    const at = text.indexOf('</think>');
    if (at < 0) return { reasoning: text, content: '' };
    return { reasoning: text.slice(0, at), content: text.slice(at + 8).replace(/^\n+/, '') };
}

async function expectError(status, promise, mention, what) {
    try {
        await promise;
        check(false, what + ': expected HTTP ' + status + ', got a reply');
    } catch (e) {
        check(e instanceof OpenAI.APIError, what + ': not an APIError: ' + e);
        check(e.status === status, what + ': status ' + e.status + ', expected ' + status);
        check(String(e.message).includes(mention), what + ': message "' + e.message + '" does not mention ' + mention);
        if (e.status) sent(e.status);
    }
}

async function models() {
    const list = await client.models.list();
    sent(200);
    const ids = list.data.map((m) => m.id);
    check(ids.length === 1 && ids[0] === 'dsspec-tiny', 'models: ' + JSON.stringify(ids));
}

async function chat() {
    const messages = [{ role: 'user', content: 'Write a Python function that returns the factorial of n.' }];
    const file = path.join(tmp, 'messages.json');
    fs.writeFileSync(file, JSON.stringify(messages));
    const want = dsspecRun(['--chat', file, '-n', '150', '--seed', '1']);
    check(want.includes('</think>'), 'the reference chat run must close its reasoning (else the split is untested)');
    const split = splitThink(want);
    const r = await client.chat.completions.create({ model: 'dsspec-tiny', messages, max_tokens: 150, seed: 1 });
    sent(200);
    addUsage(r.usage);
    const m = r.choices[0].message;
    check(m.role === 'assistant', 'chat: role ' + m.role);
    check(m.reasoning_content === split.reasoning, 'chat: reasoning_content differs from dsspec run:\n' + JSON.stringify(m.reasoning_content) + '\n' + JSON.stringify(split.reasoning));
    check(m.content === split.content, 'chat: content differs from dsspec run:\n' + JSON.stringify(m.content) + '\n' + JSON.stringify(split.content));
    check(r.usage.completion_tokens === 150 && r.choices[0].finish_reason === 'length', 'chat: usage ' + JSON.stringify(r.usage));
    check(r.object === 'chat.completion' && r.id.startsWith('chatcmpl-'), 'chat: object ' + r.object + ' id ' + r.id);
    // The same request streamed: the deltas add up to the same two fields.
    const stream = await client.chat.completions.create({ model: 'dsspec-tiny', messages, max_tokens: 150, seed: 1, stream: true, stream_options: { include_usage: true } });
    sent(200);
    let reasoning = '', content = '', finish = null, u = null, chunks = 0;
    for await (const c of stream) {
        chunks++;
        if (c.usage) u = c.usage;
        if (!c.choices.length) continue;
        reasoning += c.choices[0].delta.reasoning_content || '';
        content += c.choices[0].delta.content || '';
        finish = c.choices[0].finish_reason || finish;
    }
    addUsage(u);
    check(chunks > 10, 'chat stream: only ' + chunks + ' chunks');
    check(reasoning === split.reasoning && content === split.content, 'chat stream: text differs from the whole reply');
    check(finish === 'length' && u && u.completion_tokens === 150, 'chat stream: finish ' + finish + ' usage ' + JSON.stringify(u));
}

async function completion(params, flags, what) {
    const prompt = params.prompt;
    const want = Array.isArray(prompt) ? dsspecRun(['--ids', prompt.join(','), ...flags])
                                       : dsspecRun(['-p', prompt, ...flags]).slice(prompt.length); // run echoes a plain prompt
    const r = await client.completions.create({ model: 'dsspec-tiny', ...params });
    sent(200);
    addUsage(r.usage);
    check(r.choices[0].text === want, what + ': text differs from dsspec run:\n' + JSON.stringify(r.choices[0].text) + '\n' + JSON.stringify(want));
    const s = await client.completions.create({ model: 'dsspec-tiny', ...params, stream: true, stream_options: { include_usage: true } });
    sent(200);
    let text = '', finish = null, u = null;
    for await (const c of s) {
        if (c.usage) u = c.usage;
        if (c.choices.length) { text += c.choices[0].text; finish = c.choices[0].finish_reason || finish; }
    }
    addUsage(u);
    check(text === r.choices[0].text, what + ': streamed text differs from the whole reply');
    check(finish === r.choices[0].finish_reason, what + ': finish ' + finish + ' vs ' + r.choices[0].finish_reason);
    return r;
}

async function completions() {
    const greedy = await completion({ prompt: 'def f(x):', max_tokens: 48, temperature: 0 }, ['-n', '48', '--temp', '0'], 'greedy');
    await completion({ prompt: [0, 17, 42, 99], max_tokens: 24, temperature: 0 }, ['-n', '24', '--temp', '0'], 'greedy from ids');
    const full = greedy.choices[0].text;
    check(full.includes('import'), 'the greedy text must contain the stop string (else --stop is untested): ' + JSON.stringify(full));
    const stopped = await completion({ prompt: 'def f(x):', max_tokens: 48, temperature: 0, stop: ['import', 'zzz'] },
                                     ['-n', '48', '--temp', '0', '--stop', 'import', '--stop=zzz'], 'stop');
    check(stopped.choices[0].text === full.slice(0, full.indexOf('import')), 'stop: not cut at the stop string');
    check(stopped.choices[0].finish_reason === 'stop', 'stop: finish_reason ' + stopped.choices[0].finish_reason);
    await completion({ prompt: 'import numpy as np', max_tokens: 40, temperature: 0.8, top_p: 0.9, top_k: 20, min_p: 0.05, seed: 7 },
                     ['-n', '40', '--temp', '0.8', '--top-p', '0.9', '--top-k', '20', '--min-p', '0.05', '--seed', '7'], 'sampled');
}

async function errors() {
    await expectError(400, client.chat.completions.create({ model: 'm', messages: [] }), 'messages', 'empty messages');
    await expectError(400, client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 42 }] }), 'content', 'content 42');
    await expectError(400, client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], temperature: -1 }), 'temperature', 'temperature -1');
    await expectError(400, client.completions.create({ model: 'm', prompt: 'x', n: 2 }), "'n'", 'n 2');
    await expectError(400, client.completions.create({ model: 'm', prompt: 'x', max_tokens: 'many' }), 'max_tokens', 'max_tokens string');
    await expectError(400, client.completions.create({ model: 'm', prompt: 'x', stop: [''] }), 'stop', 'empty stop');
    await expectError(400, client.completions.create({ model: 'm', prompt: [1, -3] }), 'prompt', 'negative token id');
    await expectError(400, client.completions.create({ model: 'm', prompt: 'x '.repeat(5000) }), 'context', 'prompt longer than the context');
    await expectError(404, client.get('/nothing-here'), 'no route', 'unknown route');
    const stranger = new OpenAI({ baseURL: url + '/v1', apiKey: 'wrong-' + apiKey, maxRetries: 0 });
    await expectError(401, stranger.models.list(), 'API key', 'wrong key');
}

async function metrics() {
    const res = await fetch(url + '/metrics', { headers: { Authorization: 'Bearer ' + apiKey } });
    check(res.status === 200 && res.headers.get('content-type').startsWith('text/plain; version=0.0.4'), 'metrics: ' + res.status);
    const families = parseMetrics(await res.text());
    sent(200); // counted after this reply's text was made
    const by = {};
    for (const f of families) by[f.name] = f;
    return by;
}
const value = (by, name, labels) => {
    const f = by[name];
    if (!f) return undefined;
    const m = f.metrics.find((s) => !labels || Object.keys(labels).every((k) => s.labels && s.labels[k] === labels[k]));
    return m ? Number(m.value !== undefined ? m.value : m.count) : undefined;
};

async function checkMetrics() {
    const expectedCodes = { ...codes }; // before this scrape's own reply is counted
    const by = await metrics();
    for (const [code, n] of Object.entries(expectedCodes))
        check(value(by, 'dsspec_requests_total', { code }) === n, 'metrics: responses ' + code + ' = ' + value(by, 'dsspec_requests_total', { code }) + ', sent ' + n);
    check(value(by, 'dsspec_prompt_tokens_total') === usage.prompt, 'metrics: prompt tokens ' + value(by, 'dsspec_prompt_tokens_total') + ' vs usage ' + usage.prompt);
    check(value(by, 'dsspec_generated_tokens_total') === usage.completion, 'metrics: generated ' + value(by, 'dsspec_generated_tokens_total') + ' vs usage ' + usage.completion);
    check(by.dsspec_generated_tokens_total.type === 'COUNTER' && by.dsspec_queue_length.type === 'GAUGE', 'metrics: types');
    const drafts = value(by, 'dsspec_mtp_drafts_total'), accepted = value(by, 'dsspec_mtp_accepted_total');
    check(drafts > 0 && accepted > 0 && accepted <= drafts, 'metrics: MTP drafts ' + drafts + ' accepted ' + accepted);
    check(value(by, 'dsspec_decode_tokens_per_second') > 0, 'metrics: tok/s');
    const hits = by.dsspec_expert_cache_hits_total.metrics, misses = by.dsspec_expert_cache_misses_total.metrics;
    check(hits.length > 0 && hits.length === misses.length, 'metrics: per-layer hits/misses ' + hits.length + '/' + misses.length);
    const layerBytes = by.dsspec_expert_read_bytes_by_layer_total.metrics.reduce((a, m) => a + Number(m.value), 0);
    check(layerBytes === value(by, 'dsspec_expert_read_bytes_total') && layerBytes > 0, 'metrics: per-layer bytes ' + layerBytes + ' vs total ' + value(by, 'dsspec_expert_read_bytes_total'));
    const h = by.dsspec_expert_read_latency_seconds;
    check(h && h.type === 'HISTOGRAM', 'metrics: latency histogram missing');
    const buckets = Object.entries(h.metrics[0].buckets).map(([le, n]) => [le === '+Inf' ? Infinity : Number(le), Number(n)]).sort((a, b) => a[0] - b[0]);
    check(buckets.every((b, i) => i === 0 || b[1] >= buckets[i - 1][1]), 'metrics: buckets not cumulative');
    check(Number(h.metrics[0].count) === buckets[buckets.length - 1][1] && buckets[buckets.length - 1][0] === Infinity, 'metrics: +Inf bucket != count');
    check(Number(h.metrics[0].count) === value(by, 'dsspec_expert_reads_total'), 'metrics: histogram count ' + h.metrics[0].count + ' vs reads ' + value(by, 'dsspec_expert_reads_total'));
    check(value(by, 'dsspec_queue_length') === 0 && value(by, 'dsspec_requests_running') === 0, 'metrics: idle queue');
    return by;
}

async function readUntil(reader, pattern, sofar = '') {
    const dec = new TextDecoder();
    let text = sofar;
    while (!pattern.test(text)) {
        const { value: chunk, done } = await reader.read();
        if (done) break;
        text += dec.decode(chunk, { stream: true });
    }
    return text;
}

async function waitMetric(name, labels, want, what) {
    let v;
    for (let i = 0; i < 200; i++) {
        v = value(await metrics(), name, labels);
        if (v === want) return;
        await new Promise((r) => setTimeout(r, 100));
    }
    check(false, what + ': ' + name + ' stayed ' + v + ', expected ' + want);
}

// A long generation decodes while a second request waits: the second sees its place in the queue
// (header, SSE comment, /metrics), and when the first client goes away its generation stops.
async function queueAndDisconnect() {
    const headers = { 'Content-Type': 'application/json', Authorization: 'Bearer ' + apiKey };
    const body = (n, stream) => JSON.stringify({ model: 'm', prompt: 'def f(x):', max_tokens: n, temperature: 0, stream });
    const before = await metrics();
    const generatedBefore = value(before, 'dsspec_generated_tokens_total');
    const leaveA = new AbortController();
    const a = await fetch(url + '/v1/completions', { method: 'POST', headers, body: body(4000, true), signal: leaveA.signal });
    await readUntil(a.body.getReader(), /data: /);
    const b = await fetch(url + '/v1/completions', { method: 'POST', headers, body: body(8, true) });
    check(b.headers.get('x-queue-position') === '1', 'queue: X-Queue-Position ' + b.headers.get('x-queue-position'));
    const rb = b.body.getReader();
    const head = await readUntil(rb, /: queue position \d+\n\n/);
    check(head.includes(': queue position 1\n\n'), 'queue: no ": queue position 1" comment in ' + JSON.stringify(head));
    const during = await metrics();
    check(value(during, 'dsspec_queue_length') === 1 && value(during, 'dsspec_requests_running') === 1,
          'queue: /metrics queue_length ' + value(during, 'dsspec_queue_length') + ' running ' + value(during, 'dsspec_requests_running'));
    leaveA.abort();
    const rest = await readUntil(rb, /data: \[DONE\]/, head);
    check(rest.includes('data: [DONE]'), 'queue: the waiting request did not finish after the first client left');
    await waitMetric('dsspec_generations_total', { outcome: 'cancelled' }, 1, 'streaming client left');
    // A job's tokens are counted before its [DONE] is sent: one read after it finds them.
    const generated = value(await metrics(), 'dsspec_generated_tokens_total') - generatedBefore;
    check(generated >= 8 && generated < 4000 + 8, 'queue: the abandoned generation did not stop (' + generated + ' tokens)');
    // A non-streaming client that leaves while its reply is being generated.
    const leaveC = new AbortController();
    const c = fetch(url + '/v1/completions', { method: 'POST', headers, body: body(4000, false), signal: leaveC.signal }).catch(() => null);
    await waitMetric('dsspec_requests_running', null, 1, 'non-streaming request started');
    leaveC.abort();
    await c;
    await waitMetric('dsspec_generations_total', { outcome: 'cancelled' }, 2, 'non-streaming client left');
}

(async () => {
    try {
        await models();
        await chat();
        await completions();
        await errors();
        await checkMetrics();
        await queueAndDisconnect();
    } catch (e) {
        check(false, 'unexpected: ' + (e && e.stack ? e.stack : e));
    }
    fs.rmSync(tmp, { recursive: true, force: true });
    console.log(failures ? 'FAILED (' + failures + ')' : 'serve: the openai client and the Prometheus parser agree with dsspec run: all checks passed');
    process.exit(failures ? 1 : 0);
})();
