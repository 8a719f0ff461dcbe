/**
 * API keys (decisions: `museum_` + 48 lowercase hex, stored only as SHA-256 hashes, compared in
 * constant time, shown once). A revocation made by any process takes effect on the next request:
 * verified keys are remembered for a few seconds at most, and only while STATE_DB is unchanged.
 * SQLite's `data_version` moves whenever another connection (the CLI, a sibling server) commits; it
 * is read at most once per millisecond, because reading it opens a read transaction — under load the
 * dearest part of a key check, more than the rest of a cached keyed request. So a revocation
 * committed elsewhere is seen by every request that starts in a later millisecond: long before a
 * revoke command has even exited, and far inside decisions.md's "no positive cache longer than a
 * few seconds". This store's own revocations forget everything at once. `last_used_at` writes are
 * batched.
 */
import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { StateDb } from './db.ts';

export const KEY_PATTERN = /^museum_[0-9a-f]{48}$/;
const PREFIX_LENGTH = 'museum_'.length + 6;

export interface ApiKeyInfo {
  id: number;
  name: string;
  prefix: string;
  status: 'active' | 'revoked';
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

interface KeyRow {
  id: number;
  name: string;
  prefix: string;
  hash: Buffer;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
}

const hashKey = (key: string): Buffer => createHash('sha256').update(key).digest();

/** How long a verified key is trusted without a row lookup (if STATE_DB does not change meanwhile). */
const RECENT_MS = 5_000;
const MAX_RECENT = 10_000;
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export class KeyStore {
  private readonly byHash;
  private readonly touch;
  private readonly dataVersion;
  private pendingUse = new Map<number, number>();
  private flushTimer: NodeJS.Timeout | null = null;
  /** base64 SHA-256 of recently verified active keys → key id and when it was verified. */
  private readonly recent = new Map<string, { id: number; at: number }>();
  private recentVersion: number;
  /** The millisecond in which `data_version` was last read. */
  private versionReadAt = 0;

  constructor(private readonly db: StateDb) {
    this.byHash = db.prepare<[Buffer], Pick<KeyRow, 'id' | 'hash' | 'revoked_at'>>('SELECT id, hash, revoked_at FROM api_keys WHERE hash = ?');
    this.dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
    this.recentVersion = this.dataVersion.get()!;
    this.touch = db.prepare<[{ id: number; at: number }]>(
      'UPDATE api_keys SET last_used_at = @at WHERE id = @id AND (last_used_at IS NULL OR last_used_at < @at)',
    );
  }

  create(name: string): { key: string; info: ApiKeyInfo } {
    const clean = name.trim();
    if (!clean || clean.length > 64) throw new Error('key name must be 1 to 64 characters');
    if (/^\d+$/.test(clean)) throw new Error('key name must not be a number (numbers address key ids)');
    const key = `museum_${randomBytes(24).toString('hex')}`;
    try {
      this.db
        .prepare('INSERT INTO api_keys (name, prefix, hash, created_at) VALUES (?, ?, ?, ?)')
        .run(clean, key.slice(0, PREFIX_LENGTH), hashKey(key), Date.now());
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') throw new Error(`a key named "${clean}" already exists`);
      throw err;
    }
    return { key, info: this.find(clean)! };
  }

  /**
   * Issue a fresh key under `name`, revoking (and renaming) any key that had it — how `make run`
   * hands a newcomer a working development key without ever storing a key in clear.
   */
  replace(name: string): { key: string; info: ApiKeyInfo } {
    return this.db.transaction(() => {
      const old = this.find(name);
      if (old) {
        const now = Date.now();
        this.db
          .prepare('UPDATE api_keys SET name = ?, revoked_at = COALESCE(revoked_at, ?) WHERE id = ?')
          .run(`${old.name}#${old.id}`, now, old.id);
        this.recent.clear();
      }
      return this.create(name);
    })();
  }

  list(): ApiKeyInfo[] {
    return this.db.prepare<[], KeyRow>('SELECT * FROM api_keys ORDER BY id').all().map(toInfo);
  }

  /** Find by name or numeric id. */
  find(nameOrId: string): ApiKeyInfo | null {
    const row = /^\d+$/.test(nameOrId)
      ? this.db.prepare<[number], KeyRow>('SELECT * FROM api_keys WHERE id = ?').get(Number(nameOrId))
      : this.db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE name = ?').get(nameOrId);
    return row ? toInfo(row) : null;
  }

  revoke(nameOrId: string): ApiKeyInfo {
    const info = this.find(nameOrId);
    if (!info) throw new Error(`no key named or numbered "${nameOrId}"`);
    this.db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL').run(Date.now(), info.id);
    // Our own writes do not move data_version for this connection.
    this.recent.clear();
    return this.find(String(info.id))!;
  }

  /** The id of the active key matching `presented`, or null. */
  verify(presented: string): number | null {
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
      if (!row || !timingSafeEqual(row.hash, presentedHash) || row.revoked_at !== null) {
        this.recent.delete(digest);
        return null;
      }
      id = row.id;
      if (this.recent.size >= MAX_RECENT) this.recent.clear();
      this.recent.set(digest, { id, at: now });
    }
    this.pendingUse.set(id, now);
    this.flushTimer ??= setTimeout(() => this.flushUse(), 2_000).unref();
    return id;
  }

  /** Write batched last-use times (one transaction instead of one write per request). */
  flushUse(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const pending = this.pendingUse;
    if (pending.size === 0) return;
    this.pendingUse = new Map();
    this.db.transaction(() => {
      for (const [id, at] of pending) this.touch.run({ id, at });
    })();
  }
}

function toInfo(row: KeyRow): ApiKeyInfo {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    status: row.revoked_at === null ? 'active' : 'revoked',
    created_at: iso(row.created_at)!,
    revoked_at: iso(row.revoked_at),
    last_used_at: iso(row.last_used_at),
  };
}
