/**
 * The durable state store: API keys and guide exhibitions, in the SQLite file STATE_DB (the
 * embedded default) or, when DATABASE_URL is set, in PostgreSQL shared by every instance. Both
 * backends implement the same interfaces and pass the same contract tests
 * (test/server/state-store.test.ts).
 */
import type { Logger } from 'pino';
import { checkStateDb, openStateDb } from './db.ts';
import { type ExhibitionStore, SqliteExhibitionStore } from './exhibitions.ts';
import { type KeyStore, SqliteKeyStore } from './keys.ts';

export interface StateStore {
  backend: 'sqlite' | 'postgres';
  keys: KeyStore;
  exhibitions: ExhibitionStore;
  /** Resolves when the store answers a real query on its tables (readiness); rejects otherwise. */
  check(): Promise<void>;
  close(): Promise<void>;
}

export interface StateConfig {
  stateDb: string;
  databaseUrl?: string;
  exhibitionTtlMs: number;
}

const SWEEP_MS = 3_600_000;

/**
 * Open the configured store. `serving`: also listen for key notices (PostgreSQL) and sweep expired
 * exhibitions hourly — what a server does and a one-off CLI command does not.
 */
export async function openStateStore(config: StateConfig, log: Logger, options: { serving?: boolean } = {}): Promise<StateStore> {
  const store = config.databaseUrl
    ? await openPostgres(config.databaseUrl, config.exhibitionTtlMs, log, options.serving ?? false)
    : openSqlite(config);
  if (!options.serving) return store;
  const sweep = () =>
    void store.exhibitions.sweep().then(
      (gone) => gone > 0 && log.info({ exhibitions: gone }, 'expired exhibitions removed (GUIDE_EXHIBITION_TTL_DAYS)'),
      () => {}, // Store down: the next sweep will do it; expired rows already read as absent.
    );
  sweep();
  const timer = setInterval(sweep, SWEEP_MS).unref();
  const close = store.close;
  return {
    ...store,
    close: () => {
      clearInterval(timer);
      return close();
    },
  };
}

function openSqlite(config: StateConfig): StateStore {
  const db = openStateDb(config.stateDb);
  const keys = new SqliteKeyStore(db);
  return {
    backend: 'sqlite',
    keys,
    exhibitions: new SqliteExhibitionStore(db, config.exhibitionTtlMs),
    check: async () => checkStateDb(db),
    close: async () => {
      await keys.flushUse();
      db.close();
    },
  };
}

async function openPostgres(url: string, ttlMs: number, log: Logger, listen: boolean): Promise<StateStore> {
  // pg loads only when PostgreSQL is configured.
  const [{ PgState }, { PgKeyStore }, { PgExhibitionStore }] = await Promise.all([
    import('./pg-db.ts'),
    import('./pg-keys.ts'),
    import('./pg-exhibitions.ts'),
  ]);
  const db = await PgState.open(url, log);
  const keys = new PgKeyStore(db);
  if (listen) await db.listen();
  return {
    backend: 'postgres',
    keys,
    exhibitions: new PgExhibitionStore(db, ttlMs),
    check: () => db.check(),
    close: async () => {
      await keys.flushUse();
      await db.close();
    },
  };
}
