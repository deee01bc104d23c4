// The official openai npm package, pointed at memproxy, which forwards to the mock upstream.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startStack } from './harness.js';

let stack;
let client;
const messages = [{ role: 'user', content: 'Tell me something.' }];

before(async () => {
  stack = await startStack({
    config: 'auth:\n  client_keys:\n    - sdk-test-key-0123456789abcdef\n',
    mockArgs: ['--token-delay-ms', '5'],
  });
  client = new OpenAI({ apiKey: 'sdk-test-key-0123456789abcdef', baseURL: stack.baseURL, maxRetries: 0 });
});

after(async () => {
  await stack.stop();
});

test('non-streaming completion', async () => {
  const r = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.match(r.choices[0].message.content, /mock upstream/);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.total_tokens > 0);
});

test('streaming with include_usage: joined text equals the non-streaming text', async () => {
  const whole = await client.chat.completions.create({ model: 'gpt-4o-mini', messages });
  const stream = await client.chat.completions.create({
    model: 'gpt-4o-mini',
    messages,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.ok(chunks > 5, `only ${chunks} chunks: the stream was not token by token`);
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.completion_tokens > 0, 'no usage chunk');
});

test('streaming without include_usage gets no usage chunk', async () => {
  const stream = await client.chat.completions.create({ model: 'm', messages, stream: true });
  for await (const chunk of stream) {
    assert.ok(!chunk.usage, 'usage arrived though the client did not ask for it');
    assert.equal(chunk.choices.length, 1);
  }
});

test('models.list', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, ['mock-model']);
});

test('embeddings (the SDK asks for base64 and decodes it)', async () => {
  const r = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['a', 'b'] });
  assert.equal(r.data.length, 2);
  assert.equal(r.data[0].embedding.length, 8);
  assert.ok(Math.abs(r.data[1].embedding[0] - 2 / 16) < 1e-6);
});

test('a wrong key is an AuthenticationError', async () => {
  const bad = new OpenAI({ apiKey: 'wrong', baseURL: stack.baseURL, maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'm', messages }), (e) => {
    assert.equal(e.status, 401);
    assert.equal(e.constructor.name, 'AuthenticationError');
    return true;
  });
});

test('bad input is a BadRequestError with the param', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'm', messages: [{ role: 'robot', content: 'x' }] }),
    (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'messages[0].role');
      return true;
    });
});

test('the client key is never forwarded upstream', async () => {
  await client.chat.completions.create({ model: 'm', messages });
  const stats = await stack.mockStats();
  assert.equal(stats.last_authorization, null);
});

// Every upstream down: a profile with fallback_reply answers with it as a normal completion,
// and the turn is recorded with source llm_failure (read back over REST).
test('fallback_reply: the caller hears something when every upstream fails', async () => {
  const fallback = 'Sorry, I am having trouble right now. Please say that again.';
  const down = await startStack({
    config: 'auth:\n  admin_keys: [admin-key-fallback-0123456789]\n' +
      'upstreams:\n  - {name: dead, url: "http://127.0.0.1:9/v1", connect_timeout: 300ms}\n' +
      `profiles:\n  - {name: voice, upstream: dead, fallback_reply: "${fallback}"}\n`,
    upstream: false,
  });
  try {
    const voice = new OpenAI({ apiKey: 'none', baseURL: down.baseURL, maxRetries: 0,
      defaultHeaders: { 'X-Memproxy-Profile': 'voice', 'X-Session-Id': 'fallback-call' } });
    const r = await voice.chat.completions.create({ model: 'gpt-4o-mini', messages });
    assert.equal(r.choices[0].message.content, fallback);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const stream = await voice.chat.completions.create({ model: 'gpt-4o-mini', messages, stream: true });
    let text = '';
    for await (const chunk of stream) for (const c of chunk.choices) text += c.delta?.content ?? '';
    assert.equal(text, fallback);
    const origin = down.baseURL.replace(/\/v1$/, '');
    const snap = await (await fetch(`${origin}/v1/sessions/fallback-call/export`, {
      headers: { Authorization: 'Bearer admin-key-fallback-0123456789' } })).json();
    const replies = snap.turns.filter((t) => t.role === 'assistant');
    assert.ok(replies.length >= 1);
    assert.ok(replies.every((t) => t.source === 'llm_failure' && t.content === fallback));
    const metrics = await (await fetch(`${origin}/metrics`)).text();
    assert.match(metrics, /memproxy_fallback_replies_total 2/);
  } finally {
    await down.stop();
  }
});
