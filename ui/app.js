// memproxy's call viewer: a single page over the REST API (docs/ui.md). Everything that came
// from a caller, a model or a client is put on the page as text (textContent), never as markup.
'use strict';

const KEY = 'memproxy.adminKey'; // sessionStorage only: gone with the tab, never in a URL
const main = document.getElementById('main');
const statusLine = document.getElementById('status');
const forget = document.getElementById('forget');

// ---- DOM helpers: text only ----

function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') n.className = v;
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) n.addEventListener(ev, fn);
    else n.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    n.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return n;
}

function show(...nodes) {
  main.replaceChildren(...nodes);
  main.focus();
}

function say(text, bad) {
  statusLine.textContent = text;
  statusLine.className = bad ? 'error' : 'muted';
}

const when = (ms) => (ms ? new Date(ms).toLocaleString() : '—');
const ms = (us) => (us === undefined || us === null || us < 0 ? '—' : `${Math.round(us / 1000)} ms`);
const enc = encodeURIComponent;

// ---- the API ----

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY) || ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = text; }
  if (!r.ok) {
    const msg = data && data.error ? data.error.message : `HTTP ${r.status}`;
    throw new ApiError(r.status, msg);
  }
  return data;
}

function failed(e) {
  if (e instanceof ApiError && e.status === 401) {
    sessionStorage.removeItem(KEY);
    return keyForm('That admin key was refused (401). Enter the admin key of the tenant whose calls you want to see.');
  }
  show(el('h1', {}, 'Something went wrong'), el('p', { class: 'error', role: 'alert' }, e.message));
}

// ---- the key ----

function keyForm(message) {
  forget.hidden = true;
  const input = el('input', { type: 'password', id: 'key', name: 'key', autocomplete: 'off', required: true, size: 40 });
  const form = el('form', { class: 'row', on: { submit: async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    try {
      await api('GET', '/v1/sessions?limit=1');
      route();
    } catch (e) { failed(e); }
  } } },
  el('label', { for: 'key' }, 'Admin key', input), el('button', { type: 'submit' }, 'Open'));
  show(el('h1', {}, 'memproxy · calls'),
    message ? el('p', { class: 'error', role: 'alert', id: 'key-error' }, message) : null,
    el('p', { class: 'muted' }, 'The key is kept in this tab only (sessionStorage) and sent to this server as a Bearer token.'),
    form);
  input.focus();
}

// ---- sessions ----

async function sessionsView(params) {
  const q = new URLSearchParams();
  q.set('limit', '50');
  for (const k of ['user_id', 'status', 'cursor']) if (params.get(k)) q.set(k, params.get(k));
  const page = await api('GET', `/v1/sessions?${q}`);
  const label = params.get('label') || '';
  const since = params.get('since') ? Date.parse(params.get('since')) : 0;
  const rows = page.sessions.filter((s) => {
    if (since && s.updated_ms < since) return false;
    if (!label) return true;
    const [k, v] = label.split('=');
    return v === undefined ? k in s.labels : String(s.labels[k]) === v;
  });
  const field = (name, labelText, extra) => el('label', {}, labelText,
    el('input', { name, value: params.get(name) || '', ...extra }));
  const status = el('select', { name: 'status' }, ['', 'RUNNING', 'STOPPED'].map((v) =>
    el('option', { value: v, selected: params.get('status') === v }, v || 'any')));
  const filters = el('form', { class: 'row', role: 'search', on: { submit: (ev) => {
    ev.preventDefault();
    const f = new URLSearchParams(new FormData(ev.target));
    for (const [k, v] of [...f]) if (!v) f.delete(k);
    location.hash = `#/sessions?${f}`;
  } } },
  field('user_id', 'User'), el('label', {}, 'Status', status), field('label', 'Label (key=value)'),
  field('since', 'Active since', { type: 'datetime-local' }), el('button', { type: 'submit' }, 'Filter'));
  const table = el('table', {},
    el('thead', {}, el('tr', {}, ['Session', 'Status', 'Started', 'Last activity', 'User', 'Turns', 'Labels']
      .map((h, i) => el('th', { class: i === 2 || i === 6 ? 'wide' : null, scope: 'col' }, h)))),
    el('tbody', {}, rows.map((s) => el('tr', {},
      el('td', { class: 'id' }, el('a', { href: `#/sessions/${enc(s.id)}` }, s.id)),
      el('td', {}, el('span', { class: `badge ${s.status}` }, s.status)),
      el('td', { class: 'wide' }, when(s.created_ms)),
      el('td', {}, when(s.updated_ms)),
      el('td', {}, s.user_id ? el('a', { href: `#/users/${enc(s.user_id)}` }, s.user_id) : '—'),
      el('td', {}, s.turns),
      el('td', { class: 'wide' }, Object.entries(s.labels).map(([k, v]) => `${k}=${v}`).join(', '))))));
  const more = page.next ? el('button', { type: 'button', on: { click: () => {
    params.set('cursor', page.next);
    location.hash = `#/sessions?${params}`;
  } } }, 'Older sessions') : null;
  show(el('h1', {}, 'Sessions'), filters,
    rows.length ? table : el('p', { class: 'muted' }, 'No sessions match.'), more);
}

// ---- a call ----

// An interrupted reply: what the caller heard, then the rest the model generated, struck. A
// refused one: the refusal's text, which no voice platform speaks, marked so.
function replyText(t) {
  const heard = t.content || '';
  const refusal = t.metadata && typeof t.metadata.refusal === 'string' ? t.metadata.refusal : '';
  if (refusal && !t.interrupted)
    return el('p', { class: 'text' }, heard,
      el('span', { class: 'refused', title: 'the model refused; never spoken' }, refusal));
  if (!t.interrupted) return el('p', { class: 'text' }, heard);
  const orig = t.original || '';
  const rest = orig.startsWith(heard) ? orig.slice(heard.length) : orig;
  return el('p', { class: 'text' },
    el('span', { class: 'heard' }, heard),
    el('span', { class: 'cut', title: 'the caller cut in here', 'aria-label': 'interrupted here' }, ' ⟂ '),
    rest ? el('span', { class: 'unspoken', title: 'generated, never heard' },
      orig.startsWith(heard) ? rest : `(generated: ${rest})`) : null);
}

function turnView(t) {
  // tool calls, and a call of OpenAI's older functions API, which the turn keeps in metadata
  const fn = t.metadata && t.metadata.function_call;
  const calls = (t.tool_calls || []).concat(fn && typeof fn === 'object' ? [{ function: fn }] : [])
    .map((c) => el('pre', {},
      `→ ${c.function ? c.function.name : c.type}(${c.function ? c.function.arguments : ''})`));
  // an audio reply: the model spoke it itself, and the text is its transcript
  const audio = t.metadata && t.metadata.audio && typeof t.metadata.audio.id === 'string'
    ? el('span', { class: 'audio', title: `the model's own audio (${t.metadata.audio.id}); the text is its transcript` }, 'audio')
    : null;
  const meta = el('div', { class: 'meta' },
    el('strong', {}, t.role), t.source ? el('span', {}, t.source) : null,
    el('time', { datetime: new Date(t.timestamp).toISOString() }, when(t.timestamp)),
    t.interrupted ? el('span', { class: 'cut' }, `interrupted${t.interrupt_timestamp ? ' at ' + when(t.interrupt_timestamp) : ''}`) : null,
    t.role === 'assistant' && t.model ? el('span', {}, t.model) : null, audio,
    t.ttft_us !== undefined ? el('span', {}, `TTFT ${ms(t.ttft_us)}`) : null,
    t.latency_us !== undefined ? el('span', {}, `total ${ms(t.latency_us)}`) : null,
    t.usage && t.usage.total_tokens !== undefined ? el('span', {}, `${t.usage.total_tokens} tokens`) : null,
    t.finish_reason && t.finish_reason !== 'stop' ? el('span', {}, t.finish_reason) : null);
  // a reasoning model's thinking before it replied: never spoken, folded away
  const thought = t.metadata && typeof t.metadata.reasoning === 'string' ? t.metadata.reasoning : '';
  const thinking = thought ? el('details', { class: 'thinking' },
    el('summary', { title: 'the model\'s reasoning; never spoken' }, 'thinking'),
    el('p', {}, thought)) : null;
  return el('li', { class: `turn ${t.role}` }, meta, thinking,
    t.role === 'assistant' ? replyText(t) : el('p', { class: 'text' }, t.content || ''),
    t.tool_call_id ? el('div', { class: 'meta' }, `result of ${t.tool_call_id}`) : null, calls);
}

function ttftChart(turns) {
  const replies = turns.filter((t) => t.role === 'assistant' && t.ttft_us > 0);
  if (!replies.length) return null;
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  const w = 600, h = 120, top = Math.max(...replies.map((t) => t.ttft_us));
  svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'Time to first token per reply');
  const bw = w / replies.length;
  replies.forEach((t, i) => {
    const bh = Math.max(1, (t.ttft_us / top) * (h - 16));
    const r = document.createElementNS(ns, 'rect');
    r.setAttribute('class', 'bar');
    r.setAttribute('x', String(i * bw + 1));
    r.setAttribute('y', String(h - bh));
    r.setAttribute('width', String(Math.max(1, bw - 2)));
    r.setAttribute('height', String(bh));
    const title = document.createElementNS(ns, 'title');
    title.textContent = `turn ${t.turn_id}: ${ms(t.ttft_us)}`;
    r.append(title);
    svg.append(r);
  });
  const label = document.createElementNS(ns, 'text');
  label.setAttribute('x', '2');
  label.setAttribute('y', '10');
  label.textContent = `max ${ms(top)}`;
  svg.append(label);
  return el('div', { class: 'chart' }, svg);
}

function deliveriesView(list, reload) {
  if (!list.length) return el('p', { class: 'muted' }, 'No webhook deliveries.');
  return el('table', {},
    el('thead', {}, el('tr', {}, ['Notice', 'Event', 'Status', 'Attempts', 'Last error', ''].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, list.map((d) => el('tr', {},
      el('td', { class: 'id' }, d.id), el('td', {}, d.event),
      el('td', {}, el('span', { class: `badge ${d.status}` }, d.status)), el('td', {}, d.attempts),
      el('td', {}, d.last_error || (d.last_status ? `HTTP ${d.last_status}` : '—')),
      el('td', {}, d.status === 'delivered' ? null : el('button', { type: 'button', class: 'retry', on: { click: async () => {
        try {
          await api('POST', `/v1/webhooks/deliveries/${enc(d.id)}/retry`);
          say('Retry queued.');
          reload();
        } catch (e) { say(e.message, true); }
      } } }, 'Retry'))))));
}

function download(name, data) {
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }));
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function callView(id) {
  const [snap, deliveries] = await Promise.all([
    api('GET', `/v1/sessions/${enc(id)}/export`),
    api('GET', `/v1/webhooks/deliveries?session_id=${enc(id)}&limit=100`)]);
  const s = snap.session, full = await api('GET', `/v1/sessions/${enc(id)}`);
  const memory = full.user_id ? await api('GET', `/v1/users/${enc(full.user_id)}/memory`) : null;
  const reload = () => callView(id).catch(failed);
  const actions = el('div', { class: 'row' },
    el('button', { type: 'button', on: { click: () => download(`${id}.json`, snap) } }, 'Export'),
    full.status === 'RUNNING' ? el('button', { type: 'button', class: 'danger', on: { click: async () => {
      if (!confirm(`Stop session ${id}? Its webhook dumps are sent.`)) return;
      try { await api('POST', `/v1/sessions/${enc(id)}/stop`); reload(); } catch (e) { say(e.message, true); }
    } } }, 'Stop') : null);
  const facts = el('dl', { class: 'facts' },
    el('dt', {}, 'Status'), el('dd', {}, el('span', { class: `badge ${full.status}` }, full.status)),
    el('dt', {}, 'User'), el('dd', {}, full.user_id ? el('a', { href: `#/users/${enc(full.user_id)}` }, full.user_id) : '—'),
    el('dt', {}, 'Profile'), el('dd', {}, s.profile),
    el('dt', {}, 'Started'), el('dd', {}, when(full.created_ms)),
    el('dt', {}, 'Last activity'), el('dd', {}, when(full.updated_ms)),
    el('dt', {}, 'Stopped'), el('dd', {}, when(full.stopped_ms)),
    el('dt', {}, 'Labels'), el('dd', {}, JSON.stringify(full.labels)),
    el('dt', {}, 'Metadata'), el('dd', {}, JSON.stringify(full.metadata)));
  const injected = [
    ...(full.runtime_system || []).map((m) => el('div', { class: 'card' }, el('div', { class: 'meta muted' }, 'runtime system message'), el('div', { class: 'text' }, m.content))),
    memory && memory.summary ? el('div', { class: 'card' }, el('div', { class: 'meta muted' }, 'user summary'), el('div', { class: 'text' }, memory.summary.text)) : null,
    memory && memory.facts.length ? el('div', { class: 'card' }, el('div', { class: 'meta muted' }, 'user facts'),
      el('div', { class: 'text' }, memory.facts.map((f) => `${f.category} ${f.key}: ${f.value}`).join('\n'))) : null,
    full.call_summary ? el('div', { class: 'card' }, el('div', { class: 'meta muted' }, `call summary: turns 1–${full.call_summary.through_seq}, sent while they are out of the window`),
      el('div', { class: 'text' }, full.call_summary.text)) : null,
  ].filter(Boolean);
  show(el('h1', {}, `Call ${id}`), actions, facts,
    el('h2', {}, 'Time to first token'), ttftChart(snap.turns) || el('p', { class: 'muted' }, 'No replies with timings.'),
    el('h2', {}, 'Transcript'), el('ol', { class: 'timeline' }, snap.turns.map(turnView)),
    el('h2', {}, 'Injected into its requests'), injected.length ? injected : el('p', { class: 'muted' }, 'Nothing.'),
    el('h2', {}, 'Webhook deliveries'), deliveriesView(deliveries.deliveries, reload));
}

// ---- a user ----

async function userView(id) {
  const [memory, page] = await Promise.all([
    api('GET', `/v1/users/${enc(id)}/memory`), api('GET', `/v1/sessions?user_id=${enc(id)}&limit=100`)]);
  const typed = el('input', { id: 'erase-confirm', 'aria-label': `type ${id} to erase` });
  const erase = el('form', { class: 'row', on: { submit: async (ev) => {
    ev.preventDefault();
    if (typed.value !== id) { say(`Type the user id (${id}) to erase.`, true); return; }
    try {
      await api('DELETE', `/v1/users/${enc(id)}`);
      say(`User ${id} erased.`);
      location.hash = '#/';
    } catch (e) { say(e.message, true); }
  } } }, el('label', { for: 'erase-confirm' }, `Type ${id} to erase this user, their memory and sessions`, typed),
  el('button', { type: 'submit', class: 'danger' }, 'Erase'));
  show(el('h1', {}, `User ${id}`),
    el('h2', {}, 'Summary'), memory.summary ? el('div', { class: 'card' }, el('div', { class: 'text' }, memory.summary.text)) : el('p', { class: 'muted' }, 'None yet.'),
    el('h2', {}, 'Facts'), memory.facts.length ? el('table', {}, el('tbody', {}, memory.facts.map((f) => el('tr', {},
      el('td', {}, f.category), el('td', {}, f.key), el('td', {}, f.value),
      el('td', {}, el('span', { class: 'bar-outer', role: 'img', 'aria-label': `confidence ${Math.round(f.confidence * 100)}%` },
        el('span', { class: 'bar-inner', style: null, 'data-w': f.confidence })), ` ${Math.round(f.confidence * 100)}%`))))) : el('p', { class: 'muted' }, 'None.'),
    el('h2', {}, 'Sessions'), el('ul', {}, page.sessions.map((s) => el('li', {},
      el('a', { href: `#/sessions/${enc(s.id)}` }, s.id), ` ${s.status}, ${when(s.created_ms)}`))),
    el('h2', {}, 'Erase'), erase);
  // widths set as properties, not style attributes: the page's CSP allows no inline styles
  for (const b of main.querySelectorAll('.bar-inner')) b.style.width = `${Math.round(Number(b.dataset.w) * 100)}%`;
}

// ---- routes ----

async function route() {
  say('');
  if (!sessionStorage.getItem(KEY)) return keyForm();
  forget.hidden = false;
  const [path, query] = location.hash.slice(1).split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === 'sessions' && parts[1]) await callView(parts[1]);
    else if (parts[0] === 'users' && parts[1]) await userView(parts[1]);
    else await sessionsView(new URLSearchParams(query || ''));
  } catch (e) { failed(e); }
}

forget.addEventListener('click', () => {
  sessionStorage.removeItem(KEY);
  keyForm();
});
window.addEventListener('hashchange', route);
route();
