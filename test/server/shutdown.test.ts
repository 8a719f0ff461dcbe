/**
 * SIGTERM under load, on `museum serve` as operators run it: requests in flight are answered (no
 * reset), event streams end with a `retry:` hint, new connections are refused once the listener
 * has closed, and the process exits 0 within a bounded time.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeLibrary, type LibraryFake } from '../fakes/library.ts';
import { publishFixtureBake } from '../helpers/artifacts.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
let tmp: string;
let library: LibraryFake;
let child: ChildProcess | null = null;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'museum-shutdown-'));
  await publishFixtureBake(join(tmp, 'data'));
  // Each stream frame 60 ms apart: an agentic ask is in flight for about a second.
  library = await startFakeLibrary({ frameDelayMs: 60 });
});
afterAll(async () => {
  child?.kill('SIGKILL');
  await library?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** Start `museum serve --dev-key`; resolves with its URL and key once it listens. */
function serve(): Promise<{ url: string; key: string; stderr: () => string }> {
  child = spawn(join(REPO, 'bin/museum'), ['serve', '--dev-key'], {
    cwd: REPO,
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: join(tmp, 'data'),
      STATE_DB: join(tmp, 'state.db'),
      LIBRARY_UPSTREAM_URL: library.url,
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  return new Promise((done, fail) => {
    child!.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const url = /serving .* at (http:\/\/[\d.:]+)/.exec(stderr)?.[1];
      const key = /development key: (museum_[0-9a-f]{48})/.exec(stderr)?.[1];
      if (url && key) done({ url, key, stderr: () => stderr });
    });
    child!.once('exit', (code) => fail(new Error(`museum serve exited (${code}): ${stderr}`)));
  });
}

/** One request over a keep-alive agent; resolves with the status and body, or the error code. */
function send(agent: Agent, url: string, init: { method?: string; path: string; headers?: Record<string, string>; body?: string }) {
  return new Promise<{ status?: number; body?: string; error?: string; draining?: boolean }>((done) => {
    const req = httpRequest(`${url}${init.path}`, { agent, method: init.method ?? 'GET', headers: init.headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => done({ status: res.statusCode, body, draining: res.headers.connection === 'close' }));
      res.on('error', (err: NodeJS.ErrnoException) => done({ error: err.code ?? err.message }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => done({ error: err.code ?? err.message }));
    req.end(init.body);
  });
}

it('answers every request in flight, ends streams with a retry hint, refuses new connections, exits 0', async () => {
  const { url, key, stderr } = await serve();
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const outcomes: Array<{ status?: number; error?: string }> = [];
  // Eight clients in a loop on keep-alive connections, as a load balancer sends them: until the
  // instance says it is draining (Connection: close, /readyz 503) or refuses connections.
  const loops = Array.from({ length: 8 }, async (_, i) => {
    for (;;) {
      const r = await send(agent, url, { path: i % 2 ? '/v1' : '/v1/openapi.json' });
      outcomes.push(r);
      if (r.error || r.draining) return;
    }
  });
  // An event stream, read as it comes.
  const stream = new Promise<string>((done) => {
    httpRequest(`${url}/v1/presence/stream`, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => done(text));
      res.on('error', () => done(`${text}<error>`));
    }).end();
  });
  await sleep(700);
  // Two slow requests (an agentic Library ask streams for about a second upstream) in flight at SIGTERM.
  const slow = [1, 2].map((n) =>
    send(new Agent(), url, {
      method: 'POST',
      path: '/v1/library/ask',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ question: `Who drew the Atrium, part ${n}?`, use_agentic: true }),
    }),
  );
  await sleep(150);
  const signalled = Date.now();
  child!.kill('SIGTERM');
  const exited = new Promise<number | null>((done) => child!.once('exit', (code) => done(code)));
  // While it drains: readiness fails, health says so; once the listener is closed, connections are refused.
  let ready = 200;
  while (ready === 200 && Date.now() - signalled < 400) ready = (await send(new Agent(), url, { path: '/readyz' })).status!;
  expect(ready).toBe(503);
  await sleep(1_500);
  const late = await send(new Agent(), url, { path: '/v1' });
  expect(late.error).toBe('ECONNREFUSED');
  const exit = await exited;
  const took = Date.now() - signalled;
  await Promise.all(loops);

  expect(exit).toBe(0);
  expect(took).toBeLessThan(12_000);
  for (const r of await Promise.all(slow)) {
    expect(r.status, JSON.stringify(r)).toBe(200);
    expect(JSON.parse(r.body!).data.answer).toEqual(expect.any(String));
  }
  const text = await stream;
  expect(text).toMatch(/^retry: \d+$/m);
  expect(text).not.toContain('<error>');
  // Every request got a whole answer (the last ones with Connection: close) or could not connect at all: none was cut.
  expect(outcomes.filter((o) => o.error)).toEqual([]);
  expect(outcomes.filter((o) => o.status === 200).length).toBeGreaterThan(20);
  expect(outcomes.every((o) => o.status === 200)).toBe(true);
  expect(stderr()).toMatch(/shutdown complete/);
  agent.destroy();
}, 30_000);
