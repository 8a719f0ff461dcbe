/**
 * The character knowledge base (a Directus instance, collection `codex`; decisions: upstream
 * services). Upstream records carry the API's field names except the Directus file ids
 * (`thumbnail*` → absolute `*_url` at `<upstream>/assets/<id>`) and `ipfs_final` (a CID →
 * `image_ipfs_url` `ipfs://<cid>`). The heavy persona blobs (`agent_profiles`, `bot_profile`,
 * hundreds of KB each) are never requested for lists.
 *
 * Responses are cached for about 5 minutes in a cache bounded by entries and bytes; concurrent misses
 * for the same key share one upstream call (single flight). Failures are never cached.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { z } from 'zod';
import { type FrozenBody, freeze } from '../content.ts';
import { untilAborted, type UpstreamError, UpstreamHttp } from './http.ts';

export const CHARACTERS_SERVICE = 'character knowledge base';

// ---------------------------------------------------------------------------------------------
// Fields

/** API field → upstream field, for the fields whose names differ. */
const UPSTREAM_NAME: Record<string, string> = {
  thumbnail_url: 'thumbnail',
  thumbnail_character_url: 'thumbnail_character',
  thumbnail_background_url: 'thumbnail_background',
  image_ipfs_url: 'ipfs_final',
};
const FILE_FIELDS = new Set(['thumbnail_url', 'thumbnail_character_url', 'thumbnail_background_url']);

export const SUMMARY_FIELDS = [
  'id',
  'name',
  'description',
  'ancestor',
  'character_type',
  'dna1',
  'dna2',
  'dna3',
  'dna4',
  'cultural_affiliation',
  'philosophical_affiliation',
  'artstyle_loved',
  'owner',
  'soul',
  'multiplicity',
  'thumbnail_url',
  'thumbnail_character_url',
  'thumbnail_background_url',
  'image_ipfs_url',
  'timestamp_created',
] as const;
export const DETAIL_FIELDS = ['biography', 'characterization', 'confession', 'writing_flavor'] as const;
/** Excluded from lists regardless of `fields`; on the detail only with include=profiles. */
const HEAVY_FIELDS = ['agent_profiles', 'bot_profile'] as const;
const CODEX_FIELD = 'codex_document';

/** What a list may select with `fields`: everything but the heavy blobs and the codex document. */
const LIST_SELECTABLE = new Set<string>([...SUMMARY_FIELDS, ...DETAIL_FIELDS]);

export type CharacterInclude = 'profiles' | 'codex';
export type CharacterRecord = { id: number } & Record<string, unknown>;

// ---------------------------------------------------------------------------------------------
// Public schemas (OpenAPI components)

const loose = (description: string) => z.unknown().describe(description);
const url = (description: string) => z.string().nullable().describe(description);
const summaryShape = {
  id: z.number().int().min(1).max(10_000).describe('token id'),
  name: loose('in sample usage a list whose first element is the display name'),
  description: loose('description'),
  ancestor: loose('ancestor'),
  character_type: loose('character type'),
  dna1: loose('dna 1'),
  dna2: loose('dna 2'),
  dna3: loose('dna 3'),
  dna4: loose('dna 4'),
  cultural_affiliation: loose('cultural affiliation'),
  philosophical_affiliation: loose('philosophical affiliation'),
  artstyle_loved: loose('loved art style'),
  owner: z.string().nullable().describe('owner Ethereum address'),
  soul: loose('soul'),
  multiplicity: loose('multiplicity'),
  thumbnail_url: url('absolute asset URL of the thumbnail'),
  thumbnail_character_url: url('absolute asset URL of the character-only thumbnail'),
  thumbnail_background_url: url('absolute asset URL of the background thumbnail'),
  image_ipfs_url: url('ipfs:// URI of the final artwork'),
  timestamp_created: loose('creation time'),
};

/** A list item: the lightweight field set (or the `fields` selection; `id` is always present). */
export const CharacterSummary = z
  .object({
    ...Object.fromEntries(Object.entries(summaryShape).map(([k, v]) => [k, k === 'id' ? v : v.optional()])),
    biography: loose('only when selected with `fields`').optional(),
    characterization: loose('only when selected with `fields`').optional(),
    confession: loose('only when selected with `fields`').optional(),
    writing_flavor: loose('only when selected with `fields`').optional(),
  })
  .meta({ id: 'CharacterSummary' });

export const CharacterDetail = z
  .object({
    ...summaryShape,
    biography: loose('list of text in sample usage'),
    characterization: loose('characterization'),
    confession: loose('confession'),
    writing_flavor: loose('writing flavor'),
    agent_profiles: loose('only with include=profiles (large)').optional(),
    bot_profile: loose('persona blob, only with include=profiles (large)').optional(),
    codex_document: loose('only with include=codex; null when no codex file exists for the token').optional(),
  })
  .meta({ id: 'CharacterDetail' });

export const CharacterListMeta = z
  .object({
    total: z.number().int().describe('all characters upstream'),
    filtered: z.number().int().describe('characters matching `search`'),
    page: z.number().int(),
    limit: z.number().int(),
  })
  .meta({ id: 'CharacterListMeta' });

export interface CharacterListQuery {
  page: number;
  limit: number;
  search?: string;
  /** API field names; unknown and heavy ones are ignored. */
  fields?: string[];
}

export interface CharacterList {
  data: CharacterRecord[];
  meta: z.infer<typeof CharacterListMeta>;
}

// ---------------------------------------------------------------------------------------------
// Upstream shapes (Directus)

const UpstreamItem = z.looseObject({ id: z.coerce.number().int() });
const UpstreamList = z.object({
  data: z.array(UpstreamItem),
  meta: z.object({ total_count: z.coerce.number().int(), filter_count: z.coerce.number().int() }),
});
const UpstreamOne = z.object({ data: UpstreamItem });

// ---------------------------------------------------------------------------------------------
// The bounded TTL cache with single flight

interface Entry<T> {
  value: T;
  bytes: number;
  frozen?: FrozenBody | null;
}

/** Least-recently-used cache bounded by entry count and bytes (lru-cache); entries expire after `ttlMs`. */
export class TtlCache<T> {
  private readonly entries: LRUCache<string, Entry<T>>;
  private readonly inflight = new Map<string, Promise<Entry<T>>>();

  constructor(options: { ttlMs: number; maxEntries: number; maxBytes: number; now?: () => number }) {
    this.entries = new LRUCache({
      max: options.maxEntries,
      // One larger than the whole budget is answered uncached (lru-cache does not store it).
      maxSize: options.maxBytes,
      sizeCalculation: (entry) => Math.max(1, entry.bytes),
      ttl: options.ttlMs,
      // The clock read at every check, not cached for a millisecond: tests move `now` by hand.
      ttlResolution: 0,
      ...(options.now ? { perf: { now: options.now } } : {}),
    });
  }

  /** The cached entry, or the shared result of one `load()` for all concurrent callers. */
  async get(key: string, load: () => Promise<{ value: T; bytes: number }>): Promise<Entry<T>> {
    const hit = this.peek(key);
    if (hit) return hit;
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = load()
        .then(({ value, bytes }) => {
          const entry: Entry<T> = { value, bytes };
          this.entries.set(key, entry);
          return entry;
        })
        .finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return pending;
  }

  /** The fresh cached entry for `key`, marked as used, without loading (is it ready?). */
  peek(key: string): Entry<T> | undefined {
    return this.entries.get(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.entries.calculatedSize };
  }
}

// ---------------------------------------------------------------------------------------------
// The client

export interface CharactersClientOptions {
  url: string;
  timeoutMs: number;
  log?: Logger;
  /** Default 5 minutes (spec: at most about 5 minutes behind upstream). */
  cacheTtlMs?: number;
  cacheMaxEntries?: number;
  cacheMaxBytes?: number;
  now?: () => number;
}

export interface CallContext {
  /** The caller's cancellation: it stops waiting; a shared upstream call still completes for others. */
  signal?: AbortSignal;
}

type Cached = CharacterList | CharacterRecord | null;

export class CharactersClient {
  private readonly http: UpstreamHttp;
  private readonly cache: TtlCache<Cached>;
  private readonly assetBase: string;

  constructor(options: CharactersClientOptions) {
    this.http = new UpstreamHttp({ service: CHARACTERS_SERVICE, baseUrl: options.url, timeoutMs: options.timeoutMs, log: options.log });
    this.assetBase = `${this.http.baseUrl}/assets/`;
    this.cache = new TtlCache<Cached>({
      ttlMs: options.cacheTtlMs ?? 5 * 60_000,
      maxEntries: options.cacheMaxEntries ?? 2_000,
      maxBytes: options.cacheMaxBytes ?? 64 * 1024 * 1024,
      now: options.now,
    });
  }

  /** A page of characters with the lightweight fields (or a selection of them). */
  async list(query: CharacterListQuery, context: CallContext = {}): Promise<CharacterList> {
    return (await this.listEntry(query, context)).value as CharacterList;
  }

  /** The same as `list`, serialized once per cache entry as the route's `{ data, meta }` body. */
  async listBody(query: CharacterListQuery, context: CallContext = {}): Promise<FrozenBody> {
    const entry = await this.listEntry(query, context);
    return (entry.frozen ??= freeze(entry.value));
  }

  /** One character with the detail fields (and the requested extras); null when it does not exist. */
  async get(id: number, include: Iterable<CharacterInclude> = [], context: CallContext = {}): Promise<CharacterRecord | null> {
    return (await this.getEntry(id, include, context)).value as CharacterRecord | null;
  }

  /** The same as `get`, serialized once per cache entry as the route's `{ data }` body; null when not found. */
  async getBody(id: number, include: Iterable<CharacterInclude> = [], context: CallContext = {}): Promise<FrozenBody | null> {
    const entry = await this.getEntry(id, include, context);
    if (entry.value === null) return null;
    return (entry.frozen ??= freeze({ data: entry.value }));
  }

  /** The list body when it is cached and fresh (no upstream call); undefined otherwise. */
  cachedListBody(query: CharacterListQuery): FrozenBody | undefined {
    const entry = this.cache.peek(listKey(query).key);
    return entry ? (entry.frozen ??= freeze(entry.value)) : undefined;
  }

  /** One character's body when it is cached, fresh and found (no upstream call); undefined otherwise. */
  cachedGetBody(id: number, include: Iterable<CharacterInclude> = []): FrozenBody | undefined {
    const entry = this.cache.peek(getKey(id, include).key);
    if (!entry || entry.value === null) return undefined;
    return (entry.frozen ??= freeze({ data: entry.value }));
  }

  clearCache(): void {
    this.cache.clear();
  }

  private listEntry(query: CharacterListQuery, context: CallContext) {
    const { key, fields, search } = listKey(query);
    const { page, limit } = query;
    return untilAborted(
      this.cache.get(key, async () => {
        const result = await this.http.json('/items/codex', {
          query: {
            fields: fields.map(upstreamName).join(','),
            limit,
            offset: (page - 1) * limit,
            sort: 'id',
            search,
            meta: 'total_count,filter_count',
          },
        });
        const parsed = UpstreamList.safeParse(result.body);
        if (!parsed.success) throw this.garbage('/items/codex');
        const value: CharacterList = {
          data: parsed.data.data.map((item) => this.toApi(item, fields)),
          meta: { total: parsed.data.meta.total_count, filtered: parsed.data.meta.filter_count, page, limit },
        };
        // The parsed value and its serialized body are both kept: about twice the upstream bytes.
        return { value, bytes: 2 * result.bytes };
      }),
      context.signal,
      CHARACTERS_SERVICE,
    );
  }

  private getEntry(id: number, include: Iterable<CharacterInclude>, context: CallContext) {
    const { key, fields } = getKey(id, include);
    return untilAborted(
      this.cache.get(key, async () => {
        const path = `/items/codex/${id}`;
        // Directus answers 403 for ids that do not exist (or are not readable): both mean not found.
        const result = await this.http.json(path, { query: { fields: fields.map(upstreamName).join(',') }, accept: [403, 404] });
        if (result.body === null) return { value: null, bytes: 64 };
        const parsed = UpstreamOne.safeParse(result.body);
        if (!parsed.success || parsed.data.data.id !== id) throw this.garbage(path);
        return { value: this.toApi(parsed.data.data, fields), bytes: 2 * result.bytes };
      }),
      context.signal,
      CHARACTERS_SERVICE,
    );
  }

  private garbage(path: string): UpstreamError {
    return this.http.failure('body', `${path}: unexpected response shape`);
  }

  /** Upstream record → API record with exactly `fields` (missing upstream values are null). */
  private toApi(item: z.infer<typeof UpstreamItem>, fields: readonly string[]): CharacterRecord {
    const out: CharacterRecord = { id: item.id };
    for (const field of fields) {
      if (field === 'id') continue;
      const raw = (item as Record<string, unknown>)[upstreamName(field)];
      if (FILE_FIELDS.has(field)) out[field] = this.assetUrl(raw);
      else if (field === 'image_ipfs_url') out[field] = ipfsUri(raw);
      else out[field] = raw === undefined ? null : raw;
    }
    return out;
  }

  private assetUrl(raw: unknown): string | null {
    // A Directus file field holds the file id, or the file object when expanded.
    const id = typeof raw === 'object' && raw !== null ? (raw as { id?: unknown }).id : raw;
    return typeof id === 'string' && id !== '' ? this.assetBase + encodeURIComponent(id) : null;
  }
}

const upstreamName = (field: string): string => UPSTREAM_NAME[field] ?? field;

/** Cache key of a list query, with the normalized field selection and search it stands for. */
function listKey(query: CharacterListQuery): { key: string; fields: string[]; search: string | undefined } {
  const fields = selectListFields(query.fields);
  const search = query.search?.trim().slice(0, 200) || undefined;
  return { key: `list|${query.page}|${query.limit}|${fields.join(',')}|${search ?? ''}`, fields, search };
}

/** Cache key of one character with its extras, and the fields that fetch them. */
function getKey(id: number, include: Iterable<CharacterInclude>): { key: string; fields: string[] } {
  const extras = new Set(include);
  const fields: string[] = [...SUMMARY_FIELDS, ...DETAIL_FIELDS];
  if (extras.has('profiles')) fields.push(...HEAVY_FIELDS);
  if (extras.has('codex')) fields.push(CODEX_FIELD);
  return { key: `one|${id}|${extras.has('profiles') ? 'p' : ''}${extras.has('codex') ? 'c' : ''}`, fields };
}

function ipfsUri(raw: unknown): string | null {
  if (typeof raw !== 'string' || raw.trim() === '') return null;
  const cid = raw.trim().replace(/^ipfs:\/\/(ipfs\/)?/i, '');
  return `ipfs://${cid}`;
}

/** The list selection: known light fields in the documented order, `id` always; default = summary. */
function selectListFields(requested: string[] | undefined): string[] {
  const wanted = new Set((requested ?? []).map((f) => f.trim()).filter((f) => LIST_SELECTABLE.has(f)));
  if (wanted.size === 0) return [...SUMMARY_FIELDS];
  return ['id', ...[...SUMMARY_FIELDS, ...DETAIL_FIELDS].filter((f) => f !== 'id' && wanted.has(f))];
}
