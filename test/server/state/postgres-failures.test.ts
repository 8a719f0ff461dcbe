/**
 * The PostgreSQL state store against failures short of an outage, on a real PostgreSQL server
 * started for the test, orchestrated from another session (a held lock, a terminated or cancelled
 * backend, connections refused):
 * - the migration lock: a long wait for it leaves nothing held, and the wait ends at the start
 *   deadline with a clear error;
 * - one dropped connection (idle pooled, or the listener), a cancelled statement or a full pool
 *   is no outage: the store keeps answering (503 for the failed statement at most).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HttpError } from '../../../server/errors.ts';
import { MIGRATION_LOCK, PgState } from '../../../server/state/pg-db.ts';
import { PgKeyStore } from '../../../server/state/pg-keys.ts';
import { capturedLogger } from '../../helpers/logs.ts';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.ts';

let postgres: TestPostgres;
let admin: pg.Client;
let databases = 0;

beforeAll(async () => {
  postgres = await startPostgres();
  admin = new pg.Client(postgres.url);
  await admin.connect();
}, 60_000);
afterAll(async () => {
  await admin?.end();
  await postgres?.close();
});

/** A fresh database, so each test sees only its own sessions and locks. */
async function freshDatabase(): Promise<{ name: string; url: string }> {
  const name = `failures_${++databases}`;
  await admin.query(`CREATE DATABASE ${name}`);
  return { name, url: postgres.url.replace(/\/museum$/, `/${name}`) };
}

async function session(url: string): Promise<pg.Client> {
  const client = new pg.Client(url);
  await client.connect();
  return client;
}

/** Wait (no time limit of its own: the test's timeout is the bound) until `check` holds. */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await check())) await sleep(20);
}

/** The store's backends in `database` waiting on a lock. */
async function waitingOnLock(database: string): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'museum%' AND wait_event_type = 'Lock'",
    [database],
  );
  return rows[0]!.n;
}

const unreachableWarnings = (logs: ReturnType<typeof capturedLogger>) =>
  logs.lines.filter((l) => /PostgreSQL.*unreachable/.test(String(l.msg)));

describe('the migration lock', () => {
  it('waited for longer than the statement timeout, it is not left held: the next instance starts', async () => {
    const { name, url } = await freshDatabase();
    const holder = await session(url);
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    const opening = PgState.open(url, capturedLogger().log);
    await until(async () => (await waitingOnLock(name)) === 1);
    // Held past the pool's 5 s statement timeout, as by an instance running a long migration.
    await sleep(6_000);
    await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    const a = await opening;
    let b: PgState | undefined;
    try {
      const { rows } = await admin.query(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = $1)",
        [name],
      );
      expect(rows).toEqual([]);
      b = await PgState.open(url, capturedLogger().log, 2_000);
      await b.check();
    } finally {
      await holder.end();
      await a.close();
      await b?.close();
    }
  }, 30_000);

  it('held for the whole start wait, it fails the start with a clear error and leaves no session waiting', async () => {
    const { name, url } = await freshDatabase();
    const holder = await session(url);
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      await expect(PgState.open(url, capturedLogger().log, 1_000)).rejects.toThrow(
        /^DATABASE_URL: the migration lock .* was held by another session for the whole start wait \(1000 ms\)/,
      );
      const { rows } = await admin.query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'museum%'", [name]);
      expect(rows).toEqual([]);
    } finally {
      await holder.end();
    }
  }, 30_000);
});

describe('failures that are no outage', () => {
  let databaseName: string;
  let db: PgState;
  let keys: PgKeyStore;
  let logs: ReturnType<typeof capturedLogger>;
  let locker: pg.Client;

  // A store of its own per test: what one test breaks cannot show in the next.
  beforeEach(async () => {
    const fresh = await freshDatabase();
    databaseName = fresh.name;
    logs = capturedLogger('info');
    db = await PgState.open(fresh.url, logs.log);
    keys = new PgKeyStore(db);
    await db.listen();
    locker = await session(fresh.url);
  });
  afterEach(async () => {
    await locker?.end();
    await db?.close();
  });

  it('idle pooled connections terminated: the store keeps answering, unknown keys included', async () => {
    const { key, info } = await keys.create('idle-dropped');
    await Promise.all([db.check(), db.check(), db.check()]);
    expect(db.pool.idleCount).toBeGreaterThan(0);
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'museum'", [
      databaseName,
    ]);
    // The pool has seen every one go (its 'error' on an idle client).
    await until(() => db.pool.totalCount === 0);
    await db.check();
    expect(await keys.verify(key)).toBe(info.id);
    expect(unreachableWarnings(logs)).toEqual([]);
  });

  it('the listening connection lost (and kept from coming back): the store keeps answering', async () => {
    const { key, info } = await keys.create('listener-dropped');
    await db.check();
    expect(db.listening).toBe(true);
    // New connections refused from here on: only the pooled connections that are open work.
    await admin.query(`ALTER DATABASE ${databaseName} ALLOW_CONNECTIONS false`);
    try {
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'museum-listener'",
        [databaseName],
      );
      await until(() => !db.listening);
      await db.check();
      expect(await keys.verify(key)).toBe(info.id);
      expect(logs.lines.some((l) => /key notices lost/.test(String(l.msg)))).toBe(true);
      expect(unreachableWarnings(logs)).toEqual([]);
    } finally {
      await admin.query(`ALTER DATABASE ${databaseName} ALLOW_CONNECTIONS true`);
    }
    await until(() => db.listening);
  });

  it('a statement cancelled (57014, as by statement_timeout) answers 503 for itself only', async () => {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE');
    // Settled into a value at once: it fails while the test is still waiting on the admin session.
    const blocked = keys.list().then(
      () => null,
      (err: unknown) => err,
    );
    await until(async () => (await waitingOnLock(databaseName)) === 1);
    await admin.query(
      "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'museum' AND wait_event_type = 'Lock'",
      [databaseName],
    );
    expect(await blocked).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    await locker.query('ROLLBACK');
    await db.check();
    expect(await keys.list()).toEqual([]);
    expect(unreachableWarnings(logs)).toEqual([]);
  });

  it('no pooled connection free in time answers 503 for that statement only', async () => {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE');
    // Every pooled connection (10) busy behind the lock.
    const busy = Array.from({ length: 10 }, () => keys.list());
    await until(async () => (await waitingOnLock(databaseName)) === 10);
    const waited = await db.check().then(
      () => null,
      (err: unknown) => err,
    );
    expect(waited).toBeInstanceOf(HttpError);
    expect(waited).toMatchObject({ status: 503, code: 'UNAVAILABLE' });
    // Asked while the pool is still full: it waits for a connection rather than failing fast.
    const next = db.check();
    await locker.query('ROLLBACK');
    await next;
    await Promise.all(busy);
    expect(unreachableWarnings(logs)).toEqual([]);
  });
});
