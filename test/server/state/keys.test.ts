/**
 * API keys: both headers, 401 for missing/unknown/malformed/revoked keys, storage as SHA-256 hashes
 * only (checked in the SQLite file itself), revocation on the very next request — also when the
 * `museum keys` CLI revokes in another process sharing STATE_DB — and the CLI commands.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStateDb } from '../../../server/state/db.ts';
import { SqliteKeyStore, VerifiedKeys } from '../../../server/state/keys.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const run = promisify(execFile);

/** Run `museum …` as operators do (its own process), against the test server's STATE_DB. */
async function museum(stateDb: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(REPO, 'bin/museum.js'), ...args], {
      cwd: REPO,
      env: { ...process.env, STATE_DB: stateDb, LOG_LEVEL: 'silent' },
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

describe('presenting a key', () => {
  it('accepts X-API-Key and Authorization: Bearer (any case of "bearer")', async () => {
    expect((await server.get('/v1/rooms', { key: null, headers: { 'X-API-Key': server.key } })).status).toBe(200);
    expect((await server.get('/v1/rooms', { key: null, headers: { Authorization: `Bearer ${server.key}` } })).status).toBe(200);
    expect((await server.get('/v1/rooms', { key: null, headers: { Authorization: `bearer   ${server.key}` } })).status).toBe(200);
  });

  it('answers 401 UNAUTHORIZED for missing, unknown, malformed and wrongly framed keys', async () => {
    const unknown = `museum_${'ab'.repeat(24)}`;
    const cases: Array<Record<string, string>> = [
      {},
      { 'X-API-Key': unknown },
      { 'X-API-Key': server.key.toUpperCase() },
      { 'X-API-Key': server.key.slice(0, -1) },
      { 'X-API-Key': `${server.key}0` },
      { Authorization: server.key },
      { Authorization: `Basic ${server.key}` },
      { Authorization: `Bearer ${server.key} extra` },
    ];
    for (const headers of cases) {
      const res = await server.get('/v1/collections', { key: null, headers });
      expect(await errorOf(res), JSON.stringify(headers)).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    }
  });

  it('does not ask public routes for a key', async () => {
    expect((await server.get('/v1', { key: null })).status).toBe(200);
    expect((await server.get('/v1/openapi.json', { key: null })).status).toBe(200);
  });
});

describe('storage', () => {
  it('keeps only SHA-256 hashes and a short prefix: the key never appears in the SQLite files', async () => {
    const { key } = await server.services.keys.create('storage-check');
    expect((await server.get('/v1/rooms', { key })).status).toBe(200);
    await server.services.keys.flushUse();
    const db = new Database(server.stateDb, { readonly: true });
    const row = db.prepare('SELECT * FROM api_keys WHERE name = ?').get('storage-check') as Record<string, unknown>;
    db.close();
    expect(row.hash).toEqual(createHash('sha256').update(key).digest());
    expect(row.prefix).toBe(key.slice(0, 13));
    expect(row.last_used_at).toEqual(expect.any(Number));
    for (const value of Object.values(row)) expect(String(value)).not.toContain(key.slice(13));
    // The database file, its WAL and shared memory, byte for byte. Read from another process: closing a
    // descriptor of these files in this one would drop the server connection's POSIX locks.
    const dir = dirname(server.stateDb);
    const files = readdirSync(dir).filter((f) => f.startsWith('state.db'));
    expect(files).toContain('state.db');
    const scan = `const fs = require('node:fs'); const [dir, ...needles] = process.argv.slice(1);
      const files = fs.readdirSync(dir).filter((f) => f.startsWith('state.db')).map((f) => fs.readFileSync(dir + '/' + f));
      process.stdout.write(JSON.stringify(needles.map((n) => files.filter((b) => b.includes(n)).length)));`;
    const { stdout } = await run(process.execPath, ['-e', scan, dir, key, key.slice(13), 'storage-check', key.slice(0, 13)]);
    const [whole, secretPart, name, prefix] = JSON.parse(stdout) as number[];
    expect({ whole, secretPart }).toEqual({ whole: 0, secretPart: 0 });
    // The scan does see what is stored (the name and the prefix), so the zeros above mean something.
    expect(name).toBeGreaterThan(0);
    expect(prefix).toBeGreaterThan(0);
  });
});

describe('revocation', () => {
  it('takes effect on the next request and leaves other keys alone', async () => {
    const a = (await server.services.keys.create('revoke-a')).key;
    const b = (await server.services.keys.create('revoke-b')).key;
    expect((await server.get('/v1/rooms', { key: a })).status).toBe(200);
    await server.services.keys.revoke('revoke-a');
    expect(await errorOf(await server.get('/v1/rooms', { key: a }))).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    expect((await server.get('/v1/rooms', { key: b })).status).toBe(200);
  });

  it('takes effect on the next request when the CLI revokes it from another process', async () => {
    const created = await museum(server.stateDb, 'keys', 'create', '--name', 'cli-made', '--json');
    expect(created.code).toBe(0);
    const { key, name, status } = JSON.parse(created.stdout) as { key: string; name: string; status: string };
    expect(key).toMatch(/^museum_[0-9a-f]{48}$/);
    expect({ name, status }).toEqual({ name: 'cli-made', status: 'active' });
    // A key made by another process works at once on this server (shared STATE_DB)…
    expect((await server.get('/v1/rooms', { key })).status).toBe(200);
    const revoked = await museum(server.stateDb, 'keys', 'revoke', 'cli-made', '--json');
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ name: 'cli-made', status: 'revoked', revoked_at: expect.any(String) });
    // …and its revocation by that process applies to the very next request here.
    expect(await errorOf(await server.get('/v1/rooms', { key }))).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    expect((await server.get('/v1/rooms')).status).toBe(200);
  });
});

describe('KeyStore across connections', () => {
  it('sees keys created and revoked through another connection on the first verification a millisecond later', async () => {
    const dbs = [openStateDb(server.stateDb), openStateDb(server.stateDb)];
    const [here, there] = dbs.map((db) => new SqliteKeyStore(db)) as [SqliteKeyStore, SqliteKeyStore];
    // The store reads data_version at most once per millisecond (see keys.ts).
    const nextMillisecond = () => {
      const start = Date.now();
      while (Date.now() === start);
    };
    try {
      const { key } = await there.create('other-connection');
      nextMillisecond();
      expect(await here.verify(key)).toEqual(expect.any(Number));
      expect(await here.verify(key)).toEqual(expect.any(Number)); // now remembered
      await there.revoke('other-connection');
      nextMillisecond();
      expect(await here.verify(key)).toBeNull();
      // Its own revocations too, although they do not move its connection's data_version.
      const own = (await here.create('own-connection')).key;
      expect(await here.verify(own)).toEqual(expect.any(Number));
      await here.revoke('own-connection');
      expect(await here.verify(own)).toBeNull();
    } finally {
      await here.flushUse();
      await there.flushUse();
      for (const db of dbs) db.close();
    }
  });
});

describe('verified keys in memory', () => {
  it('are an LRU of their bound: a new key pushes out the least recently used one, not all of them', () => {
    const verified = new VerifiedKeys(3);
    verified.set('a', 1, 10);
    verified.set('b', 2, 11);
    verified.set('c', 3, 12);
    expect(verified.get('a')).toEqual({ id: 1, at: 10 });
    verified.set('d', 4, 13); // b is the least recently used
    expect(verified.size).toBe(3);
    expect(verified.get('b')).toBeUndefined();
    expect([verified.get('a')?.id, verified.get('c')?.id, verified.get('d')?.id]).toEqual([1, 3, 4]);
  });

  it('forget every digest of a key id at once, and nothing else', () => {
    const verified = new VerifiedKeys();
    verified.set('a', 1, 10);
    verified.set('b', 2, 10);
    verified.set('a2', 1, 11);
    verified.forgetId(1);
    expect(verified.size).toBe(1);
    expect(verified.get('b')?.id).toBe(2);
  });
});

describe('museum keys CLI', () => {
  it('create prints the key once (stdout) and a note on stderr; list shows names, prefixes, status and last use', async () => {
    const created = await museum(server.stateDb, 'keys', 'create', '--name', 'plain-cli');
    expect(created.code).toBe(0);
    const key = created.stdout.trim();
    expect(key).toMatch(/^museum_[0-9a-f]{48}$/);
    expect(created.stderr).toMatch(/plain-cli/);
    expect(created.stderr).not.toContain(key);
    expect((await server.get('/v1/rooms', { key })).status).toBe(200);
    await server.services.keys.flushUse();

    const listed = await museum(server.stateDb, 'keys', 'list', '--json');
    expect(listed.code).toBe(0);
    const list = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    const entry = list.find((k) => k.name === 'plain-cli')!;
    expect(entry).toMatchObject({ prefix: key.slice(0, 13), status: 'active', last_used_at: expect.any(String) });
    expect(listed.stdout).not.toContain(key);
    expect(list.find((k) => k.name === 'cli-made')).toMatchObject({ status: 'revoked' });

    const table = await museum(server.stateDb, 'keys', 'list');
    expect(table.code).toBe(0);
    const line = table.stdout.split('\n').find((l) => l.includes('plain-cli'))!;
    expect(line).toContain(`${key.slice(0, 13)}…`);
    expect(line).toContain('active');
    expect(line).toMatch(/\d{4}-\d{2}-\d{2}T/);
  });

  it('fails with one line and exit 1 on a duplicate name or an unknown key; exit 2 on usage errors', async () => {
    const duplicate = await museum(server.stateDb, 'keys', 'create', '--name', 'test');
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr.trim().split('\n')).toHaveLength(1);
    expect(duplicate.stderr).toMatch(/already exists/);
    const unknown = await museum(server.stateDb, 'keys', 'revoke', 'no-such-key');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    const usage = await museum(server.stateDb, 'keys', 'create');
    expect(usage.code).toBe(2);
  });
});
