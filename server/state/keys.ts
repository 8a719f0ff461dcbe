/**
 * API keys (decisions: `museum_` + 48 lowercase hex, stored only as SHA-256 hashes, compared in
 * constant time, shown once): the store interface both backends implement, what they share, and
 * the SQLite store (STATE_DB). The PostgreSQL store (DATABASE_URL) is in pg-keys.ts.
 *
 * SQLite: a revocation made by any process takes effect on the next request: verified keys are
 * remembered for a few seconds at most, and only while STATE_DB is unchanged. SQLite's
 * `data_version` moves whenever another connection (the CLI, a sibling server) commits; it is read
 * at most once per millisecond, because reading it opens a read transaction — under load the
 * dearest part of a key check, more than the rest of a cached keyed request. So a revocation
 * committed elsewhere is seen by every request that starts in a later millisecond. This store's own
 * revocations forget everything at once. `last_used_at` writes are batched.
 */
import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { StateDb } from './db.ts';

export const KEY_PATTERN = /^museum_[0-9a-f]{48}$/;
export const PREFIX_LENGTH = 'museum_'.length + 6;

export interface ApiKeyInfo {
  id: number;
  name: string;
  prefix: string;
  status: 'active' | 'revoked';
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

/** What every key store offers: the CLI's commands, and `verify` for the request path. */
export interface KeyStore {
  create(name: string): Promise<{ key: string; info: ApiKeyInfo }>;
  /** Create many keys in one transaction (provisioning, benchmarks); returns the keys in order. */
  createMany(names: string[]): Promise<string[]>;
  /**
   * Issue a fresh key under `name`, revoking (and renaming) any key that had it — how `make run`
   * hands a newcomer a working development key without ever storing a key in clear.
   */
  replace(name: string): Promise<{ key: string; info: ApiKeyInfo }>;
  list(): Promise<ApiKeyInfo[]>;
  /** Find by name or numeric id. */
  find(nameOrId: string): Promise<ApiKeyInfo | null>;
  revoke(nameOrId: string): Promise<ApiKeyInfo>;
  /**
   * The id of the active key matching `presented`, or null. Synchronous when answered from memory
   * (the hot path); a promise when the store must be asked, rejected with 503 UNAVAILABLE when it
   * cannot be.
   */
  verify(presented: string): Promise<number | null>;
  /** Write batched last-use times. */
  flushUse(): Promise<void>;
}

export interface KeyRow {
  id: number;
  name: string;
  prefix: string;
  hash: Buffer;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
}

export const hashKey = (key: string): Buffer => createHash('sha256').update(key).digest();
export const newKey = (): string => `museum_${randomBytes(24).toString('hex')}`;

/** A clean key name, or an Error saying why not. */
export function checkKeyName(name: string): string {
  const clean = name.trim();
  if (!clean || clean.length > 64) throw new Error('key name must be 1 to 64 characters');
  if (/^\d+$/.test(clean)) throw new Error('key name must not be a number (numbers address key ids)');
  return clean;
}
export const duplicateName = (name: string) => new Error(`a key named "${name}" already exists`);
export const noSuchKey = (nameOrId: string) => new Error(`no key named or numbered "${nameOrId}"`);

/**
 * Verified keys remembered in memory: base64 SHA-256 → key id and when it was verified. An LRU of
 * `max` keys, so a server with more active keys than that re-checks only the least recently used.
 */
export class VerifiedKeys {
  private readonly entries: LRUCache<string, { id: number; at: number }>;
  constructor(max = 10_000) {
    this.entries = new LRUCache({ max });
  }
  get(digest: string) {
    return this.entries.get(digest);
  }
  set(digest: string, id: number, at: number): void {
    this.entries.set(digest, { id, at });
  }
  delete(digest: string): void {
    this.entries.delete(digest);
  }
  /** Forget one key (by id), e.g. on a revocation notice. */
  forgetId(id: number): void {
    // Collected first: lru-cache's iterators follow links that a delete rewrites.
    const digests = [...this.entries.entries()].filter(([, e]) => e.id === id).map(([digest]) => digest);
    for (const digest of digests) this.entries.delete(digest);
  }
  clear(): void {
    this.entries.clear();
  }
  get size(): number {
    return this.entries.size;
  }
}

/** Last-use times gathered per key and written in one batch every couple of seconds. */
export class UseBatch {
  private pending = new Map<number, number>();
  private timer: NodeJS.Timeout | null = null;
  constructor(private readonly write: (uses: Map<number, number>) => void | Promise<void>) {}
  note(id: number, at: number): void {
    this.pending.set(id, at);
    this.timer ??= setTimeout(() => void this.flush().catch(() => {}), 2_000).unref();
  }
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const pending = this.pending;
    if (pending.size === 0) return;
    this.pending = new Map();
    await this.write(pending);
  }
}

export const matches = (stored: Buffer, presented: Buffer): boolean =>
  stored.length === presented.length && timingSafeEqual(stored, presented);

/** How long the SQLite store trusts a verified key without a row lookup (if STATE_DB does not change meanwhile). */
const RECENT_MS = 5_000;
const iso = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

export class SqliteKeyStore implements KeyStore {
  private readonly byHash;
  private readonly touch;
  private readonly dataVersion;
  private readonly uses: UseBatch;
  private readonly recent = new VerifiedKeys();
  private recentVersion: number;
  /** The millisecond in which `data_version` was last read. */
  private versionReadAt = 0;

  constructor(private readonly db: StateDb) {
    this.byHash = db.prepare<[Buffer], Pick<KeyRow, 'id' | 'hash' | 'revoked_at'>>(
      'SELECT id, hash, revoked_at FROM api_keys WHERE hash = ?',
    );
    this.dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
    this.recentVersion = this.dataVersion.get()!;
    this.touch = db.prepare<[{ id: number; at: number }]>(
      'UPDATE api_keys SET last_used_at = @at WHERE id = @id AND (last_used_at IS NULL OR last_used_at < @at)',
    );
    this.uses = new UseBatch((pending) => {
      this.db.transaction(() => {
        for (const [id, at] of pending) this.touch.run({ id, at });
      })();
    });
  }

  async create(name: string) {
    return this.createNow(name);
  }

  async createMany(names: string[]) {
    return this.db.transaction(() => names.map((name) => this.createNow(name).key))();
  }

  private createNow(name: string): { key: string; info: ApiKeyInfo } {
    const clean = checkKeyName(name);
    const key = newKey();
    try {
      this.db
        .prepare('INSERT INTO api_keys (name, prefix, hash, created_at) VALUES (?, ?, ?, ?)')
        .run(clean, key.slice(0, PREFIX_LENGTH), hashKey(key), Date.now());
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw duplicateName(clean);
      throw err;
    }
    return { key, info: this.findNow(clean)! };
  }

  async replace(name: string) {
    return this.db.transaction(() => {
      const old = this.findNow(name);
      if (old) {
        this.db
          .prepare('UPDATE api_keys SET name = ?, revoked_at = COALESCE(revoked_at, ?) WHERE id = ?')
          .run(`${old.name}#${old.id}`, Date.now(), old.id);
        this.recent.clear();
      }
      return this.createNow(name);
    })();
  }

  async list() {
    return this.db.prepare<[], KeyRow>('SELECT * FROM api_keys ORDER BY id').all().map(keyInfo);
  }

  async find(nameOrId: string) {
    return this.findNow(nameOrId);
  }

  private findNow(nameOrId: string): ApiKeyInfo | null {
    const row = /^\d+$/.test(nameOrId)
      ? this.db.prepare<[number], KeyRow>('SELECT * FROM api_keys WHERE id = ?').get(Number(nameOrId))
      : this.db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE name = ?').get(nameOrId);
    return row ? keyInfo(row) : null;
  }

  async revoke(nameOrId: string) {
    const info = this.findNow(nameOrId);
    if (!info) throw noSuchKey(nameOrId);
    this.db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(Date.now(), info.id);
    // Our own writes do not move data_version for this connection.
    this.recent.clear();
    return this.findNow(String(info.id))!;
  }

  async verify(presented: string): Promise<number | null> {
    if (!KEY_PATTERN.test(presented)) return null;
    const digest = hash('sha256', presented, 'base64');
    const now = Date.now();
    if (now !== this.versionReadAt) {
      this.versionReadAt = now;
      const version = this.dataVersion.get()!;
      if (version !== this.recentVersion) {
        // Another connection wrote to STATE_DB (maybe a revocation): trust nothing remembered.
        this.recent.clear();
        this.recentVersion = version;
      }
    }
    const known = this.recent.get(digest);
    let id: number;
    if (known && now - known.at < RECENT_MS) id = known.id;
    else {
      const presentedHash = Buffer.from(digest, 'base64');
      const row = this.byHash.get(presentedHash);
      // The lookup is by hash, so timing reveals nothing about the key; compare anyway in constant time.
      if (!row || !matches(row.hash, presentedHash) || row.revoked_at !== null) {
        this.recent.delete(digest);
        return null;
      }
      id = row.id;
      this.recent.set(digest, id, now);
    }
    this.uses.note(id, now);
    return id;
  }

  flushUse(): Promise<void> {
    return this.uses.flush();
  }
}

export function keyInfo(row: KeyRow): ApiKeyInfo {
  return {
    id: Number(row.id),
    name: row.name,
    prefix: row.prefix,
    status: row.revoked_at === null ? 'active' : 'revoked',
    created_at: iso(row.created_at)!,
    revoked_at: iso(row.revoked_at),
    last_used_at: iso(row.last_used_at),
  };
}
