/**
 * Guide exhibitions in the state store: the interface both backends implement, the rules they share
 * (ownership, size, daily quota, expiry) and the SQLite store. The PostgreSQL store is in pg-exhibitions.ts.
 *
 * Ownership: the first registration of an id returns an owner token (shown once, stored as its
 * SHA-256). Re-sending identical content needs no token (it refreshes the enrichment); different
 * content needs `X-Exhibition-Token`, else 409 CONFLICT — 401 is reserved for API keys.
 *
 * Bounds (decisions.md "Guide"; issue 11 item 7): a stored context is at most 512 KB (413
 * otherwise, nothing stored); one client IP may create or change at most 50 exhibitions per UTC day
 * (429, identical re-sends are free); an exhibition nobody has read or changed for
 * GUIDE_EXHIBITION_TTL_DAYS is gone (read as absent at once, deleted by an hourly sweep). A read
 * records itself at most once a day per exhibition, so reads stay reads.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { clientBucket } from '../../common/net.ts';
import { HttpError } from '../errors.ts';
import { contentHashOf, type ExhibitionDocument, type GuideContext } from '../guide/exhibitions.ts';
import { sha256Hex } from '../guide/text.ts';
import type { StateDb } from './db.ts';

export const EXHIBITION_BOUNDS = {
  /** Largest stored context (serialized JSON, bytes). */
  storedBytes: 512 * 1024,
  /** Registrations that create or change an exhibition, per client IP per UTC day. */
  registrationsPerDay: 50,
  /** How often a read is written down (an exhibition read daily never expires). */
  readMarkMs: 86_400_000,
} as const;
export const DAY_MS = 86_400_000;

type RegisterOutcome = 'created' | 'updated' | 'unchanged';
export type ContextBuilder = (times: { registeredAt: string; updatedAt: string }, starters: string[]) => GuideContext;
interface Registered {
  outcome: RegisterOutcome;
  ownerToken?: string;
  context: GuideContext;
  contentHash: string;
}

export interface ExhibitionStore {
  get(id: string, now?: number): Promise<{ context: GuideContext; contentHash: string } | null>;
  /**
   * Register or refresh. `build(times, starters)` makes the context to store (starters kept when
   * the content is unchanged). Throws 409 (content differs, token missing or wrong), 413 (context
   * too large), 429 (this IP's daily registrations spent).
   */
  register(
    doc: ExhibitionDocument,
    presentedToken: string | undefined,
    build: ContextBuilder,
    origin: { ip: string; now?: number },
  ): Promise<Registered>;
  /** Store generated starters, unless the content changed meanwhile. Returns whether they were stored. */
  setStarters(id: string, contentHash: string, starters: string[], now?: number): Promise<boolean>;
  /** Delete expired exhibitions and old quota rows; returns how many exhibitions went. */
  sweep(now?: number): Promise<number>;
}

/** A stored exhibition row (times in ms). */
export interface StoredExhibition {
  content_hash: string;
  owner_token_hash: Buffer;
  context: string;
  registered_at: number;
  updated_at: number;
  read_at: number;
}

const hashToken = (token: string): Buffer => Buffer.from(sha256Hex(token), 'hex');
const newOwnerToken = (): string => `exh_${randomBytes(24).toString('hex')}`;
export const isExpired = (row: { updated_at: number; read_at: number }, ttlMs: number, now: number): boolean =>
  Math.max(Number(row.updated_at), Number(row.read_at)) < now - ttlMs;
export const needsReadMark = (row: { updated_at: number; read_at: number }, now: number): boolean =>
  now - Math.max(Number(row.updated_at), Number(row.read_at)) > EXHIBITION_BOUNDS.readMarkMs;

/** What a registration writes, decided from the live row it finds (or none). */
export interface RegistrationPlan {
  outcome: RegisterOutcome;
  ownerToken?: string;
  ownerTokenHash: Buffer;
  context: GuideContext;
  json: string;
  registeredAt: number;
  stamp: number;
}

export function planRegistration(
  row: StoredExhibition | null,
  _doc: ExhibitionDocument,
  contentHash: string,
  presentedToken: string | undefined,
  build: ContextBuilder,
  now: number,
): RegistrationPlan {
  // Timestamps only move forward, so a cache stamp always changes with the row.
  const stamp = Math.max(now, (row ? Number(row.updated_at) : 0) + 1);
  let plan: Omit<RegistrationPlan, 'json'>;
  if (!row) {
    const ownerToken = newOwnerToken();
    const context = build({ registeredAt: new Date(now).toISOString(), updatedAt: new Date(stamp).toISOString() }, []);
    plan = { outcome: 'created', ownerToken, ownerTokenHash: hashToken(ownerToken), context, registeredAt: now, stamp };
  } else {
    const unchanged = row.content_hash === contentHash;
    if (!unchanged) {
      if (presentedToken === undefined) {
        throw new HttpError(
          409,
          'CONFLICT',
          'This exhibition id is registered with different content; send its owner token in X-Exhibition-Token to change it',
        );
      }
      const presented = hashToken(presentedToken);
      if (presented.length !== row.owner_token_hash.length || !timingSafeEqual(presented, row.owner_token_hash)) {
        throw new HttpError(409, 'CONFLICT', 'X-Exhibition-Token does not match the owner token of this exhibition');
      }
    }
    const previous = JSON.parse(row.context) as GuideContext;
    const registeredAt = Number(row.registered_at);
    // Unchanged content keeps its starters; changed content gets new ones (asynchronously).
    const context = build(
      { registeredAt: new Date(registeredAt).toISOString(), updatedAt: new Date(stamp).toISOString() },
      unchanged ? previous.starters : [],
    );
    plan = { outcome: unchanged ? 'unchanged' : 'updated', ownerTokenHash: row.owner_token_hash, context, registeredAt, stamp };
  }
  const json = JSON.stringify(plan.context);
  const bytes = Buffer.byteLength(json);
  if (bytes > EXHIBITION_BOUNDS.storedBytes) {
    throw new HttpError(
      413,
      'PAYLOAD_TOO_LARGE',
      `This exhibition's guide context would take ${Math.ceil(bytes / 1024)} KB; at most ${EXHIBITION_BOUNDS.storedBytes / 1024} KB is ` +
        `stored`,
    );
  }
  return { ...plan, json };
}

/** 429 for an IP whose registrations of the day are spent; says when the next day starts. */
export function quotaSpent(now: number): HttpError {
  const retryAfter = Math.max(1, Math.ceil((DAY_MS - (now % DAY_MS)) / 1000));
  return new HttpError(
    429,
    'RATE_LIMITED',
    `At most ${EXHIBITION_BOUNDS.registrationsPerDay} exhibitions may be registered or changed per client address per day`,
    { 'Retry-After': String(retryAfter) },
  );
}

export const dayOf = (now: number): number => Math.floor(now / DAY_MS);

/**
 * Parsed contexts by id, checked against `updated_at` (so instances sharing a store never serve a
 * stale context); bounded by entries and by serialized size.
 */
export class ContextCache {
  private readonly entries: LRUCache<string, CachedContext>;

  constructor(
    maxEntries = 256,
    private readonly maxBytes = 32 * 1024 * 1024,
  ) {
    this.entries = new LRUCache({ max: maxEntries, maxSize: maxBytes, sizeCalculation: (entry) => Math.max(1, entry.bytes) });
  }

  /** The `updated_at` of the cached context of `id`, if any. */
  stampOf(id: string): number | undefined {
    return this.entries.peek(id)?.updatedAt;
  }

  hit(id: string, updatedAt: number): { context: GuideContext; contentHash: string } | null {
    const cached = this.entries.get(id);
    return cached && cached.updatedAt === updatedAt ? cached : null;
  }

  remember(id: string, row: { updated_at: number; context: string; content_hash: string }): { context: GuideContext; contentHash: string } {
    const context = JSON.parse(row.context) as GuideContext;
    const entry = { updatedAt: Number(row.updated_at), context, contentHash: row.content_hash, bytes: row.context.length };
    // A context larger than a quarter of the budget is answered, not kept.
    if (entry.bytes <= this.maxBytes / 4) this.entries.set(id, entry);
    else this.entries.delete(id);
    return entry;
  }

  drop(id: string): void {
    this.entries.delete(id);
  }
}

interface CachedContext {
  updatedAt: number;
  context: GuideContext;
  contentHash: string;
  /** Serialized size (UTF-16 code units of the stored JSON). */
  bytes: number;
}

const COLUMNS = 'content_hash, owner_token_hash, context, registered_at, updated_at, read_at';

export class SqliteExhibitionStore implements ExhibitionStore {
  private readonly cache = new ContextCache();
  private readonly stampQuery;
  private readonly rowQuery;
  private readonly markRead;

  constructor(
    private readonly db: StateDb,
    private readonly ttlMs: number,
  ) {
    this.stampQuery = db.prepare<[string], { updated_at: number; read_at: number }>(
      'SELECT updated_at, read_at FROM exhibitions WHERE id = ?',
    );
    this.rowQuery = db.prepare<[string], StoredExhibition>(`SELECT ${COLUMNS} FROM exhibitions WHERE id = ?`);
    this.markRead = db.prepare<[number, string]>('UPDATE exhibitions SET read_at = ? WHERE id = ?');
  }

  async get(id: string, now = Date.now()) {
    const stamp = this.stampQuery.get(id);
    if (!stamp || isExpired(stamp, this.ttlMs, now)) {
      this.cache.drop(id);
      return null;
    }
    if (needsReadMark(stamp, now)) this.markRead.run(now, id);
    const cached = this.cache.hit(id, stamp.updated_at);
    if (cached) return cached;
    const row = this.rowQuery.get(id);
    return row ? this.cache.remember(id, row) : null;
  }

  async register(doc: ExhibitionDocument, presentedToken: string | undefined, build: ContextBuilder, origin: { ip: string; now?: number }) {
    const now = origin.now ?? Date.now();
    const contentHash = contentHashOf(doc);
    const run = this.db.transaction(() => {
      let row = this.rowQuery.get(doc.id) ?? null;
      if (row && isExpired(row, this.ttlMs, now)) {
        this.db.prepare('DELETE FROM exhibitions WHERE id = ?').run(doc.id);
        row = null;
      }
      const plan = planRegistration(row, doc, contentHash, presentedToken, build, now);
      if (plan.outcome === 'unchanged') {
        this.db.prepare('UPDATE exhibitions SET context = ?, updated_at = ? WHERE id = ?').run(plan.json, plan.stamp, doc.id);
        return plan;
      }
      const day = dayOf(now);
      const client = clientBucket(origin.ip); // an IPv6 client counts by its /64
      const used = this.db
        .prepare<[string, number], { count: number }>('SELECT count FROM exhibition_registrations WHERE ip = ? AND day = ?')
        .get(client, day);
      if ((used?.count ?? 0) >= EXHIBITION_BOUNDS.registrationsPerDay) throw quotaSpent(now);
      this.db
        .prepare(
          'INSERT INTO exhibition_registrations (ip, day, count) VALUES (?, ?, 1) ON CONFLICT (ip, day) DO UPDATE SET count = count + 1',
        )
        .run(client, day);
      if (plan.outcome === 'created') {
        this.db
          .prepare(`INSERT INTO exhibitions (${COLUMNS}, id) VALUES (?, ?, ?, ?, ?, ?, ?)`)
          .run(contentHash, plan.ownerTokenHash, plan.json, plan.registeredAt, plan.stamp, now, doc.id);
      } else {
        this.db
          .prepare('UPDATE exhibitions SET content_hash = ?, context = ?, updated_at = ? WHERE id = ?')
          .run(contentHash, plan.json, plan.stamp, doc.id);
      }
      return plan;
    });
    const plan = run.immediate();
    this.cache.drop(doc.id);
    return { outcome: plan.outcome, ownerToken: plan.ownerToken, context: plan.context, contentHash };
  }

  async setStarters(id: string, contentHash: string, starters: string[], now = Date.now()) {
    const run = this.db.transaction(() => {
      const row = this.rowQuery.get(id);
      if (!row || row.content_hash !== contentHash) return false;
      const stamp = Math.max(now, row.updated_at + 1);
      const context = { ...(JSON.parse(row.context) as GuideContext), starters, updatedAt: new Date(stamp).toISOString() };
      this.db.prepare('UPDATE exhibitions SET context = ?, updated_at = ? WHERE id = ?').run(JSON.stringify(context), stamp, id);
      return true;
    });
    const stored = run.immediate();
    this.cache.drop(id);
    return stored;
  }

  async sweep(now = Date.now()) {
    const gone = this.db.prepare('DELETE FROM exhibitions WHERE MAX(updated_at, read_at) < ?').run(now - this.ttlMs).changes;
    this.db.prepare('DELETE FROM exhibition_registrations WHERE day < ?').run(dayOf(now) - 1);
    return gone;
  }
}
