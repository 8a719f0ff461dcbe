/**
 * The PostgreSQL state store's connection (DATABASE_URL): what STATE_DB holds in SQLite — API keys,
 * guide exhibitions and their owner tokens, registration quotas — shared by every instance. The
 * stores on top: pg-keys.ts and pg-exhibitions.ts (as keys.ts and exhibitions.ts over db.ts for SQLite).
 *
 * - One bounded pool (10 connections, 1 s to connect, 5 s per statement) and one listening
 *   connection for key notices.
 * - Versioned migrations (server/state/pg-migrations.ts) applied at start inside a session-level
 *   advisory lock, so instances starting together apply each exactly once; on a connection of
 *   their own, ended afterwards, so the lock never outlives them.
 * - PostgreSQL down (a connect or a query fails for want of a connection): remembered keys keep
 *   working, unknown keys and everything else that must ask the database answer 503 UNAVAILABLE
 *   (never 401, never accepted); the pool and the listener reconnect by themselves; one warning per
 *   outage and one line when it ends. One dropped connection, a statement timeout or a full pool is
 *   no outage: 503 for that statement at most.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Logger } from 'pino';
import { HttpError, unavailable } from '../errors.ts';
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
    this.log.warn(
      { err: (err as Error)?.message },
      'PostgreSQL (DATABASE_URL) is unreachable; known API keys keep working, the rest answers 503 until it is back',
    );
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
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    application_name: 'museum-migrate',
  });
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
    throw new Error(
      `the migration lock (pg_advisory_lock ${MIGRATION_LOCK}) was held by another session for the whole start wait (${waitMs} ms); is ` +
        `a migration stuck?`,
    );
  }
  // The migrations' own statements wait as the database is configured to.
  await client.query('RESET lock_timeout');
}

async function applyMigrations(client: pg.Client): Promise<void> {
  await client.query(
    'CREATE TABLE IF NOT EXISTS museum_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL ' +
      'DEFAULT now())',
  );
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
        await sleep(250);
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
      `SELECT (SELECT id FROM api_keys WHERE hash = '\\x00'::bytea) AS key_lookup, ` +
        `(SELECT read_at FROM exhibitions WHERE id = '') AS exhibition_lookup,
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
    const client = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: 5_000,
      application_name: 'museum-listener',
    });
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
      if (wasLive)
        this.log.warn(
          { err: (err as Error | undefined)?.message },
          'PostgreSQL (DATABASE_URL) key notices lost with the listening connection; reconnecting',
        );
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
