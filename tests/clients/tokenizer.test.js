// memproxy's tokenizer (base/tiktoken.c) against OpenAI's own: the `tiktoken` npm package (the
// Rust tiktoken as WebAssembly) writes its o200k_base and cl100k_base ranks to files in
// tiktoken's format, memproxy loads one as tokenizer.file, and for each text the tokens memproxy
// reports in X-Memproxy-Context must be tiktoken's count plus the message's 4.
//
// The texts: sentences in several scripts, code, markdown, numbers, emoji and every kind of
// space, then seeded random texts made of short words from mixed scripts, marks, digits and
// punctuation (memproxy encodes pieces longer than 64 bytes in parts, on purpose: see
// base/tiktoken.h; short words keep every piece under that).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { get_encoding } from 'tiktoken';
import { startStack } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'memproxy-tokenizer-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// The ranks as OpenAI publishes them, "<base64 of the token's bytes> <rank>" a line, from the
// package's copy: lines of "<first token> <first rank> <base64> <base64> ...", the ranks in a
// run from the first. (Special tokens are not among them, as in the published files.)
function writeRanks(name) {
  const packed = JSON.parse(readFileSync(join('node_modules', 'tiktoken', 'encoders', `${name}.json`),
    'utf8')).bpe_ranks;
  const lines = [];
  for (const line of packed.split('\n').filter(Boolean)) {
    const [, first, ...tokens] = line.split(' ');
    tokens.forEach((b64, i) => lines.push(`${b64} ${Number(first) + i}`));
  }
  const path = join(dir, `${name}.tiktoken`);
  writeFileSync(path, lines.join('\n') + '\n');
  return { enc: get_encoding(name), path, n: lines.length };
}

const fixed = [
  'Hello world',
  "I'M HERE, don't you? We'll see; they've gone, I'd say.",
  'HELLOworld helloWORLD CamelCaseIdentifier snake_case_name',
  'Bonjour\u202f! Ça va\u00a0? Très bien, merci.',
  'Der Donaudampfschifffahrtskapitän fährt übermorgen.',
  '你好，世界！今天天气很好，我们去公园散步吧。',
  '日本語のテキストです。カタカナとひらがな、漢字。',
  '한국어 텍스트입니다. 반갑습니다!',
  'Привет, мир! Как дела?',
  'مرحبا بالعالم، كيف حالك؟',
  'नमस्ते दुनिया, आप कैसे हैं?',
  'Ελληνικά κείμενα με τόνους: άέήίόύώ',
  'naïve café résumé — “quotes” and ‘apostrophes’',
  'e\u0301 a\u0308 combining marks, \u0915\u094d\u0937 conjuncts',
  '😀🎉 emoji 👍🏽 with modifiers ❤️ and ZWJ 👨‍👩‍👧',
  'The year 2026 has 365 days; 1234567890 and ١٢٣٤٥ and ½ ⅓ Ⅻ',
  'function f(x) {\n  return x * 2; // twice\n}\n\n',
  '```python\ndef main():\n    print("hi")\n```\n',
  '# Title\n\n- **bold** item\n- _italic_ item\n\n> quote\n',
  'path/to/file.txt and https://example.com/a/b?c=d&e=f#g',
  'line one\r\nline two\r\n\r\nline four\n   \n\t\ttabs\t',
  '   leading and trailing spaces   ',
  'a.\n/b x;\r\n//y ".\n\n"',
  'Ǆemal ǅungla ǈ titlecase, ſ\'s long s',
  '\u3000ideographic\u3000space\u2009thin\u200bzero-width',
  '',
  // a voice agent's system prompt and a tool call's arguments, as long as they come
  `You are Maya, the voice assistant of Example Dental in Portland, Oregon. You answer calls
from patients and people who want to become patients.

## How you speak
- Keep every answer to one or two short sentences: the caller hears you, they do not read.
- Never read out URLs, email addresses or IDs character by character unless asked to.
- Say times as people do ("half past two", "quarter to five"), dates as "Tuesday the 14th".
- If you did not understand, ask once; the second time, offer to transfer the call.

## What you can do
1. Book, move or cancel an appointment (tools: find_slots, book_slot, cancel_booking).
2. Answer questions about opening hours (Mon-Fri 8:00-18:00, Sat 9:00-13:00), prices
   (cleaning $120, check-up $95, whitening from $299) and insurance (Delta, Aetna, Cigna).
3. Take a message for Dr. O'Neil or Dr. García-López when the caller insists.

## What you must not do
- Give medical advice. Say: "I can't advise on that, but Dr. O'Neil's team can."
- Promise prices for treatments not listed above.
- Share one patient's details with another caller, even a family member, without the PIN.

Today is {{date}}; the caller's number is {{caller_id}}. It's {{time}} in Portland.`,
  JSON.stringify({ name: 'book_slot', arguments: { patient_id: 'pt_8f3a9c21', slot: '2026-12-01T14:30:00-08:00', reason: "Check-up & cleaning (patient's request)", notes: ['prefers afternoons', 'anxious about X-rays'] } }),
];

// Seeded (a failure names its text, and the next run makes the same ones).
let seed = 20261128;
function rnd(n) {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
}
const pools = [
  'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', '0123456789٠١٢३४५',
  ".,;:!?'\"()[]{}<>/\\-_*#@$%^&|~`+=", "'s 't 're 've 'm 'll 'd 'S 'LL", '你好世界中文测试',
  '日本語のテキスト', '한국어텍스트', 'ПриветмирДела', 'ÀÉÎÕÜàéîõüßſ', 'مرحبابالعالم',
  'नमस्तेदुनिया', '😀🎉👍🏽❤️', '\u0301\u0308\u20dd', 'ǅǈǋʰʲˀ', 'ⅠⅡⅢ½¼', 'ﬁﬂ',
];
const spaces = [' ', ' ', ' ', '  ', '\n', '\n\n', ' \n', '\t', '\r\n', '\u00a0', '\u3000'];
function randomText() {
  let s = '';
  const words = rnd(12);
  for (let w = 0; w < words; w++) {
    const chars = [...pools[rnd(pools.length)]];
    const k = 1 + rnd(5);
    for (let j = 0; j < k; j++) s += chars[rnd(chars.length)];
    s += spaces[rnd(spaces.length)];
  }
  return s;
}

for (const [name, pattern] of [['o200k_base', 'o200k'], ['cl100k_base', 'cl100k']]) {
  test(`${pattern}: memproxy counts as tiktoken does`, async () => {
    const ranks = writeRanks(name);
    assert.ok(ranks.n > 100000, `${ranks.n} ranks`);
    const stack = await startStack({ config: `tokenizer:\n  file: ${ranks.path}\n  pattern: ${pattern}\n` });
    try {
      const texts = [...fixed];
      for (let i = 0; i < 400; i++) texts.push(randomText());
      const wrong = [];
      for (const text of texts) {
        const r = await fetch(`${stack.baseURL}/chat/completions`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }),
        });
        assert.equal(r.status, 200);
        await r.text();
        const got = Number((r.headers.get('x-memproxy-context').match(/tokens=(\d+)/) || [])[1]);
        const want = ranks.enc.encode_ordinary(text).length + 4;
        if (got !== want) wrong.push(`${JSON.stringify(text)}: ${got}, tiktoken ${want}`);
      }
      assert.deepEqual(wrong, [], `${wrong.length} of ${texts.length} texts counted otherwise`);
    } finally {
      await stack.stop();
    }
  });
}
