/**
 * PostgreSQL schema migrations (DATABASE_URL), applied in order at start under an advisory lock
 * (pg-db.ts) and recorded in `museum_migrations`. Never edit one that has shipped: append.
 * Times are epoch milliseconds (BIGINT), as in the SQLite store.
 */
/** The channel every key change is announced on (payload: the key id). */
export const KEY_CHANNEL = 'museum_api_keys';

export const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  {
    version: 1,
    name: 'api keys, with a notice on every revocation',
    sql: `
      CREATE TABLE api_keys (
        id BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        hash BYTEA NOT NULL UNIQUE,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT,
        last_used_at BIGINT
      );
      CREATE FUNCTION museum_api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('${KEY_CHANNEL}', COALESCE(OLD.id, NEW.id)::text);
        RETURN NULL;
      END $$;
      CREATE TRIGGER api_keys_changed AFTER UPDATE OF revoked_at, hash OR DELETE ON api_keys
        FOR EACH ROW EXECUTE FUNCTION museum_api_key_changed();`,
  },
  {
    version: 2,
    name: 'guide exhibitions and registration quotas',
    sql: `
      CREATE TABLE exhibitions (
        id TEXT PRIMARY KEY,
        content_hash TEXT NOT NULL,
        owner_token_hash BYTEA NOT NULL,
        context TEXT NOT NULL,
        registered_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        read_at BIGINT NOT NULL DEFAULT 0
      );
      CREATE TABLE exhibition_registrations (
        ip TEXT NOT NULL,
        day INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (ip, day)
      );`,
  },
];
