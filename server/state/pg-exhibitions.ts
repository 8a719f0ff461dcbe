/** Guide exhibitions, their owner tokens and registration quotas in PostgreSQL (DATABASE_URL; SQLite: exhibitions.ts). */
import { clientBucket } from '../../common/net.ts';
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
import type { PgState } from './pg-db.ts';

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
      ({ rows } = await this.db.query<(typeof rows)[number]>(
        'SELECT updated_at, read_at, content_hash, CASE WHEN updated_at = $2 THEN NULL ELSE context END AS context FROM exhibitions ' +
          'WHERE id = $1',
        [id, cachedStamp ?? -1],
      ));
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
        'INSERT INTO exhibition_registrations (ip, day, count) VALUES ($1, $2, 1) ON CONFLICT (ip, day) DO UPDATE SET count = ' +
          'exhibition_registrations.count + 1 RETURNING count',
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
        await c.query('UPDATE exhibitions SET content_hash = $1, context = $2, updated_at = $3 WHERE id = $4', [
          contentHash,
          plan.json,
          plan.stamp,
          doc.id,
        ]);
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
