/**
 * Several machines, end to end: two `museum serve` processes (own ports, own copies of one bake's
 * DATA_DIR) sharing one PostgreSQL and one Redis, both started for the test. A key created through
 * either works on both; revoked, it is refused by both within 1 s; the rate limit is exactly 120
 * per minute across both; an exhibition registered on one is asked on the other; presence counts
 * span both; each is ready (/readyz) and says so in its metrics.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exhibitionDoc } from './guide/helpers.ts';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { startPostgres, type TestPostgres } from '../helpers/postgres.ts';
import { startRedis, type TestRedis } from '../helpers/redis.ts';
import { openListener } from './presence/sse.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);
const TOKEN = 'several-instances-metrics';

let tmp: string;
let postgres: TestPostgres;
let redis: TestRedis;
const children: ChildProcess[] = [];
let env: Record<string, string>;

function serve(name: string, extra: string[] = []): Promise<{ url: string; stderr: () => string }> {
  const child = spawn(process.execPath, [join(REPO, 'bin/museum.js'), 'serve', ...extra], {
    cwd: REPO,
    env: { ...env, PORT: '0', DATA_DIR: join(tmp, name) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  return new Promise((done, fail) => {
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const url = /serving .* at (http:\/\/[\d.:]+)/.exec(stderr)?.[1];
      if (url) done({ url, stderr: () => stderr });
    });
    child.once('exit', (code) => fail(new Error(`museum serve exited (${code}): ${stderr}`)));
  });
}

const museum = async (...args: string[]) =>
  (await run(process.execPath, [join(REPO, 'bin/museum.js'), ...args], { cwd: REPO, env })).stdout.trim();
const get = (url: string, path: string, key?: string) => fetch(url + path, { headers: key ? { 'x-api-key': key } : {} });

async function within(ms: number, check: () => Promise<boolean>): Promise<void> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await sleep(20);
  }
}

let a: { url: string; stderr: () => string };
let b: { url: string; stderr: () => string };
let devKey: string;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'museum-several-'));
  [postgres, redis] = await Promise.all([startPostgres(), startRedis()]);
  await publishFixtureBake(join(tmp, 'data-a'));
  // The same bake published to each instance's own DATA_DIR.
  cpSync(join(tmp, 'data-a'), join(tmp, 'data-b'), { recursive: true });
  env = {
    ...process.env,
    HOST: '127.0.0.1',
    DATABASE_URL: postgres.url,
    REDIS_URL: redis.url,
    STATE_DB: join(tmp, 'never-used.db'),
    METRICS_TOKEN: TOKEN,
    LOG_LEVEL: 'warn',
  } as Record<string, string>;
  // Started together: their migrations must not race.
  [a, b] = await Promise.all([serve('data-a', ['--dev-key']), serve('data-b')]);
  devKey = /development key: (museum_[0-9a-f]{48})/.exec(a.stderr())![1]!;
}, 60_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await Promise.all([postgres?.close(), redis?.close()]);
  rmSync(tmp, { recursive: true, force: true });
});

describe('two museum serve processes sharing PostgreSQL and Redis', () => {
  it('are both ready, with the same bake', async () => {
    for (const s of [a, b]) {
      expect((await get(s.url, '/readyz')).status).toBe(200);
      const metrics = await (await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
      expect(metrics).toMatch(/museum_bake_info\{bake_id="[^"]+"\} 1/);
    }
  });

  it('a key created through either works on both; revoked, it is refused by both within 1 s', async () => {
    const cliKey = await museum('keys', 'create', '--name', 'integrator');
    for (const key of [devKey, cliKey]) {
      for (const s of [a, b]) {
        expect((await get(s.url, '/v1/artworks', key)).status).toBe(200);
        expect((await get(s.url, '/v1/collections', key)).status).toBe(200);
      }
    }
    await museum('keys', 'revoke', 'integrator');
    await Promise.all([a, b].map((s) => within(1_000, async () => (await get(s.url, '/v1/artworks', cliKey)).status === 401)));
    for (const s of [a, b]) expect((await get(s.url, '/v1/collections', cliKey)).status).toBe(401);
  });

  it('share one rate limit: exactly 120 requests a minute across both', async () => {
    const key = await museum('keys', 'create', '--name', 'budget');
    const statuses: number[] = [];
    for (let i = 0; i < 130; i++) statuses.push((await get(i % 2 ? b.url : a.url, i % 3 ? '/v1/artworks' : '/v1/rooms', key)).status);
    expect(statuses.filter((s) => s === 200).length).toBe(120);
    expect(statuses.slice(0, 120).every((s) => s === 200)).toBe(true);
    expect(statuses.slice(120).every((s) => s === 429)).toBe(true);
  });

  it('an exhibition registered on one is read and asked on the other', async () => {
    const registered = await fetch(`${a.url}/v1/guide/exhibitions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(exhibitionDoc({ id: 'shared-show' })),
    });
    expect(registered.status).toBe(200);
    expect((await get(b.url, '/v1/guide/exhibitions/shared-show')).status).toBe(200);
    const asked = await fetch(`${b.url}/v1/guide/ask`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ exhibition: 'shared-show', question: 'Which rooms are in this exhibition?' }),
    });
    expect(asked.status).toBe(200);
    expect(((await asked.json()) as { data: { answer: string } }).data.answer.length).toBeGreaterThan(0);
  });

  it('count presence across both', async () => {
    const onA = await openListener(a.url);
    const onB = await openListener(b.url);
    try {
      await onA.next((e) => (e.here ?? 0) >= 2, 5_000);
      await onB.next((e) => (e.here ?? 0) >= 2, 5_000);
    } finally {
      onA.close();
      onB.close();
    }
  });
});
