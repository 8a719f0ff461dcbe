/**
 * Servers on PostgreSQL (DATABASE_URL), against a real PostgreSQL server started for the test:
 * keys from the `museum keys` CLI, a revocation made anywhere reaching every instance within 1 s
 * (LISTEN/NOTIFY), and an outage: remembered keys keep working, unknown keys and registrations get
 * 503 UNAVAILABLE (never 401), one warning per outage, recovery by itself.
 */
import { execFile } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../../helpers/artifacts.ts';
import { capturedLogger } from '../../helpers/logs.ts';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';
import { exhibitionDoc } from '../guide/helpers.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const run = promisify(execFile);

let postgres: TestPostgres;
let databases = 0;

/** A fresh database on the test server, for one group of instances. */
async function freshDatabase(): Promise<string> {
  const name = `serve_${++databases}`;
  const admin = new pg.Client(postgres.url);
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return postgres.url.replace(/\/museum$/, `/${name}`);
}

async function museum(databaseUrl: string, ...args: string[]) {
  const { stdout } = await run(process.execPath, [join(REPO, 'bin/museum.js'), ...args], {
    cwd: REPO,
    env: { ...process.env, DATABASE_URL: databaseUrl, STATE_DB: '/nonexistent/never-used.db', LOG_LEVEL: 'silent' },
  });
  return stdout;
}

/** Poll until `check` holds (or fail after `ms`); returns how long it took. */
async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await sleep(20);
  }
  return Date.now() - start;
}

beforeAll(async () => {
  postgres = await startPostgres();
}, 60_000);
afterAll(() => postgres?.close());

async function startPair(databaseUrl: string, logs = capturedLogger('info')) {
  const a = await startTestServer({ env: { DATABASE_URL: databaseUrl }, keyName: 'pair-a', log: logs.log });
  await publishFixtureBake(a.dataDir);
  const b = await startTestServer({ env: { DATABASE_URL: databaseUrl }, keyName: 'pair-b', log: logs.log });
  await publishFixtureBake(b.dataDir);
  return { a, b, logs };
}

describe('keys in PostgreSQL', () => {
  let a: TestServer;
  let b: TestServer;
  let databaseUrl: string;
  beforeAll(async () => {
    databaseUrl = await freshDatabase();
    ({ a, b } = await startPair(databaseUrl));
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it('a key created through either instance works on both, on every keyed route', async () => {
    for (const [maker, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const { key } = await maker.services.keys.create(`made-${maker.port}`);
      for (const path of ['/v1/artworks', '/v1/rooms', '/v1/collections']) {
        expect((await other.get(path, { key })).status, path).toBe(200);
        expect((await maker.get(path, { key })).status, path).toBe(200);
      }
    }
  });

  it('a revocation by the museum keys CLI is refused by both instances within 1 s', async () => {
    const key = (await museum(databaseUrl, 'keys', 'create', '--name', 'cli-made')).trim();
    expect(key).toMatch(/^museum_[0-9a-f]{48}$/);
    // Both instances remember it (answered from memory from now on).
    for (const s of [a, b]) for (let i = 0; i < 3; i++) expect((await s.get('/v1/artworks', { key })).status).toBe(200);
    const listed = JSON.parse(await museum(databaseUrl, 'keys', 'list', '--json')) as Array<{ name: string; status: string }>;
    expect(listed.find((k) => k.name === 'cli-made')).toMatchObject({ status: 'active' });

    const revokedAt = Date.now();
    await museum(databaseUrl, 'keys', 'revoke', 'cli-made');
    const cliExit = Date.now() - revokedAt;
    for (const s of [a, b]) {
      const waited = await within(1_000, async () => (await s.get('/v1/artworks', { key })).status === 401);
      // Counted from the CLI's exit: the notice is sent when its transaction commits.
      expect(waited).toBeLessThan(1_000);
    }
    expect(cliExit).toBeGreaterThan(0);
  });

  it('a revocation on one instance is refused by the other within 1 s (every keyed route)', async () => {
    const { key } = await a.services.keys.create('cross-revoke');
    expect((await b.get('/v1/rooms', { key })).status).toBe(200);
    expect((await b.get('/v1/artworks', { key })).status).toBe(200);
    await a.services.keys.revoke('cross-revoke');
    await within(1_000, async () => (await b.get('/v1/artworks', { key })).status === 401);
    expect((await b.get('/v1/rooms', { key })).status).toBe(401);
  });
});

describe('PostgreSQL down', () => {
  it('known keys keep working, unknown keys and registrations get 503 UNAVAILABLE, one warning, recovery by itself', async () => {
    const databaseUrl = await freshDatabase();
    const { a, b, logs } = await startPair(databaseUrl);
    try {
      const known = (await a.services.keys.create('known')).key;
      const unseen = (await a.services.keys.create('unseen-by-a')).key;
      expect((await a.get('/v1/artworks', { key: known })).status).toBe(200);
      expect((await b.get('/v1/artworks', { key: unseen })).status).toBe(200);

      await postgres.stop();
      for (let i = 0; i < 20; i++) {
        expect((await a.get('/v1/artworks', { key: known })).status).toBe(200);
        expect((await a.get('/v1/rooms', { key: known })).status).toBe(200);
      }
      // A real key this instance has not seen: it cannot tell, so neither 401 nor accepted.
      for (let i = 0; i < 20; i++) {
        const refused = await a.get('/v1/artworks', { key: unseen });
        expect(await errorOf(refused)).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
        expect(refused.headers.get('x-request-id')).toBeTruthy();
        expect(await errorOf(await a.get('/v1/rooms', { key: `museum_${'1'.repeat(48)}` }))).toMatchObject({
          status: 503,
          code: 'UNAVAILABLE',
        });
      }
      const registration = await fetch(`${a.url}/v1/guide/exhibitions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(exhibitionDoc({ id: 'during-outage' })),
      });
      expect(await errorOf(registration)).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
      const warnings = logs.lines.filter((l) => /PostgreSQL.*unreachable/.test(String(l.msg)));
      // One per instance (both lose their listening connection), not one per request.
      expect(warnings.length).toBeLessThanOrEqual(2);
      expect(warnings.length).toBeGreaterThanOrEqual(1);

      await postgres.start();
      await within(10_000, async () => (await a.get('/v1/artworks', { key: unseen })).status === 200);
      expect((await a.get('/v1/artworks', { key: known })).status).toBe(200);
      expect(logs.lines.filter((l) => /PostgreSQL.*reachable again/.test(String(l.msg))).length).toBeGreaterThanOrEqual(1);
      // Revocation works again at once, whether or not the listening connection is back yet.
      await b.services.keys.revoke('known');
      await within(1_000, async () => (await a.get('/v1/artworks', { key: known })).status === 401);
    } finally {
      await postgres.start().catch(() => {});
      await a.close();
      await b.close();
    }
  }, 60_000);
});
