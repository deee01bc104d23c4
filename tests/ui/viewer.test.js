// The call viewer (GET /ui/) in Debian's headless chromium, driven by puppeteer-core (no browser
// download). A memproxy with a recorded Agora custom-mode call (an interrupted reply and a tool
// call), a call whose turns hold markup, and a stopped session whose dump failed. Screenshots
// of the list, a call and a user go to UI_OUT (meson: the build's tests/ui folder).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import http from 'node:http';
import puppeteer from 'puppeteer-core';
import { startStack } from '../clients/harness.js';

const ADMIN = 'admin-key-viewer-0123456789';
const HOOK_SECRET = 'hook-secret-viewer-0123456789';
const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
const OUT = process.env.UI_OUT ?? join(process.cwd(), 'out');
const fixture = JSON.parse(readFileSync(new URL('../fixtures/agora-custom-request.json', import.meta.url), 'utf8'));

let stack, receiver, browser, page, origin;
let hookStatus = 500;
const dumps = [];

async function waitFor(pred, what, ms = 30000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await pred();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function rest(method, path, body) {
  const r = await fetch(origin + path, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { Authorization: `Bearer ${ADMIN}`, 'Content-Type': 'application/json' } });
  return { status: r.status, body: await r.json().catch(() => null) };
}

async function chat(body, headers = {}) {
  const r = await fetch(`${origin}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json', ...headers } });
  const text = await r.text();
  assert.equal(r.status, 200, text);
}

before(async () => {
  mkdirSync(OUT, { recursive: true });
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (hookStatus === 200) dumps.push(JSON.parse(body));
      res.writeHead(hookStatus).end('no');
    });
  });
  await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
  stack = await startStack({ config: `auth:\n  admin_keys: [${ADMIN}]\nwebhooks:\n` +
    `  - {url: "http://127.0.0.1:${receiver.address().port}/hook", secret: ${HOOK_SECRET}, ` +
    'max_attempts: 1, backoff: 100ms, timeout: 2s}\n' });
  origin = stack.baseURL.replace(/\/v1$/, '');
  // an Agora custom-mode call: the greeting, an interrupted joke, a tool call and its result
  await chat(fixture);
  const tools = structuredClone(fixture);
  tools.turn_id = 5;
  tools.messages.push(
    { role: 'user', content: 'Where is my order?', turn_id: 5, metadata: { source: 'asr', user: '1002' } },
    { role: 'assistant', content: null, turn_id: 5, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'lookup_order', arguments: '{"order":"A-17"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', turn_id: 5, content: '{"status":"shipped"}' });
  await chat(tools);
  // a call whose words are markup: shown as text, never run
  await chat({ model: 'm', session_id: 'xss-call', user: 'mallory',
    messages: [{ role: 'user', content: '<img src=x onerror="window.__xss=1"></script><script>window.__xss=2</script>' }] });
  // a stopped session whose dump failed (the receiver answers 500, one attempt)
  await chat({ model: 'm', session_id: 'stopped-call', messages: [{ role: 'user', content: 'bye' }] });
  assert.equal((await rest('POST', '/v1/sessions/stopped-call/stop')).status, 200);
  await waitFor(async () => (await rest('GET', '/v1/webhooks/deliveries?session_id=stopped-call'))
    .body.deliveries.some((d) => d.status === 'failed'), 'the failed delivery');
  // a reply the model refused (structured outputs): no content, the refusal's text apart
  await stack.mockConfig({ refusal: true, reply: "I can't share account numbers." });
  await chat({ model: 'm', session_id: 'refused-call', messages: [{ role: 'user', content: 'My account number?' }] });
  await stack.mockConfig({ refusal: false });
  // a call of OpenAI's older functions API, and an audio model's reply (its transcript)
  await stack.mockConfig({ function_call: 'weather', reply: '{"city":"Oslo"}' });
  await chat({ model: 'm', session_id: 'legacy-call', messages: [{ role: 'user', content: 'Weather?' }] });
  await stack.mockConfig({ function_call: null, audio: true, reply: 'It is sunny.' });
  await chat({ model: 'm', session_id: 'audio-call', messages: [{ role: 'user', content: 'Weather?' }] });
  await stack.mockConfig({ audio: false });
  // a reasoning model's reply: its thinking kept apart
  await stack.mockConfig({ reasoning: 'A greeting. Keep it short.', reply: 'Hello.' });
  await chat({ model: 'm', session_id: 'thinking-call', messages: [{ role: 'user', content: 'Hi!' }] });
  await stack.mockConfig({ reasoning: null });
  browser = await launchChromium();
  page = await browser.newPage();
  page.on('console', (m) => console.log('page:', m.text()));
  page.on('pageerror', (e) => console.log('page error:', e.message));
  await page.setViewport({ width: 1100, height: 900 });
});

// Chromium, started headless. On a busy machine (the CI box runs other suites beside this
// one) its start has taken longer than puppeteer's default 30 s once in a while: it gets
// 120 s, and a second try if the first start hangs or dies.
async function launchChromium() {
  const options = { executablePath: CHROMIUM, headless: true, timeout: 120000,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'] };
  try {
    return await puppeteer.launch(options);
  } catch (e) {
    console.log('chromium did not start (%s); trying once more', e.message);
    return puppeteer.launch(options);
  }
}

after(async () => {
  if (browser) await browser.close();
  if (stack) await stack.stop();
  if (receiver) receiver.close();
});

// A fresh load of the page at hash (the tab's sessionStorage stays).
async function open(hash) {
  await page.goto('about:blank');
  await page.goto(`${origin}/ui/${hash}`, { waitUntil: 'networkidle0' });
}

test('a wrong key gets a clear message', async () => {
  await open('');
  await page.type('#key', 'not-the-admin-key-000');
  await page.click('form button[type=submit]');
  const msg = await page.waitForSelector('#key-error');
  assert.match(await msg.evaluate((n) => n.textContent), /refused \(401\)/);
});

test('the list shows the sessions', async () => {
  await page.evaluate(() => sessionStorage.clear());
  await open('');
  await page.type('#key', ADMIN);
  await page.click('form button[type=submit]');
  await page.waitForSelector('table tbody tr');
  const ids = await page.$$eval('td.id a', (as) => as.map((a) => a.textContent));
  for (const id of ['room-42-agent', 'xss-call', 'stopped-call']) assert.ok(ids.includes(id), ids.join());
  assert.equal(await page.evaluate(() => sessionStorage.getItem('memproxy.adminKey')), ADMIN);
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  assert.ok(!page.url().includes(ADMIN));
  await page.screenshot({ path: join(OUT, 'ui-sessions.png'), fullPage: true });
});

test('a call shows what was heard and the unspoken rest apart', async () => {
  await open('#/sessions/room-42-agent');
  await page.waitForSelector('.timeline');
  const heard = await page.$eval('.turn .heard', (n) => n.textContent);
  const rest = await page.$eval('.turn .unspoken', (n) => n.textContent);
  assert.equal(heard, 'A cat walks into a');
  assert.match(rest, /^ ?library and asks for a book about mice/);
  assert.equal(await page.$eval('.turn .unspoken', (n) => getComputedStyle(n).textDecorationLine), 'line-through');
  const text = await page.$eval('.timeline', (n) => n.textContent);
  assert.match(text, /lookup_order\(\{"order":"A-17"\}\)/);
  assert.match(text, /greeting/);
  assert.ok(await page.$('.chart svg rect'));
  await page.screenshot({ path: join(OUT, 'ui-call.png'), fullPage: true });
});

test('a refused reply shows the refusal apart, as never spoken', async () => {
  await open('#/sessions/refused-call');
  await page.waitForSelector('.timeline');
  assert.equal(await page.$eval('.turn.assistant .refused', (n) => n.textContent),
    "I can't share account numbers.");
  assert.match(await page.$eval('.turn.assistant .refused', (n) => n.title), /never spoken/);
});

test("a legacy function_call shows as a call, an audio reply as audio with its transcript", async () => {
  await open('#/sessions/legacy-call');
  await page.waitForSelector('.timeline');
  assert.equal(await page.$eval('.turn.assistant pre', (n) => n.textContent),
    '→ weather({"city":"Oslo"})');
  await open('#/sessions/audio-call');
  await page.waitForSelector('.timeline');
  assert.equal(await page.$eval('.turn.assistant .text', (n) => n.textContent), 'It is sunny.');
  assert.equal(await page.$eval('.turn.assistant .meta .audio', (n) => n.textContent), 'audio');
});

test("a reasoning model's thinking is folded away from what was said", async () => {
  await open('#/sessions/thinking-call');
  await page.waitForSelector('.timeline');
  assert.equal(await page.$eval('.turn.assistant .text', (n) => n.textContent), 'Hello.');
  assert.equal(await page.$eval('.turn.assistant details.thinking', (n) => n.open), false);
  await page.click('.turn.assistant details.thinking summary');
  assert.equal(await page.$eval('.turn.assistant details.thinking', (n) => n.open), true);
  assert.equal(await page.$eval('.turn.assistant details.thinking p', (n) => n.textContent),
    'A greeting. Keep it short.');
});

test('markup in a turn renders as text and runs nothing', async () => {
  await open('#/sessions/xss-call');
  await page.waitForSelector('.timeline');
  const text = await page.$eval('.timeline .turn.user .text', (n) => n.textContent);
  assert.equal(text, '<img src=x onerror="window.__xss=1"></script><script>window.__xss=2</script>');
  assert.equal(await page.$('.timeline img'), null);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
});

test('retry on a failed delivery makes the receiver get the dump', async () => {
  await open('#/sessions/stopped-call');
  const button = await page.waitForSelector('button.retry');
  hookStatus = 200;
  await button.click();
  await waitFor(() => dumps.some((d) => d.sid === 'stopped-call'), 'the dump at the receiver');
  await waitFor(async () => (await rest('GET', '/v1/webhooks/deliveries?session_id=stopped-call'))
    .body.deliveries.some((d) => d.status === 'delivered'), 'the delivery marked delivered');
});

test('a user: memory, sessions, and erase with a typed confirmation', async () => {
  await open('#/users/mallory');
  await page.waitForSelector('#erase-confirm');
  await page.screenshot({ path: join(OUT, 'ui-user.png'), fullPage: true });
  await page.type('#erase-confirm', 'mallory');
  await page.click('form button.danger');
  await waitFor(async () => (await rest('GET', '/v1/sessions/xss-call')).status === 404, 'the erased session');
});
