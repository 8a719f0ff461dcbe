/**
 * Guide exhibitions: the `museum-exhibition@1` registration document (validated strictly), the
 * GuideContext built from it and the museum's own baked content, and the SQLite store.
 *
 * Validation: ids, bounds and types are checked by zod; strings carrying control characters or
 * markup, strings over 1,000 characters and bodies nested deeper than any real document are
 * refused (400, nothing stored); accepted strings are clamped to display lengths. Unknown keys
 * are dropped: the document may carry more than the guide reads.
 *
 * Ownership: the first registration of an id returns an owner token (shown once, stored as its
 * SHA-256). Re-sending identical content needs no token (it refreshes the enrichment); different
 * content needs `X-Exhibition-Token`, else 409 CONFLICT — 401 is reserved for API keys.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { ContentSnapshot } from '../content.ts';
import { HttpError } from '../errors.ts';
import type { StateDb } from '../state/db.ts';
import { clamp, CONTROL_CHARS, MARKUP, sha256Hex } from './text.ts';

export const EXHIBITION_FORMAT = 'museum-exhibition@1';
export const EXHIBITION_ID = /^[\w.:-]{1,64}$/;
export const LIMITS = {
  placements: 60,
  artworksPerPlacement: 256,
  /** Longest string accepted anywhere in the document (longer ones are refused, not clamped). */
  string: 1_000,
  /** Deepest nesting accepted (a real document is 5 levels deep). */
  depth: 12,
} as const;
/** Display lengths strings are clamped to. */
export const CLAMP = { name: 120, title: 160, artist: 120, generator: 120, uid: 128, description: 600, collection: 120 } as const;

const text = (max: number, what: string) =>
  z
    .string()
    .max(LIMITS.string, `${what} is longer than ${LIMITS.string} characters`)
    .refine((s) => !CONTROL_CHARS.test(s), `${what} contains control characters`)
    .refine((s) => !MARKUP.test(s), `${what} contains markup`)
    .transform((s) => clamp(s.replace(/\s+/g, ' ').trim(), max));
const positiveId = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

const ArtworkRef = z.object({
  id: positiveId,
  name: text(CLAMP.title, 'artwork name').nullable().optional(),
  artist: text(CLAMP.artist, 'artist').nullable().optional(),
});

const Placement = z.object({
  uid: text(CLAMP.uid, 'placement uid').refine((s) => s.length > 0, 'placement uid must not be empty'),
  room: z.object({ id: positiveId, title: text(CLAMP.title, 'room title') }),
  artworks: z.array(ArtworkRef).max(LIMITS.artworksPerPlacement, `at most ${LIMITS.artworksPerPlacement} artworks per placement`),
});

export const ExhibitionDocument = z
  .object({
    format: z.literal(EXHIBITION_FORMAT),
    id: z.string().regex(EXHIBITION_ID, '1-64 word characters, dots, colons or hyphens'),
    name: text(CLAMP.name, 'name').refine((s) => s.length > 0, 'name must not be empty'),
    generator: text(CLAMP.generator, 'generator').optional(),
    placements: z.array(Placement).max(LIMITS.placements, `at most ${LIMITS.placements} placements`),
  })
  .superRefine((doc, ctx) => {
    const seen = new Set<string>();
    doc.placements.forEach((p, i) => {
      if (seen.has(p.uid)) ctx.addIssue({ code: 'custom', path: ['placements', i, 'uid'], message: 'placement uids must be unique' });
      seen.add(p.uid);
    });
  })
  .meta({ id: 'ExhibitionDocument', description: 'museum-exhibition@1: what the guide reads of an exhibition (other keys are ignored)' });
export type ExhibitionDocument = z.output<typeof ExhibitionDocument>;

/** Deepest nesting of a parsed JSON value (iterative: a hostile body cannot exhaust the stack). */
export function depthOf(value: unknown, stopAt = Infinity): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (d > max) max = d;
    if (max > stopAt) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

// ---------------------------------------------------------------------------------------------
// The context (spec: GuideContext, GuideContextRoom, GuideContextArtwork)

export const GuideContextRoom = z
  .object({
    uid: z.string().describe('placement uid'),
    id: z.number().int().describe('museum room id'),
    title: z.string(),
    architect: z.string().nullable(),
    description: z.string().nullable(),
    series: z.string().nullable(),
  })
  .meta({ id: 'GuideContextRoom' });
export type GuideContextRoom = z.infer<typeof GuideContextRoom>;

export const GuideContextArtwork = z
  .object({
    id: z.number().int().nullable().describe('museum artwork id, when the museum knows the work'),
    title: z.string(),
    artist: z.string().nullable(),
    description: z.string().nullable().describe('clamped'),
    collection: z.string().nullable().describe('title of the museum collection (or the marketplace slug)'),
    roomUid: z.string().describe('placement uid of the room it hangs in'),
  })
  .meta({ id: 'GuideContextArtwork' });
export type GuideContextArtwork = z.infer<typeof GuideContextArtwork>;

export const GuideContext = z
  .object({
    id: z.string(),
    name: z.string(),
    registeredAt: z.string().describe('ISO 8601, first registration'),
    updatedAt: z.string().describe('ISO 8601, last change of content, enrichment or starters'),
    generator: z.string().nullable(),
    artists: z.array(z.string()).describe('distinct exhibited artist names'),
    architects: z.array(z.string()).describe('distinct room architect names'),
    starters: z.array(z.string()).describe('suggested visitor questions, filled asynchronously after registration'),
    rooms: z.array(GuideContextRoom),
    artworks: z.array(GuideContextArtwork),
  })
  .meta({ id: 'GuideContext' });
export type GuideContext = z.infer<typeof GuideContext>;

const distinct = (values: Array<string | null>): string[] => [...new Set(values.filter((v): v is string => !!v))];
const orNull = (s: string | undefined | null, max: number): string | null => (s && s.trim() ? clamp(s.trim(), max) : null);

/** The context of a document, enriched from the museum's baked content (rooms, artworks, collections). */
export function buildContext(
  doc: ExhibitionDocument,
  snapshot: ContentSnapshot,
  times: { registeredAt: string; updatedAt: string },
  starters: string[] = [],
): GuideContext {
  const rooms: GuideContextRoom[] = doc.placements.map((p) => {
    const known = snapshot.roomsById.get(p.room.id);
    return {
      uid: p.uid,
      id: p.room.id,
      title: orNull(known?.title, CLAMP.title) ?? p.room.title,
      architect: orNull(known?.architect, CLAMP.name),
      description: orNull(known?.description, CLAMP.description),
      series: orNull(known?.series, CLAMP.name),
    };
  });
  const artworks: GuideContextArtwork[] = [];
  for (const p of doc.placements) {
    const seen = new Set<number>();
    for (const ref of p.artworks) {
      if (seen.has(ref.id)) continue;
      seen.add(ref.id);
      const known = snapshot.artworksById.get(ref.id);
      const collection = known ? snapshot.collectionsBySlug.get(known.collection) : undefined;
      const description = (known as { description?: unknown } | undefined)?.description;
      artworks.push({
        id: known ? known.id : null,
        title: orNull(known?.name, CLAMP.title) ?? ref.name ?? 'Untitled',
        artist: orNull(known?.artist_name, CLAMP.artist) ?? ref.artist ?? null,
        description: typeof description === 'string' ? orNull(description, CLAMP.description) : null,
        collection: orNull(collection?.title ?? known?.collection, CLAMP.collection),
        roomUid: p.uid,
      });
    }
  }
  return {
    id: doc.id,
    name: doc.name,
    registeredAt: times.registeredAt,
    updatedAt: times.updatedAt,
    generator: doc.generator ?? null,
    artists: distinct(artworks.map((a) => a.artist)),
    architects: distinct(rooms.map((r) => r.architect)),
    starters,
    rooms,
    artworks,
  };
}

export const contentHashOf = (doc: ExhibitionDocument): string => sha256Hex(JSON.stringify(doc));

// ---------------------------------------------------------------------------------------------
// The store

export type RegisterOutcome = 'created' | 'updated' | 'unchanged';

interface Row {
  content_hash: string;
  owner_token_hash: Buffer;
  context: string;
  registered_at: number;
  updated_at: number;
}

const hashToken = (token: string): Buffer => Buffer.from(sha256Hex(token), 'hex');
const newOwnerToken = (): string => `exh_${randomBytes(24).toString('hex')}`;

/**
 * Exhibitions in STATE_DB. Reads go through a small cache of parsed contexts keyed by id and
 * checked against `updated_at` (one indexed lookup), so several server processes sharing the file
 * never serve a stale context; the cache is bounded by entries and by serialized size.
 */
export class ExhibitionStore {
  private readonly cache = new Map<string, { updatedAt: number; context: GuideContext; contentHash: string; bytes: number }>();
  private cacheBytes = 0;
  private readonly stampQuery;
  private readonly rowQuery;

  constructor(
    private readonly db: StateDb,
    private readonly maxCached = 256,
    private readonly maxCachedBytes = 32 * 1024 * 1024,
  ) {
    this.stampQuery = db.prepare<[string], { updated_at: number }>('SELECT updated_at FROM exhibitions WHERE id = ?');
    this.rowQuery = db.prepare<[string], Row>(
      'SELECT content_hash, owner_token_hash, context, registered_at, updated_at FROM exhibitions WHERE id = ?',
    );
  }

  get(id: string): { context: GuideContext; contentHash: string } | null {
    const stamp = this.stampQuery.get(id);
    if (!stamp) {
      this.drop(id);
      return null;
    }
    const cached = this.cache.get(id);
    if (cached && cached.updatedAt === stamp.updated_at) {
      this.cache.delete(id);
      this.cache.set(id, cached);
      return cached;
    }
    const row = this.rowQuery.get(id);
    if (!row) return null;
    const context = JSON.parse(row.context) as GuideContext;
    this.remember(id, { updatedAt: row.updated_at, context, contentHash: row.content_hash, bytes: row.context.length });
    return { context, contentHash: row.content_hash };
  }

  /**
   * Register or refresh. `build(registeredAt, starters)` makes the context to store (starters kept
   * when the content is unchanged). Throws 409 CONFLICT when the content differs and the token
   * is missing or wrong.
   */
  register(
    doc: ExhibitionDocument,
    presentedToken: string | undefined,
    build: (times: { registeredAt: string; updatedAt: string }, starters: string[]) => GuideContext,
    now = Date.now(),
  ): { outcome: RegisterOutcome; ownerToken?: string; context: GuideContext; contentHash: string } {
    const contentHash = contentHashOf(doc);
    const run = this.db.transaction(() => {
      const row = this.rowQuery.get(doc.id);
      // Timestamps only move forward, so the cache stamp always changes with the row.
      const stamp = Math.max(now, (row?.updated_at ?? 0) + 1);
      if (!row) {
        const ownerToken = newOwnerToken();
        const context = build({ registeredAt: new Date(now).toISOString(), updatedAt: new Date(stamp).toISOString() }, []);
        this.db
          .prepare('INSERT INTO exhibitions (id, content_hash, owner_token_hash, context, registered_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)')
          .run(doc.id, contentHash, hashToken(ownerToken), JSON.stringify(context), now, stamp);
        return { outcome: 'created' as const, ownerToken, context };
      }
      const registeredAt = new Date(row.registered_at).toISOString();
      const previous = JSON.parse(row.context) as GuideContext;
      const unchanged = row.content_hash === contentHash;
      if (!unchanged) {
        if (presentedToken === undefined) {
          throw new HttpError(409, 'CONFLICT', 'This exhibition id is registered with different content; send its owner token in X-Exhibition-Token to change it');
        }
        const presented = hashToken(presentedToken);
        if (presented.length !== row.owner_token_hash.length || !timingSafeEqual(presented, row.owner_token_hash)) {
          throw new HttpError(409, 'CONFLICT', 'X-Exhibition-Token does not match the owner token of this exhibition');
        }
      }
      // Unchanged content keeps its starters; changed content gets new ones (asynchronously).
      const context = build({ registeredAt, updatedAt: new Date(stamp).toISOString() }, unchanged ? previous.starters : []);
      this.db
        .prepare('UPDATE exhibitions SET content_hash = ?, context = ?, updated_at = ? WHERE id = ?')
        .run(contentHash, JSON.stringify(context), stamp, doc.id);
      return { outcome: unchanged ? ('unchanged' as const) : ('updated' as const), context };
    });
    const result = run.immediate();
    this.drop(doc.id);
    return { ...result, contentHash };
  }

  /** Store generated starters, unless the content changed meanwhile. Returns whether they were stored. */
  setStarters(id: string, contentHash: string, starters: string[], now = Date.now()): boolean {
    const run = this.db.transaction(() => {
      const row = this.rowQuery.get(id);
      if (!row || row.content_hash !== contentHash) return false;
      const stamp = Math.max(now, row.updated_at + 1);
      const context = { ...(JSON.parse(row.context) as GuideContext), starters, updatedAt: new Date(stamp).toISOString() };
      this.db.prepare('UPDATE exhibitions SET context = ?, updated_at = ? WHERE id = ?').run(JSON.stringify(context), stamp, id);
      return true;
    });
    const stored = run.immediate();
    this.drop(id);
    return stored;
  }

  private remember(id: string, entry: { updatedAt: number; context: GuideContext; contentHash: string; bytes: number }): void {
    this.drop(id);
    if (entry.bytes > this.maxCachedBytes / 4) return;
    this.cache.set(id, entry);
    this.cacheBytes += entry.bytes;
    for (const [oldest, e] of this.cache) {
      if (this.cache.size <= this.maxCached && this.cacheBytes <= this.maxCachedBytes) break;
      this.cache.delete(oldest);
      this.cacheBytes -= e.bytes;
    }
  }

  private drop(id: string): void {
    const e = this.cache.get(id);
    if (!e) return;
    this.cache.delete(id);
    this.cacheBytes -= e.bytes;
  }
}
