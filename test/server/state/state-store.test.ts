/**
 * The state store contract, run against both backends: the SQLite file (STATE_DB, the default) and
 * a real PostgreSQL server (DATABASE_URL) started for the test. Keys (create, list, find, revoke,
 * replace, verify, last use) and exhibitions (ownership, size bound, daily quota per IP, expiry),
 * and migrations applied once when several processes open a fresh store together.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpError } from '../../../server/errors.ts';
import { ExhibitionDocument, type GuideContext } from '../../../server/guide/exhibitions.ts';
import { ContextCache, DAY_MS, EXHIBITION_BOUNDS } from '../../../server/state/exhibitions.ts';
import { openStateStore, type StateConfig, type StateStore } from '../../../server/state/store.ts';
import { exhibitionDoc } from '../guide/helpers.ts';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.ts';

const TTL_MS = 180 * DAY_MS;
const quiet = pino({ level: 'silent' });
let postgres: TestPostgres;
const tmp = mkdtempSync(join(tmpdir(), 'museum-state-'));
let databases = 0;

/** A fresh, empty store of each kind (a new SQLite file, a new PostgreSQL database). */
async function freshConfig(backend: 'sqlite' | 'postgres'): Promise<StateConfig> {
  const n = ++databases;
  if (backend === 'sqlite') return { stateDb: join(tmp, `state-${n}.db`), exhibitionTtlMs: TTL_MS };
  const admin = new pg.Client(postgres.url);
  await admin.connect();
  await admin.query(`CREATE DATABASE contract_${n}`);
  await admin.end();
  return { stateDb: join(tmp, 'unused.db'), databaseUrl: postgres.url.replace(/\/museum$/, `/contract_${n}`), exhibitionTtlMs: TTL_MS };
}

beforeAll(async () => {
  postgres = await startPostgres();
}, 60_000);
afterAll(async () => {
  await postgres?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const doc = (overrides: Record<string, unknown> = {}) => ExhibitionDocument.parse(exhibitionDoc(overrides));
/** A context the way the guide builds one, without the baked content (the store does not care). */
const builder =
  (d: ExhibitionDocument, padding = '') =>
  (times: { registeredAt: string; updatedAt: string }, starters: string[]): GuideContext => ({
    id: d.id,
    name: d.name,
    ...times,
    generator: padding || null,
    artists: [],
    architects: [],
    starters,
    rooms: [],
    artworks: [],
  });
const statusOf = async (p: Promise<unknown>) => {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return err instanceof HttpError ? `${err.status} ${err.code}` : `error: ${(err as Error).message}`;
  }
};

describe.each(['sqlite', 'postgres'] as const)('state store contract: %s', (backend) => {
  let store: StateStore;
  beforeAll(async () => {
    store = await openStateStore(await freshConfig(backend), quiet, { serving: true });
  });
  afterAll(() => store?.close());

  it('check() answers with a real query on the tables (readiness)', async () => {
    await expect(store.check()).resolves.toBeUndefined();
  });

  describe('keys', () => {
    it('creates, lists, finds by name or id, and refuses duplicate or numeric names', async () => {
      const { key, info } = await store.keys.create('  alpha ');
      expect(key).toMatch(/^museum_[0-9a-f]{48}$/);
      expect(info).toMatchObject({ name: 'alpha', prefix: key.slice(0, 13), status: 'active', revoked_at: null, last_used_at: null });
      expect(await store.keys.find('alpha')).toEqual(info);
      expect(await store.keys.find(String(info.id))).toEqual(info);
      expect(await store.keys.find('nobody')).toBeNull();
      await expect(store.keys.create('alpha')).rejects.toThrow('a key named "alpha" already exists');
      await expect(store.keys.create('123')).rejects.toThrow(/must not be a number/);
      await expect(store.keys.create(' ')).rejects.toThrow(/1 to 64/);
      expect((await store.keys.list()).map((k) => k.name)).toContain('alpha');
      expect(JSON.stringify(await store.keys.list())).not.toContain(key);
    });

    it('verifies active keys only; a revocation takes effect on the next verification', async () => {
      const { key, info } = await store.keys.create('beta');
      expect(await store.keys.verify(key)).toBe(info.id);
      expect(await store.keys.verify(key)).toBe(info.id); // remembered
      expect(await store.keys.verify(`museum_${'0'.repeat(48)}`)).toBeNull();
      expect(await store.keys.verify(key.toUpperCase())).toBeNull();
      expect(await store.keys.verify('not a key')).toBeNull();
      const revoked = await store.keys.revoke('beta');
      expect(revoked).toMatchObject({ status: 'revoked', revoked_at: expect.any(String) });
      expect(await store.keys.verify(key)).toBeNull();
      await expect(store.keys.revoke('nobody')).rejects.toThrow('no key named or numbered "nobody"');
    });

    it('replace issues a fresh key under the name and revokes and renames the old one', async () => {
      const first = await store.keys.replace('dev');
      const second = await store.keys.replace('dev');
      expect(await store.keys.verify(first.key)).toBeNull();
      expect(await store.keys.verify(second.key)).toBe(second.info.id);
      expect(await store.keys.find(`dev#${first.info.id}`)).toMatchObject({ status: 'revoked' });
    });

    it('verifies a burst of thousands of keys it has never seen, all at once', async () => {
      const keys = await store.keys.createMany(Array.from({ length: 3_000 }, (_, i) => `burst-${i}`));
      const ids = await Promise.all(keys.map((key) => store.keys.verify(key)));
      expect(ids.every((id) => typeof id === 'number')).toBe(true);
      expect(new Set(ids).size).toBe(3_000);
      const unknown = await Promise.all(
        Array.from({ length: 500 }, (_, i) => store.keys.verify(`museum_${i.toString(16).padStart(48, '0')}`)),
      );
      expect(unknown.every((id) => id === null)).toBe(true);
    });

    it('createMany makes many keys in one go; last use is written in batches', async () => {
      const keys = await store.keys.createMany(['m-1', 'm-2', 'm-3']);
      expect(new Set(keys).size).toBe(3);
      for (const key of keys) expect(await store.keys.verify(key)).toEqual(expect.any(Number));
      await store.keys.flushUse();
      expect(await store.keys.find('m-2')).toMatchObject({ last_used_at: expect.any(String) });
    });
  });

  describe('exhibitions', () => {
    const ip = (n: number) => `198.51.100.${n}`;

    it('registers once with an owner token; identical content is free; changes need the token', async () => {
      const d = doc({ id: 'contract-a' });
      const first = await store.exhibitions.register(d, undefined, builder(d), { ip: ip(1) });
      expect(first).toMatchObject({ outcome: 'created', ownerToken: expect.stringMatching(/^exh_[0-9a-f]{48}$/) });
      expect((await store.exhibitions.get('contract-a'))?.context.name).toBe(d.name);
      const again = await store.exhibitions.register(d, undefined, builder(d), { ip: ip(1) });
      expect(again.outcome).toBe('unchanged');
      expect(again.ownerToken).toBeUndefined();
      const changed = doc({ id: 'contract-a', name: 'Renamed' });
      expect(await statusOf(store.exhibitions.register(changed, undefined, builder(changed), { ip: ip(1) }))).toBe('409 CONFLICT');
      expect(await statusOf(store.exhibitions.register(changed, 'exh_wrong', builder(changed), { ip: ip(1) }))).toBe('409 CONFLICT');
      const updated = await store.exhibitions.register(changed, first.ownerToken, builder(changed), { ip: ip(1) });
      expect(updated.outcome).toBe('updated');
      expect((await store.exhibitions.get('contract-a'))?.context.name).toBe('Renamed');
      expect(await store.exhibitions.get('contract-missing')).toBeNull();
    });

    it('stores starters unless the content changed meanwhile', async () => {
      const d = doc({ id: 'contract-starters' });
      const { contentHash } = await store.exhibitions.register(d, undefined, builder(d), { ip: ip(2) });
      expect(await store.exhibitions.setStarters('contract-starters', contentHash, ['Who?'])).toBe(true);
      expect((await store.exhibitions.get('contract-starters'))?.context.starters).toEqual(['Who?']);
      expect(await store.exhibitions.setStarters('contract-starters', 'other-hash', ['No'])).toBe(false);
      expect(await store.exhibitions.setStarters('contract-nobody', contentHash, ['No'])).toBe(false);
    });

    it(`refuses a context over ${EXHIBITION_BOUNDS.storedBytes / 1024} KB with 413 and stores nothing`, async () => {
      const d = doc({ id: 'contract-big' });
      const big = builder(d, 'x'.repeat(EXHIBITION_BOUNDS.storedBytes));
      expect(await statusOf(store.exhibitions.register(d, undefined, big, { ip: ip(3) }))).toBe('413 PAYLOAD_TOO_LARGE');
      expect(await store.exhibitions.get('contract-big')).toBeNull();
      const justUnder = builder(d, 'x'.repeat(EXHIBITION_BOUNDS.storedBytes - 1_000));
      expect((await store.exhibitions.register(d, undefined, justUnder, { ip: ip(3) })).outcome).toBe('created');
    });

    it(
      `allows ${EXHIBITION_BOUNDS.registrationsPerDay} creations or changes per IP per UTC day (429 after, with Retry-After); ` +
        `re-sends are free`,
      async () => {
        const now = Date.UTC(2030, 0, 1, 23, 0, 0);
        const docs = Array.from({ length: EXHIBITION_BOUNDS.registrationsPerDay + 1 }, (_, i) => doc({ id: `quota-${i}` }));
        for (const d of docs.slice(0, -1)) await store.exhibitions.register(d, undefined, builder(d), { ip: ip(4), now });
        const last = docs.at(-1)!;
        const refused = await store.exhibitions.register(last, undefined, builder(last), { ip: ip(4), now }).catch((e: HttpError) => e);
        expect(refused).toBeInstanceOf(HttpError);
        expect(refused).toMatchObject({ status: 429, code: 'RATE_LIMITED', headers: { 'Retry-After': '3600' } });
        expect(await store.exhibitions.get('quota-50', now)).toBeNull();
        // Identical re-sends cost nothing; another address and the next day have their own budget.
        expect((await store.exhibitions.register(docs[0]!, undefined, builder(docs[0]!), { ip: ip(4), now })).outcome).toBe('unchanged');
        expect((await store.exhibitions.register(last, undefined, builder(last), { ip: ip(5), now })).outcome).toBe('created');
        const other = doc({ id: 'quota-next-day' });
        expect((await store.exhibitions.register(other, undefined, builder(other), { ip: ip(4), now: now + 2 * 3_600_000 })).outcome).toBe(
          'created',
        );
      },
    );

    it('counts an IPv6 client by its /64: every address of one /64 shares one daily budget', async () => {
      const now = Date.UTC(2030, 0, 2, 12, 0, 0);
      const of64 = (n: number) => `2001:db8:77:1:${n.toString(16)}::${(n * 7).toString(16)}`;
      const docs = Array.from({ length: EXHIBITION_BOUNDS.registrationsPerDay + 1 }, (_, i) => doc({ id: `quota6-${i}` }));
      for (const [i, d] of docs.slice(0, -1).entries())
        await store.exhibitions.register(d, undefined, builder(d), { ip: of64(i + 1), now });
      const last = docs.at(-1)!;
      const refused = await store.exhibitions.register(last, undefined, builder(last), { ip: of64(999), now }).catch((e: HttpError) => e);
      expect(refused).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
      // The next /64 is another client; an IPv4-mapped address counts as its IPv4 address.
      expect((await store.exhibitions.register(last, undefined, builder(last), { ip: '2001:db8:77:2::1', now })).outcome).toBe('created');
      const mapped = doc({ id: 'quota6-mapped' });
      for (let i = 0; i < EXHIBITION_BOUNDS.registrationsPerDay; i++) {
        const d = doc({ id: `quota4-${i}` });
        await store.exhibitions.register(d, undefined, builder(d), { ip: '192.0.2.77', now });
      }
      const refusedMapped = await store.exhibitions
        .register(mapped, undefined, builder(mapped), { ip: '::ffff:192.0.2.77', now })
        .catch((e: HttpError) => e);
      expect(refusedMapped).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    });

    it('expires an exhibition nobody read or changed for the TTL; a read keeps it alive', async () => {
      const t0 = Date.UTC(2031, 0, 1);
      const idle = doc({ id: 'contract-idle' });
      const read = doc({ id: 'contract-read' });
      const first = await store.exhibitions.register(idle, undefined, builder(idle), { ip: ip(6), now: t0 });
      await store.exhibitions.register(read, undefined, builder(read), { ip: ip(6), now: t0 });
      // Read at day 100 (recorded: more than a day since the last change).
      expect(await store.exhibitions.get('contract-read', t0 + 100 * DAY_MS)).not.toBeNull();
      const later = t0 + TTL_MS + DAY_MS;
      expect(await store.exhibitions.get('contract-idle', later)).toBeNull();
      expect(await store.exhibitions.get('contract-read', later)).not.toBeNull();
      expect(await store.exhibitions.sweep(later)).toBeGreaterThanOrEqual(1);
      // Gone for good: the id can be registered afresh, with a new owner token.
      const again = await store.exhibitions.register(idle, undefined, builder(idle), { ip: ip(6), now: later });
      expect(again.outcome).toBe('created');
      expect(again.ownerToken).not.toBe(first.ownerToken);
    });
  });

  it('applies its migrations once when several processes open a fresh store together', async () => {
    const config = await freshConfig(backend);
    const stores = await Promise.all(Array.from({ length: 4 }, () => openStateStore(config, quiet)));
    try {
      const { key } = await stores[0]!.keys.create('shared');
      for (const s of stores) expect(await s.keys.verify(key)).toEqual(expect.any(Number));
      await Promise.all(stores.map((s) => s.check()));
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
    if (backend === 'postgres') {
      const client = new pg.Client(config.databaseUrl);
      await client.connect();
      const { rows } = await client.query<{ version: number; n: string }>(
        'SELECT version, COUNT(*) AS n FROM museum_migrations GROUP BY version ORDER BY version',
      );
      await client.end();
      expect(rows.map((r) => [r.version, Number(r.n)])).toEqual([
        [1, 1],
        [2, 1],
      ]);
    }
  });
});

describe('ContextCache', () => {
  const row = (id: string, updatedAt: number, padding = 0) => ({
    updated_at: updatedAt,
    context: JSON.stringify({ id, pad: 'x'.repeat(padding) }),
    content_hash: `hash-${id}`,
  });

  it('answers only for the same updated_at, and keeps the least recently used out first by count', () => {
    const cache = new ContextCache(2);
    cache.remember('a', row('a', 1));
    cache.remember('b', row('b', 1));
    expect(cache.hit('a', 2)).toBeNull(); // changed in the store since
    expect(cache.hit('a', 1)?.contentHash).toBe('hash-a');
    cache.remember('c', row('c', 1)); // b is the least recently used
    expect(cache.stampOf('b')).toBeUndefined();
    expect([cache.stampOf('a'), cache.stampOf('c')]).toEqual([1, 1]);
  });

  it('stays within its byte budget, and does not keep a context larger than a quarter of it', () => {
    const cache = new ContextCache(100, 1_000);
    cache.remember('a', row('a', 1, 200));
    cache.remember('b', row('b', 1, 200));
    cache.remember('c', row('c', 1, 200));
    cache.remember('d', row('d', 1, 200));
    cache.remember('e', row('e', 1, 200)); // five of ~220 bytes > 1,000: a goes
    expect(cache.stampOf('a')).toBeUndefined();
    expect(['b', 'c', 'd', 'e'].map((id) => cache.stampOf(id))).toEqual([1, 1, 1, 1]);
    const big = cache.remember('big', row('big', 1, 300));
    expect(big.contentHash).toBe('hash-big'); // answered
    expect(cache.stampOf('big')).toBeUndefined(); // not kept
    expect(cache.stampOf('b')).toBe(1); // and nothing pushed out for it
  });
});
