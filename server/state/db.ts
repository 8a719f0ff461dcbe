/**
 * The SQLite state store (STATE_DB): API keys and guide exhibitions. WAL mode so several server
 * processes and the `museum keys` CLI can share one file; migrations are idempotent.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';

export type StateDb = Database.Database;

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
];

export function openStateDb(path: string): StateDb {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  // Other processes (CLI, sibling servers) may hold the write lock briefly.
  db.pragma('busy_timeout = 5000');
  db.transaction(() => {
    for (const sql of MIGRATIONS) db.exec(sql);
  })();
  return db;
}
