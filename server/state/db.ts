/**
 * The SQLite state store (STATE_DB): API keys and guide exhibitions. WAL mode so several server
 * processes and the `museum keys` CLI can share one file. Migrations are versioned
 * (`PRAGMA user_version`) and applied in one immediate transaction, so two processes opening the
 * file together never race; the first two are written so that files made before versioning
 * (user_version 0, tables present) pass through them unchanged.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';

export type StateDb = Database.Database;

/** Migration N is MIGRATIONS[N - 1]; never edit one that has shipped, append. */
const MIGRATIONS: string[] = [
  `CREATE TABLE IF NOT EXISTS api_keys (
     id INTEGER PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     prefix TEXT NOT NULL,
     hash BLOB NOT NULL UNIQUE,
     created_at INTEGER NOT NULL,
     revoked_at INTEGER,
     last_used_at INTEGER
   )`,
  `CREATE TABLE IF NOT EXISTS exhibitions (
     id TEXT PRIMARY KEY,
     content_hash TEXT NOT NULL,
     owner_token_hash BLOB NOT NULL,
     context TEXT NOT NULL,
     registered_at INTEGER NOT NULL,
     updated_at INTEGER NOT NULL
   )`,
  // Last read (ms), for expiring exhibitions nobody reads; 0 = never read since this column came.
  `ALTER TABLE exhibitions ADD COLUMN read_at INTEGER NOT NULL DEFAULT 0`,
  `CREATE TABLE exhibition_registrations (
     ip TEXT NOT NULL,
     day INTEGER NOT NULL,
     count INTEGER NOT NULL,
     PRIMARY KEY (ip, day)
   )`,
];

/**
 * Readiness: a real query on every table, as keyed and guide requests read them (`SELECT 1` reads no
 * page of the file, so a corrupt STATE_DB passed it while every keyed request failed). Each part is
 * a B-tree descent — the largest rowid, an index lookup — never a scan. Throws when SQLite cannot answer.
 */
export function checkStateDb(db: StateDb): void {
  db.prepare(
    `SELECT (SELECT max(rowid) FROM api_keys) AS keys, (SELECT id FROM api_keys WHERE hash = x'00') AS key_lookup,
            (SELECT max(rowid) FROM exhibitions) AS exhibitions, (SELECT read_at FROM exhibitions WHERE id = '') AS exhibition_lookup,
            (SELECT max(rowid) FROM exhibition_registrations) AS registrations`,
  ).get();
}

export function openStateDb(path: string): StateDb {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // Other processes (CLI, sibling servers) may hold the write lock briefly.
  db.pragma('busy_timeout = 5000');
  const migrate = db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    for (let v = version; v < MIGRATIONS.length; v++) db.exec(MIGRATIONS[v]!);
    if (version < MIGRATIONS.length) db.pragma(`user_version = ${MIGRATIONS.length}`);
  });
  migrate.immediate();
  return db;
}
