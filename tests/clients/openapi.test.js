// docs/openapi.yaml against the running server. The document itself is checked with an OpenAPI
// 3.1 validator; then every operation it lists is called, and every response's status, media
// type and body must be the documented ones (schemas say additionalProperties: false, so a
// field that appears or disappears fails here). A route the server answers that the document
// lacks fails too, as does an operation the scenario never reached. The stop-time dump a
// webhook receiver gets is checked against the document's webhooks.sessionStopped.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import crypto from 'node:crypto';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';
import { Validator } from '@seriousme/openapi-schema-validator';
import { startStack } from './harness.js';

const spec = YAML.parse(readFileSync(new URL('../../docs/openapi.yaml', import.meta.url), 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(spec, 'openapi');

const HOOK_SECRET = 'hook-secret-0123456789abcdef';
const AGORA_SECRET = 'agora-secret-0123456789abcdef';
const covered = new Set();
let stack;
let receiver;
const dumps = [];

const pointer = (...segs) =>
  '#/' + segs.map((s) => encodeURIComponent(String(s).replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');

function deref(obj) {
  while (obj && obj.$ref) {
    obj = obj.$ref.slice(2).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((o, k) => o[k], spec);
  }
  return obj;
}

function validate(ptr, value, what) {
  const v = ajv.compile({ $ref: 'openapi' + ptr });
  assert.ok(v(value), `${what}: ${ajv.errorsText(v.errors)}\n${JSON.stringify(value).slice(0, 600)}`);
}

function operationOf(method, path) {
  // literal segments win over {params}: /v1/sessions/import is not a session id
  const byLiteral = Object.keys(spec.paths).sort((a, b) =>
    (a.match(/\{/g) || []).length - (b.match(/\{/g) || []).length);
  const tpl = byLiteral.find((t) =>
    new RegExp('^' + t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$')
      .test(path));
  assert.ok(tpl, `${method} ${path}: the server answers a path docs/openapi.yaml does not list`);
  const op = spec.paths[tpl][method.toLowerCase()];
  assert.ok(op, `${method} ${tpl}: the method is not documented`);
  return { tpl, op };
}

// One call; its response must be documented. Returns { status, body (parsed), headers }.
async function call(method, path, { body, raw, key = 'admin-key-0123456789abcdef', headers = {} } = {}) {
  const h = { ...headers };
  if (key) h.Authorization = `Bearer ${key}`;
  if (body !== undefined || raw !== undefined) h['Content-Type'] = 'application/json';
  const url = stack.baseURL.replace(/\/v1$/, '') + path;
  const r = await fetch(url, { method, headers: h, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
  const text = await r.text();
  const { tpl, op } = operationOf(method, new URL(url).pathname);
  covered.add(`${method} ${tpl}`);
  const resp = op.responses[String(r.status)];
  assert.ok(resp, `${method} ${tpl}: status ${r.status} is not documented (${text.slice(0, 200)})`);
  const media = (r.headers.get('content-type') || '').split(';')[0].trim();
  const content = deref(resp).content || {};
  assert.ok(content[media], `${method} ${tpl} ${r.status}: ${media} is not documented`);
  let parsed = text;
  if (media === 'application/json') {
    parsed = JSON.parse(text);
    const base = resp.$ref ? resp.$ref : pointer('paths', tpl, method.toLowerCase(), 'responses', r.status);
    validate(base + pointer('content', media, 'schema').slice(1), parsed, `${method} ${tpl} ${r.status}`);
  }
  return { status: r.status, body: parsed, headers: r.headers };
}

async function waitFor(pred, what, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await pred();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

before(async () => {
  receiver = http.createServer((req, res) => {
    let data = '';
    req.on('data', (d) => (data += d));
    req.on('end', () => {
      dumps.push({ headers: req.headers, body: data });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
  const hook = `http://127.0.0.1:${receiver.address().port}/hook`;
  stack = await startStack({
    config: `auth:
  client_keys: [client-key-0123456789abcdef]
  admin_keys: [admin-key-0123456789abcdef]
webhooks:
  - {url: "${hook}", secret: ${HOOK_SECRET}, events: [103, 102]}
notifications:
  agora_secret: ${AGORA_SECRET}
`,
  });
});

after(async () => {
  await stack.stop();
  receiver.close();
});

test('the document is valid OpenAPI 3.1', async () => {
  const res = await new Validator().validate(spec);
  assert.ok(res.valid, JSON.stringify(res.errors, null, 2));
  assert.equal(spec.openapi, '3.1.0');
});

test('every route answers as documented', async () => {
  const chat = (sid, extra = {}) => call('POST', '/v1/chat/completions', {
    key: 'client-key-0123456789abcdef', headers: { 'X-Session-Id': sid, 'X-User-Id': 'u-' + sid },
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }], ...extra },
  });
  assert.equal((await call('GET', '/healthz', { key: null })).status, 200);
  assert.equal((await call('GET', '/metrics', { key: null })).status, 200);
  for (const sid of ['s1', 's2', 's3']) assert.equal((await chat(sid)).status, 200);
  const streamed = await chat('s1', { stream: true });
  assert.match(streamed.body, /data: \[DONE\]/);
  assert.equal((await call('GET', '/v1/models', { key: 'client-key-0123456789abcdef' })).status, 200);
  assert.equal((await call('POST', '/v1/embeddings', { key: 'client-key-0123456789abcdef',
    body: { model: 'e', input: 'hi' } })).status, 200);
  assert.equal((await call('POST', '/v1/chat/completions', { key: 'client-key-0123456789abcdef', raw: '{' })).status, 400);
  assert.equal((await call('POST', '/v1/chat/completions', { key: 'nope', body: {} })).status, 401);

  // sessions
  const page = await call('GET', '/v1/sessions?limit=2');
  assert.equal(page.body.sessions.length, 2);
  assert.equal((await call('GET', `/v1/sessions?cursor=${page.body.next}`)).body.sessions.length, 1);
  assert.equal((await call('GET', '/v1/sessions?status=DONE')).status, 400);
  assert.equal((await call('GET', '/v1/sessions', { key: 'wrong' })).status, 401);
  assert.equal((await call('GET', '/v1/sessions/s1')).body.turns, 2); // the stream was a retry: its reply replaced the first
  assert.equal((await call('GET', '/v1/sessions/nope')).status, 404);
  assert.equal((await call('PATCH', '/v1/sessions/s1', { body: { labels: { a: 'b' } } })).status, 200);
  assert.equal((await call('PATCH', '/v1/sessions/s1', { body: { status: 'x' } })).status, 400);
  assert.equal((await call('PATCH', '/v1/sessions/s1', { raw: 'x'.repeat(5 * 1024 * 1024) })).status, 413);
  assert.equal((await call('GET', '/v1/sessions/s1/history')).body.contents.length, 2);
  assert.equal((await call('GET', '/v1/sessions/s1/history?format=full&limit=1')).body.contents.length, 1);
  assert.match((await call('GET', '/v1/sessions/s1/history?format=text')).body, /^USER: hello/);
  assert.equal((await call('GET', '/v1/sessions/s1/history?format=xml')).status, 400);
  assert.equal((await call('GET', '/v1/agents/s1/history')).status, 200);
  const update = { properties: { llm: { system_messages: ['Be brief.'], params: { max_tokens: 64 } } } };
  assert.deepEqual((await call('POST', '/v1/sessions/s1/update', { body: update })).body.runtime_params, { max_tokens: 64 });
  assert.equal((await call('POST', '/v1/agents/s1/update', { body: update })).status, 200);
  assert.equal((await call('POST', '/v1/agents/s1/update', { body: { properties: {} } })).status, 400);
  const snap = await call('GET', '/v1/sessions/s1/export');
  assert.equal(snap.body.turns.length, 2);
  assert.equal((await call('POST', '/v1/sessions/import', { body: snap.body })).status, 409);
  assert.equal((await call('DELETE', '/v1/sessions/s1')).status, 200);
  assert.equal((await call('POST', '/v1/sessions/import', { body: { format: 'x' } })).status, 400);
  assert.equal((await call('POST', '/v1/sessions/import', { body: snap.body })).status, 201);
  assert.deepEqual((await call('GET', '/v1/sessions/s1/export')).body, snap.body);

  // users
  const mem = { summary: 'Likes cats.', facts: [{ category: 'pet', key: 'cat', value: 'Misu' }] };
  assert.equal((await call('PUT', '/v1/users/u-s3/memory', { body: mem })).body.facts.length, 1);
  assert.equal((await call('PUT', '/v1/users/u-s3/memory', { body: { facts: 1 } })).status, 400);
  assert.equal((await call('GET', '/v1/users/u-s3/memory')).body.summary.text, 'Likes cats.');
  assert.equal((await call('DELETE', '/v1/users/u-s3/memory')).body.summary, null);
  assert.equal((await call('DELETE', '/v1/users/u-gone')).status, 200);

  // stop, the dump, deliveries
  assert.equal((await call('POST', '/v1/sessions/s2/stop')).body.status, 'STOPPED');
  assert.equal((await call('POST', '/v1/agents/s2/leave')).status, 200);
  assert.equal((await call('POST', '/v1/agents/nope/leave')).status, 404);
  await waitFor(() => dumps.length >= 2, 'the dumps of s2');
  for (const d of dumps) {
    const sig = crypto.createHmac('sha256', HOOK_SECRET).update(d.body).digest('hex');
    assert.equal(d.headers['agora-signature-v2'], sig);
    validate(pointer('components', 'schemas', 'Dump'), JSON.parse(d.body), 'the webhook dump');
  }
  assert.deepEqual(dumps.map((d) => JSON.parse(d.body).eventType).sort(), [102, 103]);
  const list = await waitFor(async () => {
    const r = await call('GET', '/v1/webhooks/deliveries?session_id=s2&limit=10');
    return r.body.deliveries.every((x) => x.status === 'delivered') && r;
  }, 'delivered');
  assert.equal(list.body.deliveries.length, 2);
  const id = list.body.deliveries[0].id;
  assert.equal((await call('GET', `/v1/webhooks/deliveries/${encodeURIComponent(id)}`)).body.id, id);
  assert.equal((await call('GET', '/v1/webhooks/deliveries/nope')).status, 404);
  assert.equal((await call('POST', `/v1/webhooks/deliveries/${encodeURIComponent(id)}/retry`)).status, 409);
  assert.equal((await call('GET', '/v1/webhooks/deliveries?status=lost')).status, 400);

  // Agora's notifications
  const note = JSON.stringify({ noticeId: 'n-1', notifyMs: Date.now(), eventType: 102,
    payload: { labels: { session_id: 's3' } } });
  const signed = (secret) => ({ 'Agora-Signature-V2': crypto.createHmac('sha256', secret).update(note).digest('hex') });
  assert.equal((await call('POST', '/v1/notifications/agora', { key: null, raw: note, headers: signed('bad') })).status, 401);
  const ack = await call('POST', '/v1/notifications/agora', { key: null, raw: note, headers: signed(AGORA_SECRET) });
  assert.deepEqual(ack.body, { ok: true, event: 102, session_id: 's3', action: 'stopped' });

  // nothing the document lists went uncalled
  const all = Object.entries(spec.paths).flatMap(([tpl, item]) =>
    Object.keys(item).filter((m) => m !== 'parameters').map((m) => `${m.toUpperCase()} ${tpl}`));
  assert.deepEqual(all.filter((o) => !covered.has(o)), []);
});
