/**
 * API keys in PostgreSQL (DATABASE_URL; the SQLite store is in keys.ts). Verified keys are answered
 * from memory, so the keyed hot path never waits on the database. A trigger on `api_keys` NOTIFYs
 * every change of `revoked_at`/`hash` (whoever made it: a server, the CLI, an operator's psql); each
 * instance LISTENs and forgets that key at once, so a revocation reaches every instance within
 * milliseconds. A remembered key is re-checked after a minute while the listener is up; when the
 * listening connection is lost, notices may have been missed, so everything remembered is forgotten
 * when it is back. While PostgreSQL is down, remembered keys keep working (pg-db.ts).
 */
import { hash } from 'node:crypto';
import type pg from 'pg';
import {
  type ApiKeyInfo,
  checkKeyName,
  duplicateName,
  hashKey,
  KEY_PATTERN,
  type KeyRow,
  keyInfo,
  type KeyStore,
  matches,
  newKey,
  noSuchKey,
  PREFIX_LENGTH,
  UseBatch,
  VerifiedKeys,
} from './keys.ts';
import type { PgState } from './pg-db.ts';

const num = (v: string | number | null): number | null => (v === null ? null : Number(v));
const keyRowOf = (r: KeyRow): KeyRow => ({
  ...r,
  id: Number(r.id),
  created_at: Number(r.created_at),
  revoked_at: num(r.revoked_at),
  last_used_at: num(r.last_used_at),
});

/**
 * How long a remembered key is trusted while notices flow: a backstop for a notice lost in a way
 * the connection did not notice; revocations themselves arrive as notices.
 */
const TRUST_MS = 60_000;
/** Key hashes looked up per query. */
const LOOKUP_BATCH = 1_000;
interface KeyHashRow {
  id: string;
  hash: Buffer;
  revoked_at: string | null;
}

export class PgKeyStore implements KeyStore {
  private readonly verified = new VerifiedKeys();
  private readonly uses: UseBatch;
  /** Moves on every notice and reconnect: a lookup that started before one must not be remembered. */
  private generation = 0;
  private readonly inflight = new Map<string, Promise<number | null>>();
  private batch: Map<string, { resolve: (row: KeyHashRow | undefined) => void; reject: (err: unknown) => void }> | null = null;

  constructor(private readonly db: PgState) {
    db.onNotice((payload) => {
      this.generation++;
      const id = Number(payload);
      if (Number.isSafeInteger(id) && id > 0) this.verified.forgetId(id);
      else this.verified.clear();
    });
    db.onListening(() => {
      this.generation++;
      this.verified.clear();
    });
    this.uses = new UseBatch(async (pending) => {
      await db.query(
        'UPDATE api_keys SET last_used_at = GREATEST(COALESCE(api_keys.last_used_at, 0), u.at) FROM unnest($1::bigint[], $2::bigint[]) ' +
          'AS u(id, at) WHERE api_keys.id = u.id',
        [[...pending.keys()], [...pending.values()]],
      );
    });
  }

  async create(name: string) {
    const clean = checkKeyName(name);
    return this.db.transaction((c) => this.insert(c, clean));
  }

  async createMany(names: string[]) {
    const clean = names.map(checkKeyName);
    const keys = clean.map(() => newKey());
    const now = Date.now();
    try {
      // One statement for the lot.
      await this.db.query(
        'INSERT INTO api_keys (name, prefix, hash, created_at) SELECT n, p, h, $4 FROM unnest($1::text[], $2::text[], $3::bytea[]) AS ' +
          'k(n, p, h)',
        [clean, keys.map((k) => k.slice(0, PREFIX_LENGTH)), keys.map(hashKey), now],
      );
    } catch (err) {
      if ((err as { code?: string }).code === '23505') throw new Error('a key with one of these names already exists');
      throw err;
    }
    return keys;
  }

  private async insert(c: pg.PoolClient, name: string): Promise<{ key: string; info: ApiKeyInfo }> {
    const key = newKey();
    try {
      const { rows } = await c.query<KeyRow>('INSERT INTO api_keys (name, prefix, hash, created_at) VALUES ($1, $2, $3, $4) RETURNING *', [
        name,
        key.slice(0, PREFIX_LENGTH),
        hashKey(key),
        Date.now(),
      ]);
      return { key, info: keyInfo(keyRowOf(rows[0]!)) };
    } catch (err) {
      if ((err as { code?: string }).code === '23505') throw duplicateName(name);
      throw err;
    }
  }

  async replace(name: string) {
    const clean = checkKeyName(name);
    return this.db.transaction(async (c) => {
      const { rows } = await c.query<{ id: string; name: string }>('SELECT id, name FROM api_keys WHERE name = $1 FOR UPDATE', [clean]);
      const old = rows[0];
      if (old) {
        await c.query('UPDATE api_keys SET name = $1, revoked_at = COALESCE(revoked_at, $2) WHERE id = $3', [
          `${old.name}#${old.id}`,
          Date.now(),
          old.id,
        ]);
        this.verified.forgetId(Number(old.id));
      }
      return this.insert(c, clean);
    });
  }

  async list() {
    const { rows } = await this.db.query<KeyRow>('SELECT * FROM api_keys ORDER BY id');
    return rows.map((r) => keyInfo(keyRowOf(r)));
  }

  async find(nameOrId: string) {
    const { rows } = /^\d+$/.test(nameOrId)
      ? await this.db.query<KeyRow>('SELECT * FROM api_keys WHERE id = $1', [nameOrId])
      : await this.db.query<KeyRow>('SELECT * FROM api_keys WHERE name = $1', [nameOrId]);
    return rows[0] ? keyInfo(keyRowOf(rows[0])) : null;
  }

  async revoke(nameOrId: string) {
    const info = await this.find(nameOrId);
    if (!info) throw noSuchKey(nameOrId);
    // The trigger tells every instance (this one included); forget here too, before answering.
    await this.db.query('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [Date.now(), info.id]);
    this.generation++;
    this.verified.forgetId(info.id);
    return (await this.find(String(info.id)))!;
  }

  async verify(presented: string): Promise<number | null> {
    if (!KEY_PATTERN.test(presented)) return null;
    const digest = hash('sha256', presented, 'base64');
    const now = Date.now();
    const known = this.verified.get(digest);
    // Remembered keys: trusted while notices flow, and kept working as they are while the database
    // is down; otherwise (listener reconnecting, or a minute old) asked again.
    if (known && ((now - known.at < TRUST_MS && this.db.listening) || this.db.outage.down)) {
      this.uses.note(known.id, now);
      return known.id;
    }
    let lookup = this.inflight.get(digest);
    if (!lookup) {
      lookup = this.lookup(digest, known?.id).finally(() => this.inflight.delete(digest));
      this.inflight.set(digest, lookup);
    }
    return lookup;
  }

  private async lookup(digest: string, knownId: number | undefined): Promise<number | null> {
    const generation = this.generation;
    const presentedHash = Buffer.from(digest, 'base64');
    let row: KeyHashRow | undefined;
    try {
      row = await this.rowOf(digest);
    } catch (err) {
      // The database just went away: a key verified before keeps working.
      if (knownId !== undefined && this.verified.get(digest)?.id === knownId) return knownId;
      throw err;
    }
    if (!row || !matches(row.hash, presentedHash) || row.revoked_at !== null) {
      this.verified.delete(digest);
      return null;
    }
    const id = Number(row.id);
    const now = Date.now();
    // Remember only if no notice came meanwhile (it may have been this key's revocation).
    if (generation === this.generation && this.db.listening) this.verified.set(digest, id, now);
    this.uses.note(id, now);
    return id;
  }

  /**
   * The row of one key hash. Lookups asked for in the same turn of the event loop go out together,
   * one `hash = ANY(…)` query per 1,000: a burst of unknown keys (a restart, a flood of made-up
   * keys) costs a few round trips and a few pooled connections, not one each.
   */
  private rowOf(digest: string): Promise<KeyHashRow | undefined> {
    return new Promise((resolve, reject) => {
      if (!this.batch) {
        this.batch = new Map();
        setImmediate(() => this.lookUpBatch());
      }
      this.batch.set(digest, { resolve, reject });
    });
  }

  private lookUpBatch(): void {
    const batch = this.batch!;
    this.batch = null;
    const digests = [...batch.keys()];
    for (let i = 0; i < digests.length; i += LOOKUP_BATCH) {
      const chunk = digests.slice(i, i + LOOKUP_BATCH);
      this.db
        .query<KeyHashRow>('SELECT id, hash, revoked_at FROM api_keys WHERE hash = ANY($1::bytea[])', [
          chunk.map((d) => Buffer.from(d, 'base64')),
        ])
        .then(
          ({ rows }) => {
            const found = new Map(rows.map((r) => [r.hash.toString('base64'), r]));
            for (const d of chunk) batch.get(d)!.resolve(found.get(d));
          },
          (err: unknown) => {
            for (const d of chunk) batch.get(d)!.reject(err);
          },
        );
    }
  }

  flushUse(): Promise<void> {
    return this.uses.flush().catch(() => {});
  }
}
