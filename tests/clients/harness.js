// Start the mock upstream and memproxy on free loopback ports for a client test, and stop them.
// Binaries come from MEMPROXY_BIN and MOCK_UPSTREAM_BIN (meson sets both).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MEMPROXY = process.env.MEMPROXY_BIN ?? 'build/proxy/memproxy';
const MOCK = process.env.MOCK_UPSTREAM_BIN ?? 'build/tests/mock_upstream';

async function waitFor(pred, what, ms = 5000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = pred();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function start(bin, args, logPath) {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  return { child, log: () => log };
}

// upstream: false leaves the upstreams to config (no --upstream pointing at the mock).
export async function startStack({ config = '', mockArgs = [], upstream = true } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'memproxy-client-'));
  const portFile = join(dir, 'port');
  const mock = start(MOCK, ['--port-file', portFile, ...mockArgs]);
  const mockPort = await waitFor(
    () => existsSync(portFile) && readFileSync(portFile, 'utf8').trim(), 'the mock port');
  const cfgPath = join(dir, 'memproxy.yaml');
  writeFileSync(cfgPath, config);
  const mp = start(MEMPROXY, ['--config', cfgPath, '--listen', '127.0.0.1:0',
    '--db', join(dir, 'memproxy.db'), ...(upstream ? ['--upstream', `http://127.0.0.1:${mockPort}/v1`] : [])]);
  const port = await waitFor(() => (mp.log().match(/\(port (\d+)\)/) || [])[1], 'memproxy');
  const stop = async () => {
    const exited = new Promise((r) => mp.child.once('exit', (code) => r(code)));
    mp.child.kill('SIGTERM');
    const code = await exited;
    mock.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    if (code !== 0) throw new Error(`memproxy exited with ${code}:\n${mp.log()}`);
  };
  const mockStats = async () =>
    (await fetch(`http://127.0.0.1:${mockPort}/_mock/stats`)).json();
  // the mock's behaviour from now on (tests/mock_upstream/mock.c lists the fields)
  const mockConfig = async (fields) => {
    const r = await fetch(`http://127.0.0.1:${mockPort}/_mock/config`,
      { method: 'POST', body: JSON.stringify(fields) });
    if (!r.ok) throw new Error(`the mock refused its config: ${r.status}`);
  };
  return { baseURL: `http://127.0.0.1:${port}/v1`, stop, mockStats, mockConfig };
}
