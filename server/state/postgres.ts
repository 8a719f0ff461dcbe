/**
 * The PostgreSQL state store (DATABASE_URL): what STATE_DB holds in SQLite — API keys, guide
 * exhibitions and their owner tokens, registration quotas — shared by every instance.
 *
 * - One bounded pool (10 connections, 1 s to connect, 5 s per statement) and one listening
 *   connection for key notices.
 * - Versioned migrations (server/state/pg-migrations.ts) applied at start inside a session-level
 *   advisory lock, so instances starting together apply each exactly once; on a connection of
 *   their own, ended afterwards, so the lock never outlives them.
 * - Keys: verified keys are answered from memory, so the keyed hot path never waits on the database.
 *   A trigger on `api_keys` NOTIFYs every change of `revoked_at`/`hash` (whoever made it: a server,
 *   the CLI, an operator's psql); each instance LISTENs and forgets that key at once, so a
 *   revocation reaches every instance within milliseconds. A remembered key is re-checked after a
 *   minute while the listener is up; when the listening connection is lost, notices may have been
 *   missed, so everything remembered is forgotten when it is back.
 * - PostgreSQL down (a connect or a query fails for want of a connection): remembered keys keep
 *   working, unknown keys and everything else that must ask the database answer 503 UNAVAILABLE
 *   (never 401, never accepted); the pool and the listener reconnect by themselves; one warning per
 *   outage and one line when it ends. One dropped connection, a statement timeout or a full pool is
 *   no outage: 503 for that statement at most.
 */
import { hash } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { clientBucket } from '../../common/net.ts';
import { HttpError, unavailable } from '../errors.ts';
import { contentHashOf, type ExhibitionDocument, type GuideContext } from '../guide/exhibitions.ts';
import {
  ContextCache,
  type ContextBuilder,
  dayOf,
  EXHIBITION_BOUNDS,
  type ExhibitionStore,
  isExpired,
  needsReadMark,
  planRegistration,
  quotaSpent,
  type StoredExhibition,
} from './exhibitions.ts';
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
import { KEY_CHANNEL, MIGRATIONS } from './pg-migrations.ts';

/** Arbitrary constant naming the migration lock (pg_advisory_lock takes a bigint); exported for tests. */
export const MIGRATION_LOCK = 0x6d757365756d; // "museum"
const POOL_MAX = 10;
const CONNECT_TIMEOUT_MS = 1_000;
const STATEMENT_TIMEOUT_MS = 5_000;
/** After a failure, requests fail fast for this long instead of each waiting on a connect. */
const FAIL_FAST_MS = 500;

/**
 * What a failed call says about the database:
 * - 'outage': it cannot be reached (connect refused/reset/timed out, connection ended, shut down or
 *   starting up): the store fails fast for a moment and remembered keys are trusted meanwhile.
 * - 'statement': this one statement did not complete (statement timeout or cancel, no pooled
 *   connection free in time, an idle session ended): 503 for it, the store stays up.
 * - null: an answer from the database (constraint, syntax…) or our own error.
 */
type Failure = 'outage' | 'statement' | null;
/** Connection failures among SQLSTATE class 57: admin_shutdown, crash_shutdown, cannot_connect_now. */
const OUTAGE_57 = new Set(['57P01', '57P02', '57P03']);

function failureOf(err: unknown): Failure {
  if (!(err instanceof Error) || err instanceof HttpError) return null;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
    // Class 08 (connection exception), 53300 too many connections: no session to be had.
    if (code.startsWith('08') || OUTAGE_57.has(code) || code === '53300') return 'outage';
    // The rest of class 57 (57014 statement timeout/cancel, 57P05 idle session timeout…).
    return code.startsWith('57') ? 'statement' : null;
  }
  // Socket errors (ECONNREFUSED, ECONNRESET, ETIMEDOUT, ENOTFOUND…).
  if (typeof code === 'string' && code.startsWith('E')) return 'outage';
  // The driver's own: the pool's wait for a free connection and the client-side statement timeout
  // say nothing about reachability; a connection that ended or could not be made does.
  if (/timeout exceeded when trying to connect|Query read timeout/i.test(err.message)) return 'statement';
  if (/connection|terminated|not queryable|timeout expired/i.test(err.message)) return 'outage';
  return null;
}

/** Up or down, said once per change rather than once per request. */
class Outage {
  down = false;
  failedAt = 0;
  constructor(private readonly log: Logger) {}
  failed(err: unknown): void {
    this.failedAt = Date.now();
    if (this.down) return;
    this.down = true;
    this.log.warn({ err: (err as Error)?.message }, 'PostgreSQL (DATABASE_URL) is unreachable; known API keys keep working, the rest answers 503 until it is back');
  }
  ok(): void {
    if (!this.down) return;
    this.down = false;
    this.log.info('PostgreSQL (DATABASE_URL) is reachable again');
  }
}

/**
 * Apply pending migrations on a connection of their own, never a pooled one: the session-level
 * advisory lock lives as long as the session, so ending this client (finally) means the lock cannot
 * outlive the migration, whatever failed. No client-side statement timeout: a migration takes what
 * it takes; the wait for the lock is bounded by the server, at the start deadline.
 */
async function migrate(url: string, deadline: number, waitMs: number): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true, application_name: 'museum-migrate' });
  // A dropped connection fails the pending query; the event itself must not crash the process.
  client.on('error', () => {});
  try {
    await client.connect();
    await takeMigrationLock(client, deadline, waitMs);
    await applyMigrations(client);
  } finally {
    // Releases the advisory lock with the session.
    await client.end().catch(() => {});
  }
}

/** Wait for the migration lock until the start deadline, then give up with a clear error. */
async function takeMigrationLock(client: pg.Client, deadline: number, waitMs: number): Promise<void> {
  // lock_timeout makes the server drop the lock request when it expires (a client-side timeout
  // would leave it queued, to be granted later on a connection nobody watches). 0 would mean never.
  await client.query("SELECT set_config('lock_timeout', $1, false)", [`${Math.max(1, deadline - Date.now())}ms`]);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
  } catch (err) {
    if ((err as { code?: string }).code !== '55P03') throw err;
    throw new Error(`the migration lock (pg_advisory_lock ${MIGRATION_LOCK}) was held by another session for the whole start wait (${waitMs} ms); is a migration stuck?`);
  }
  // The migrations' own statements wait as the database is configured to.
  await client.query('RESET lock_timeout');
}

async function applyMigrations(client: pg.Client): Promise<void> {
  await client.query('CREATE TABLE IF NOT EXISTS museum_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())');
  const { rows } = await client.query<{ version: number }>('SELECT version FROM museum_migrations');
  const applied = new Set(rows.map((r) => r.version));
  for (const m of MIGRATIONS) {
    if (applied.has(m.version)) continue;
    await client.query('BEGIN');
    try {
      await client.query(m.sql);
      await client.query('INSERT INTO museum_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  }
}

export class PgState {
  readonly pool: pg.Pool;
  readonly outage: Outage;
  private listener: pg.Client | null = null;
  private listenerLive = false;
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly noticeHandlers: Array<(payload: string) => void> = [];
  private readonly liveHandlers: Array<() => void> = [];

  private constructor(
    private readonly url: string,
    private readonly log: Logger,
  ) {
    this.outage = new Outage(log);
    this.pool = new pg.Pool({
      connectionString: url,
      max: POOL_MAX,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      idleTimeoutMillis: 30_000,
      query_timeout: STATEMENT_TIMEOUT_MS,
      keepAlive: true,
      application_name: 'museum',
    });
    // An idle connection dropped (pg_terminate_backend, idle_session_timeout, a proxy closing idle
    // connections) must not crash the process, and is no outage: the pool has already discarded it
    // and the next query opens a new one; a query that cannot is what counts as an outage.
    this.pool.on('error', (err) => this.log.info({ err: err.message }, 'PostgreSQL (DATABASE_URL) closed an idle pooled connection'));
  }

  /** Connect (retrying for up to `waitMs`: instances may start before the database) and migrate. */
  static async open(url: string, log: Logger, waitMs = 10_000): Promise<PgState> {
    const state = new PgState(url, log);
    const deadline = Date.now() + waitMs;
    for (;;) {
      try {
        await migrate(url, deadline, waitMs);
        break;
      } catch (err) {
        if (failureOf(err) !== 'outage' || Date.now() > deadline) {
          await state.pool.end().catch(() => {});
          throw new Error(`DATABASE_URL: ${(err as Error).message || 'cannot connect'}`);
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    return state;
  }

  /** Run one statement; a database that cannot be reached becomes 503 UNAVAILABLE. */
  async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    this.failFast();
    try {
      const result = await this.pool.query<R>(sql, params);
      this.outage.ok();
      return result;
    } catch (err) {
      throw this.mapError(err);
    }
  }

  /** Run `fn` in one transaction on one pooled connection. */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    this.failFast();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.mapError(err);
    }
    let broken: unknown;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      this.outage.ok();
      return result;
    } catch (err) {
      // A connection that failed, or still runs a statement the client gave up on, is not reused.
      if (failureOf(err)) broken = err;
      else await client.query('ROLLBACK').catch((e: unknown) => (broken = e));
      throw this.mapError(err);
    } finally {
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  private failFast(): void {
    if (this.closed) throw unavailable('state store');
    if (this.outage.down && Date.now() - this.outage.failedAt < FAIL_FAST_MS) throw unavailable('state store');
  }

  /** Both kinds of failure answer 503; only an unreachable database switches the store to fail-fast. */
  private mapError(err: unknown): unknown {
    const failure = failureOf(err);
    if (!failure) return err;
    if (failure === 'outage') this.outage.failed(err);
    return unavailable('state store');
  }

  /** Readiness: one round trip that reads every table through its index (not `SELECT 1`, which reads none). */
  async check(): Promise<void> {
    await this.query(
      `SELECT (SELECT id FROM api_keys WHERE hash = '\\x00'::bytea) AS key_lookup, (SELECT read_at FROM exhibitions WHERE id = '') AS exhibition_lookup,
              (SELECT count FROM exhibition_registrations WHERE ip = '' AND day = 0) AS registrations`,
    );
  }

  // -------------------------------------------------------------------------------------------
  // The listening connection (LISTEN museum_api_keys)

  get listening(): boolean {
    return this.listenerLive;
  }

  onNotice(handler: (payload: string) => void): void {
    this.noticeHandlers.push(handler);
  }

  /** Called each time the listener (re)connects: notices sent meanwhile may have been missed. */
  onListening(handler: () => void): void {
    this.liveHandlers.push(handler);
  }

  /** Start listening; resolves after the first attempt, connected or not (it keeps retrying). */
  async listen(): Promise<void> {
    await this.connectListener(0);
  }

  private async connectListener(attempt: number): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true, keepAliveInitialDelayMillis: 5_000, application_name: 'museum-listener' });
    let lost = false;
    const onLost = (err?: unknown) => {
      if (lost) return;
      lost = true;
      const wasLive = this.listener === client;
      this.listenerLive = false;
      if (wasLive) this.listener = null;
      client.removeAllListeners('notification');
      void client.end().catch(() => {});
      if (this.closed) return;
      // Not an outage by itself (one dropped connection; queries tell whether the database is
      // reachable). Until it is back remembered keys are checked again, then forgotten (onListening).
      if (wasLive) this.log.warn({ err: (err as Error | undefined)?.message }, 'PostgreSQL (DATABASE_URL) key notices lost with the listening connection; reconnecting');
      this.retryTimer = setTimeout(() => void this.connectListener(attempt + 1), Math.min(100 * 2 ** attempt, 2_000));
      this.retryTimer.unref();
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (n) => {
      for (const handler of this.noticeHandlers) handler(n.payload ?? '');
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${KEY_CHANNEL}`);
    } catch (err) {
      onLost(err);
      return;
    }
    if (this.closed) {
      void client.end().catch(() => {});
      return;
    }
    this.listener = client;
    this.listenerLive = true;
    attempt = 0;
    this.outage.ok();
    for (const handler of this.liveHandlers) handler();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const listener = this.listener;
    this.listener = null;
    this.listenerLive = false;
    await Promise.all([listener?.end().catch(() => {}), this.pool.end().catch(() => {})]);
  }
}

const num = (v: string | number | null): number | null => (v === null ? null : Number(v));
const keyRowOf = (r: KeyRow): KeyRow => ({ ...r, id: Number(r.id), created_at: Number(r.created_at), revoked_at: num(r.revoked_at), last_used_at: num(r.last_used_at) });

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
        'UPDATE api_keys SET last_used_at = GREATEST(COALESCE(api_keys.last_used_at, 0), u.at) FROM unnest($1::bigint[], $2::bigint[]) AS u(id, at) WHERE api_keys.id = u.id',
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
      await this.db.query('INSERT INTO api_keys (name, prefix, hash, created_at) SELECT n, p, h, $4 FROM unnest($1::text[], $2::text[], $3::bytea[]) AS k(n, p, h)', [
        clean,
        keys.map((k) => k.slice(0, PREFIX_LENGTH)),
        keys.map(hashKey),
        now,
      ]);
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
        await c.query('UPDATE api_keys SET name = $1, revoked_at = COALESCE(revoked_at, $2) WHERE id = $3', [`${old.name}#${old.id}`, Date.now(), old.id]);
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

  verify(presented: string): number | null | Promise<number | null> {
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
      this.db.query<KeyHashRow>('SELECT id, hash, revoked_at FROM api_keys WHERE hash = ANY($1::bytea[])', [chunk.map((d) => Buffer.from(d, 'base64'))]).then(
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

const COLUMNS = 'content_hash, owner_token_hash, context, registered_at, updated_at, read_at';
const exhibitionOf = (r: StoredExhibition): StoredExhibition => ({
  ...r,
  registered_at: Number(r.registered_at),
  updated_at: Number(r.updated_at),
  read_at: Number(r.read_at),
});

export class PgExhibitionStore implements ExhibitionStore {
  private readonly cache = new ContextCache();

  constructor(
    private readonly db: PgState,
    private readonly ttlMs: number,
  ) {}

  async get(id: string, now = Date.now()): Promise<{ context: GuideContext; contentHash: string } | null> {
    const cachedStamp = this.cache.stampOf(id);
    let rows: Array<{ updated_at: string; read_at: string; content_hash: string; context: string | null }>;
    try {
      // One round trip: the context travels only when the cached one is not current.
      ({ rows } = await this.db.query<(typeof rows)[number]>('SELECT updated_at, read_at, content_hash, CASE WHEN updated_at = $2 THEN NULL ELSE context END AS context FROM exhibitions WHERE id = $1', [
        id,
        cachedStamp ?? -1,
      ]));
    } catch (err) {
      // Database down: an exhibition this instance has read keeps being guided.
      const stale = cachedStamp === undefined ? null : this.cache.hit(id, cachedStamp);
      if (stale) return stale;
      throw err;
    }
    const row = rows[0];
    const stamp = row ? { updated_at: Number(row.updated_at), read_at: Number(row.read_at) } : null;
    if (!row || !stamp || isExpired(stamp, this.ttlMs, now)) {
      this.cache.drop(id);
      return null;
    }
    // At most once a day per exhibition; awaited so the read is on record before it is answered.
    if (needsReadMark(stamp, now)) await this.db.query('UPDATE exhibitions SET read_at = $1 WHERE id = $2', [now, id]).catch(() => {});
    if (row.context === null) {
      const cached = this.cache.hit(id, stamp.updated_at);
      if (cached) return cached;
      // Evicted meanwhile: read it whole.
      return this.get(id, now);
    }
    return this.cache.remember(id, { updated_at: stamp.updated_at, context: row.context, content_hash: row.content_hash });
  }

  async register(doc: ExhibitionDocument, presentedToken: string | undefined, build: ContextBuilder, origin: { ip: string; now?: number }) {
    const now = origin.now ?? Date.now();
    const contentHash = contentHashOf(doc);
    const plan = await this.db.transaction(async (c) => {
      // One registration of an id at a time across every instance (the row may not exist yet).
      await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`exhibition:${doc.id}`]);
      const { rows } = await c.query<StoredExhibition>(`SELECT ${COLUMNS} FROM exhibitions WHERE id = $1`, [doc.id]);
      let row = rows[0] ? exhibitionOf(rows[0]) : null;
      if (row && isExpired(row, this.ttlMs, now)) {
        await c.query('DELETE FROM exhibitions WHERE id = $1', [doc.id]);
        row = null;
      }
      const plan = planRegistration(row, doc, contentHash, presentedToken, build, now);
      if (plan.outcome === 'unchanged') {
        await c.query('UPDATE exhibitions SET context = $1, updated_at = $2 WHERE id = $3', [plan.json, plan.stamp, doc.id]);
        return plan;
      }
      const { rows: quota } = await c.query<{ count: number }>(
        'INSERT INTO exhibition_registrations (ip, day, count) VALUES ($1, $2, 1) ON CONFLICT (ip, day) DO UPDATE SET count = exhibition_registrations.count + 1 RETURNING count',
        [clientBucket(origin.ip), dayOf(now)], // an IPv6 client counts by its /64
      );
      // Thrown inside the transaction: the count rolls back with it.
      if (quota[0]!.count > EXHIBITION_BOUNDS.registrationsPerDay) throw quotaSpent(now);
      if (plan.outcome === 'created') {
        await c.query(`INSERT INTO exhibitions (${COLUMNS}, id) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
          contentHash,
          plan.ownerTokenHash,
          plan.json,
          plan.registeredAt,
          plan.stamp,
          now,
          doc.id,
        ]);
      } else {
        await c.query('UPDATE exhibitions SET content_hash = $1, context = $2, updated_at = $3 WHERE id = $4', [contentHash, plan.json, plan.stamp, doc.id]);
      }
      return plan;
    });
    this.cache.drop(doc.id);
    return { outcome: plan.outcome, ownerToken: plan.ownerToken, context: plan.context, contentHash };
  }

  async setStarters(id: string, contentHash: string, starters: string[], now = Date.now()) {
    const stored = await this.db.transaction(async (c) => {
      const { rows } = await c.query<StoredExhibition>(`SELECT ${COLUMNS} FROM exhibitions WHERE id = $1 FOR UPDATE`, [id]);
      const row = rows[0] ? exhibitionOf(rows[0]) : null;
      if (!row || row.content_hash !== contentHash) return false;
      const stamp = Math.max(now, row.updated_at + 1);
      const context = { ...(JSON.parse(row.context) as GuideContext), starters, updatedAt: new Date(stamp).toISOString() };
      await c.query('UPDATE exhibitions SET context = $1, updated_at = $2 WHERE id = $3', [JSON.stringify(context), stamp, id]);
      return true;
    });
    this.cache.drop(id);
    return stored;
  }

  async sweep(now = Date.now()) {
    const { rowCount } = await this.db.query('DELETE FROM exhibitions WHERE GREATEST(updated_at, read_at) < $1', [now - this.ttlMs]);
    await this.db.query('DELETE FROM exhibition_registrations WHERE day < $1', [dayOf(now) - 1]);
    return rowCount ?? 0;
  }
}
