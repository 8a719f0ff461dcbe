/**
 * `museum bake sync`: pull the museum's content from its content store (a Directus instance with
 * the collections `collections`, `nfts` and `rooms`, files at `/assets/<id>`) into a content
 * directory in the bake's format (bake/content.ts), so `museum bake rooms` runs on real data.
 * bake/store-records.ts maps the store's records (its schema is in decisions: "Content store").
 *
 * - Every collection is read page by page (`limit`/`offset`, sorted by id); requests are retried
 *   with exponential backoff on timeouts, network errors, 408/429 and 5xx. Other refusals (401,
 *   403) fail at once with one clear line. A store that caps `limit` below ours (Directus's
 *   QUERY_LIMIT_MAX: 400 '"limit" must be less than or equal to N') is paged with what it allows.
 * - Room model and preview files are downloaded next to the JSON (`files/<file id>.<ext>`). A file
 *   whose `/files/<id>` metadata (filesize, modified_on) is what the previous sync stored is reused
 *   without downloading it (stores send no ETag by default); with an ETag, a 304 reuses it too.
 * - Records that cannot be used (no model file, fields the bake cannot read) are skipped with a
 *   warning in the summary; the rest of the museum still syncs. Signs that the records are not
 *   what we read (expected fields absent, most listed artworks without media) fail the sync.
 * - The new content is assembled in a sibling temp directory, validated with the bake's own loader,
 *   and only then swapped in. A failed sync leaves the previous content untouched.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, promises as fs } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { writeFileAtomic } from '../artifacts/store.ts';
import { causeOf, oneLine } from '../common/errors.ts';
import {
  BodyTooLarge,
  guardedGet,
  NetRefused,
  type NetPolicy,
  netPolicyFromEnv,
  RetriesExhausted,
  Transient,
  trustingOrigin,
  withRetries,
} from '../common/net.ts';
import { type Content, CONTENT_FILES, type ContentCollection, ContentRoom, loadContent } from './content.ts';
import {
  checkFields,
  describeIssue,
  isPublished,
  mapArtworks,
  type MappedArtworks,
  mapCollections,
  type StoreCollection,
  type StoreRecord,
  SyncError,
} from './store-records.ts';

export { SyncError };

export interface SyncOptions {
  /** Base URL of the content store (CONTENT_UPSTREAM_URL). */
  upstreamUrl: string;
  /** Static token (CONTENT_UPSTREAM_TOKEN), sent as `Authorization: Bearer`. */
  token?: string;
  /** The content directory to (re)write. */
  contentDir: string;
  /** Records per page (default 100). */
  pageSize?: number;
  /** Attempts after the first, per request (default 3). */
  retries?: number;
  /** First backoff delay; doubles per retry (default 500 ms). */
  backoffMs?: number;
  /** Per attempt of one page (default 30 s). */
  timeoutMs?: number;
  /** Per attempt of one file download (default 10 min). */
  fileTimeoutMs?: number;
  /** Largest file accepted (default 512 MB). */
  maxFileBytes?: number;
  /** What may be fetched besides the store itself (default: BAKE_ALLOW_HOSTS); the store's origin is trusted. */
  net?: NetPolicy;
  /** Parallel file downloads (default 4). */
  concurrency?: number;
  /** Most records read from one collection (default SYNC_LIMITS); a store that pages past it fails the sync. */
  maxRecords?: number;
  /** Largest page answer in bytes (default SYNC_LIMITS), counted as it streams in, before parsing. */
  maxPageBytes?: number;
  /** Progress lines (stderr in the CLI). */
  log?: (line: string) => void;
}

export interface SyncSummary {
  dir: string;
  upstream: string;
  collections: number;
  artworks: number;
  /** Artwork records without media_info (not listed, not synced). */
  unlisted: number;
  rooms: number;
  files: { downloaded: number; reused: number; bytes: number };
  warnings: string[];
  ms: number;
}

/**
 * Bounds on what a store may make the sync read (decisions: "Bounds decided after the second attack
 * round"): a store whose pages never end, or one huge page, would otherwise grow it without end.
 */
const SYNC_LIMITS = { maxRecords: 200_000, maxPageBytes: 64 * 1024 * 1024 };

/** What a sync remembers about the files it wrote, to reuse them next time. */
const SYNC_STATE = '.sync.json';
const FILES_DIR = 'files';
const SyncState = z.object({
  upstream: z.string(),
  files: z.record(
    z.string(),
    z.object({
      name: z.string(),
      etag: z.string().nullable(),
      bytes: z.number(),
      /** `<filesize>|<modified_on>` from `/files/<id>` when the file was stored, or null. */
      version: z.string().nullable().default(null),
    }),
  ),
});
type SyncState = z.infer<typeof SyncState>;

const DirectusPage = z.object({
  data: z.array(z.record(z.string(), z.unknown())),
  meta: z
    .object({ filter_count: z.union([z.number(), z.string()]).optional() })
    .loose()
    .optional(),
});
const DirectusFile = z.object({
  data: z.object({
    filesize: z.union([z.number(), z.string()]).nullish(),
    modified_on: z.string().nullish(),
    uploaded_on: z.string().nullish(),
  }),
});
/** A Directus error body; the reason of an INVALID_QUERY names the limit the store allows. */
const DirectusErrors = z.object({
  errors: z.array(
    z.object({ message: z.string().optional(), extensions: z.object({ reason: z.string().optional() }).loose().optional() }).loose(),
  ),
});
const LIMIT_CAP = /"?limit"? must be less than or equal to (\d+)/i;

const IMAGE_EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/avif': 'avif',
  'image/gif': 'gif',
  'image/svg+xml': 'svg',
};

/** The store answered that it allows at most `max` records per request. */
class LimitCapped extends Error {
  constructor(readonly max: number) {
    super(`limit capped at ${max}`);
  }
}

class StoreClient {
  readonly base: string;
  private readonly net: NetPolicy;
  /** Records per page: ours, or the store's cap once it named one. */
  private pageSize: number;
  constructor(private readonly o: Required<Pick<SyncOptions, 'retries' | 'backoffMs' | 'timeoutMs' | 'fileTimeoutMs'>> & SyncOptions) {
    this.base = o.upstreamUrl.replace(/\/+$/, '');
    this.net = trustingOrigin(o.net ?? netPolicyFromEnv(), this.base);
    this.pageSize = o.pageSize ?? 100;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.o.token ? { authorization: `Bearer ${this.o.token}` } : {}), ...extra };
  }

  /** Run `attempt` with retries on Transient failures. */
  private retrying<T>(what: string, attempt: () => Promise<T>): Promise<T> {
    return withRetries(attempt, { ...this.o, onRetry: (problem) => this.o.log?.(`sync: retrying ${what} (${problem})`) }).catch(
      (err: unknown) => {
        throw err instanceof RetriesExhausted ? new SyncError(`content store at ${this.base}: ${what} ${err.message}`) : err;
      },
    );
  }

  private refusal(what: string, status: number): SyncError {
    const hint =
      status === 401
        ? 'the token was refused (check CONTENT_UPSTREAM_TOKEN)'
        : status === 403
          ? 'access denied (check CONTENT_UPSTREAM_TOKEN and its role)'
          : `HTTP ${status}`;
    return new SyncError(`content store at ${this.base}: ${what}: ${hint}`);
  }

  private async send(url: string, init: { headers: Record<string, string> }, timeoutMs: number, maxBytes?: number): Promise<Response> {
    try {
      const signal = AbortSignal.timeout(timeoutMs);
      return await guardedGet(url, { ...init, policy: this.net, signal, maxBytes: maxBytes ?? this.o.maxFileBytes ?? 512 * 1024 * 1024 });
    } catch (err) {
      if (err instanceof NetRefused) throw new SyncError(`content store at ${this.base}: ${err.message}`);
      throw new Transient((err as Error).name === 'TimeoutError' ? `timed out after ${timeoutMs} ms` : `unreachable (${causeOf(err)})`);
    }
  }

  /**
   * Every record of a collection, page by page; throws when its records lack the fields we read.
   * The first page asks for the total (`meta=filter_count`), so a store that silently answers
   * fewer records than asked (a cap without the 400) is paged on instead of read short.
   */
  async readAll(collection: StoreCollection): Promise<StoreRecord[]> {
    const out: StoreRecord[] = [];
    const seen = new Set<string>();
    let total: number | null = null;
    for (let offset = 0; ; ) {
      const pageSize = this.pageSize;
      const query = new URLSearchParams({
        fields: '*',
        sort: 'id',
        limit: String(pageSize),
        offset: String(offset),
        ...(offset === 0 ? { meta: 'filter_count' } : {}),
      });
      const url = `${this.base}/items/${collection}?${query}`;
      const what = `reading ${collection} (offset ${offset})`;
      const page = await this.retrying(what, async () => {
        const res = await this.send(url, { headers: this.headers({ accept: 'application/json' }) }, this.o.timeoutMs, this.maxPageBytes);
        if (res.status >= 500 || res.status === 408 || res.status === 429) {
          await res.body?.cancel().catch(() => undefined);
          throw new Transient(`HTTP ${res.status}`);
        }
        if (res.status === 400) throw await this.badQuery(what, res, pageSize);
        if (!res.ok) {
          await res.body?.cancel().catch(() => undefined);
          throw this.refusal(what, res.status);
        }
        const parsed = DirectusPage.safeParse(await this.readJson(res, what));
        if (!parsed.success) throw new Transient('the answer is not a Directus item list');
        return parsed.data;
      }).catch((err: unknown) => {
        if (!(err instanceof LimitCapped)) throw err;
        this.o.log?.(`sync: the store allows at most ${err.max} records per request; paging with ${err.max}`);
        this.pageSize = err.max;
        return null;
      });
      if (page === null) continue; // the same offset again, with the store's limit
      if (offset === 0) total = Number(page.meta?.filter_count ?? NaN) >= 0 ? Number(page.meta!.filter_count) : null;
      let fresh = 0;
      for (const record of page.data) {
        const key = String(record.id);
        if (seen.has(key)) continue;
        seen.add(key);
        out.push(record);
        fresh++;
      }
      if (out.length > this.maxRecords) {
        throw new SyncError(
          `content store at ${this.base}: ${collection} has more than ${this.maxRecords} records (the sync reads at most that many per ` +
            `collection)`,
        );
      }
      if (page.data.length === 0) break;
      if (page.data.length < pageSize) {
        if (total === null || out.length >= total) break;
        this.o.log?.(`sync: the store answered ${page.data.length} of ${pageSize} records; paging with ${page.data.length}`);
        this.pageSize = page.data.length;
      }
      if (fresh === 0)
        throw new SyncError(`content store at ${this.base}: ${collection} repeats the same records page after page (offset ignored?)`);
      offset += page.data.length;
    }
    checkFields(this.base, collection, out);
    return out;
  }

  private get maxPageBytes(): number {
    return this.o.maxPageBytes ?? SYNC_LIMITS.maxPageBytes;
  }

  private get maxRecords(): number {
    return this.o.maxRecords ?? SYNC_LIMITS.maxRecords;
  }

  /**
   * A JSON answer, or a Transient failure (interrupted, not JSON). A page answer over maxPageBytes
   * fails the sync before anything is parsed: by its Content-Length, else as its bytes stream in.
   */
  private async readJson(res: Response, what: string): Promise<unknown> {
    const tooLarge = () => new SyncError(`content store at ${this.base}: ${what}: the response is larger than ${this.maxPageBytes} bytes`);
    if (Number(res.headers.get('content-length') ?? 0) > this.maxPageBytes) {
      await res.body?.cancel().catch(() => undefined);
      throw tooLarge();
    }
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      if (err instanceof BodyTooLarge || (err as { cause?: unknown }).cause instanceof BodyTooLarge) throw tooLarge();
      throw new Transient(`interrupted (${causeOf(err)})`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new Transient('the answer is not JSON');
    }
    return json;
  }

  /** A 400: the store's limit cap (LimitCapped), or a refusal quoting its reason (bounded, one line). */
  private async badQuery(what: string, res: Response, pageSize: number): Promise<Error> {
    const body = await res.text().catch(() => '');
    let reason = '';
    try {
      const first = DirectusErrors.parse(JSON.parse(body)).errors[0];
      reason = first?.extensions?.reason ?? first?.message ?? '';
    } catch {
      /* not a Directus error body */
    }
    const max = Number(LIMIT_CAP.exec(reason)?.[1] ?? NaN);
    if (Number.isInteger(max) && max >= 1 && max < pageSize) return new LimitCapped(max);
    const quoted = reason
      .replace(/[\u0000-\u001f\u007f]+/g, ' ')
      .trim()
      .slice(0, 200);
    return new SyncError(`content store at ${this.base}: ${what}: HTTP 400${quoted ? ` (${quoted})` : ''}`);
  }

  /**
   * `/files/<id>` metadata as a version string (`<filesize>|<modified_on>`), or null when the store
   * does not say (refused, missing fields). Answers with the page timeout and retries.
   */
  async fileVersion(id: string): Promise<string | null> {
    const url = `${this.base}/files/${encodeURIComponent(id)}?fields=filesize,modified_on,uploaded_on`;
    const what = `reading the metadata of file ${id}`;
    return this.retrying(what, async () => {
      const res = await this.send(url, { headers: this.headers({ accept: 'application/json' }) }, this.o.timeoutMs, this.maxPageBytes);
      if (res.status >= 500 || res.status === 408 || res.status === 429) {
        await res.body?.cancel().catch(() => undefined);
        throw new Transient(`HTTP ${res.status}`);
      }
      if (res.status === 401) throw this.refusal(what, res.status);
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        return null; // the download decides whether the file is readable
      }
      const meta = DirectusFile.safeParse(await this.readJson(res, what));
      if (!meta.success) throw new Transient('the answer is not Directus file metadata');
      const { filesize, modified_on, uploaded_on } = meta.data.data;
      const changed = modified_on ?? uploaded_on;
      return filesize !== null && filesize !== undefined && changed ? `${filesize}|${changed}` : null;
    });
  }

  /**
   * Download one file to `dest`, or answer 'not-modified' when `etag` still matches. Refusals of
   * a single file (403/404: deleted or private) answer 'missing' so the record can be skipped.
   */
  async download(
    id: string,
    dest: string,
    etag: string | null,
  ): Promise<
    | { status: 'downloaded'; type: string; etag: string | null; bytes: number }
    | { status: 'not-modified' }
    | { status: 'missing'; http: number }
  > {
    const url = `${this.base}/assets/${encodeURIComponent(id)}`;
    const what = `downloading file ${id}`;
    return this.retrying(what, async () => {
      const res = await this.send(url, { headers: this.headers(etag ? { 'if-none-match': etag } : {}) }, this.o.fileTimeoutMs);
      if (res.status === 304 && etag) return { status: 'not-modified' as const };
      if (res.status >= 500 || res.status === 408 || res.status === 429) {
        await res.body?.cancel().catch(() => undefined);
        throw new Transient(`HTTP ${res.status}`);
      }
      if (res.status === 401) throw this.refusal(what, res.status);
      if (!res.ok || !res.body) {
        await res.body?.cancel().catch(() => undefined);
        return { status: 'missing' as const, http: res.status };
      }
      try {
        await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), createWriteStream(dest));
        const written = await fs.open(dest, 'r+');
        try {
          await written.sync(); // on disk before the directory is swapped in
        } finally {
          await written.close();
        }
      } catch (err) {
        await fs.rm(dest, { force: true });
        if (err instanceof BodyTooLarge) throw new SyncError(`content store at ${this.base}: ${what}: ${err.message}`);
        throw new Transient(`download interrupted (${causeOf(err)})`);
      }
      const bytes = (await fs.stat(dest)).size;
      return {
        status: 'downloaded' as const,
        type: (res.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase(),
        etag: res.headers.get('etag'),
        bytes,
      };
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Store records → content records

const fileId = (v: unknown): string | null => {
  const id = typeof v === 'object' && v !== null ? (v as { id?: unknown }).id : v;
  return typeof id === 'string' && /^[\w-]+$/.test(id) ? id : null;
};
/** A file id as warnings name it: a hostile one may be hundreds of characters long. */
const shownId = (id: string) => (id.length > 64 ? `${id.slice(0, 64)}… (${id.length} characters)` : id);
/** Errors of the local file system that make one file unstorable here (its name), not the sync. */
const UNSTORABLE = new Set(['ENAMETOOLONG', 'EINVAL', 'EILSEQ']);
// ---------------------------------------------------------------------------------------------
// The sync

export async function syncContent(options: SyncOptions): Promise<SyncSummary> {
  const started = performance.now();
  const contentDir = resolve(options.contentDir);
  const client = new StoreClient({ retries: 3, backoffMs: 500, timeoutMs: 30_000, fileTimeoutMs: 600_000, ...options });
  const log = options.log ?? (() => undefined);
  const warnings: string[] = [];

  const previous = await readSyncState(contentDir, client.base);
  const staging = join(dirname(contentDir), `.${basename(contentDir)}.sync-${randomBytes(6).toString('hex')}`);
  await fs.mkdir(join(staging, FILES_DIR), { recursive: true });
  try {
    const { collections, artworks, unlisted, storeRooms } = await readStore(client, log, warnings);

    const state: SyncState = { upstream: client.base, files: {} };
    const stats = { downloaded: 0, reused: 0, bytes: 0 };
    const files = fileFetcher(concurrencyLimit(options.concurrency ?? 4), (id, kind) =>
      syncFile(client, id, kind, staging, contentDir, previous, state, stats, warnings),
    );
    const rooms = await syncRooms(storeRooms, files, warnings);
    warnings.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));

    await writeContent(staging, { collections, artworks, rooms }, state);
    // The bake's own loader is the judge of what was written.
    const loaded = await loadContent(staging).catch((err: unknown) => {
      throw new SyncError(`the synced content is not valid: ${oneLine(err)}`);
    });

    await swapInto(staging, contentDir);
    const summary: SyncSummary = {
      dir: contentDir,
      upstream: client.base,
      collections: loaded.collections.length,
      artworks: loaded.artworks.length,
      unlisted,
      rooms: loaded.rooms.length,
      files: stats,
      warnings,
      ms: Math.round(performance.now() - started),
    };
    return summary;
  } catch (err) {
    await fs.rm(staging, { recursive: true, force: true });
    if (err instanceof SyncError) throw err;
    throw new SyncError(`sync failed: ${oneLine(err)}`);
  }
}

/** The store's records, mapped to content records; its rooms are mapped once their files are synced. */
async function readStore(
  client: StoreClient,
  log: (line: string) => void,
  warnings: string[],
): Promise<MappedArtworks & { collections: ContentCollection[]; storeRooms: StoreRecord[] }> {
  log(`sync: reading ${client.base}`);
  // One collection after the other: a failure names the first thing that broke, and nothing
  // keeps retrying in the background after it.
  const storeCollections = await client.readAll('collections');
  const storeNfts = await client.readAll('nfts');
  const storeRooms = await client.readAll('rooms');
  log(`sync: ${storeCollections.length} collections, ${storeNfts.length} artworks, ${storeRooms.length} rooms in the store`);
  const collections = mapCollections(storeCollections, warnings);
  const { artworks, unlisted } = mapArtworks(client.base, storeNfts, collections, warnings);
  if (unlisted > 0) log(`sync: ${unlisted} artwork records have no media_info (not listed): not synced`);
  return { collections, artworks, unlisted, storeRooms };
}

type FileKind = 'model' | 'image';

interface FileFetcher {
  /** The file's name in the staging directory, or null when unusable. */
  fetch(id: string, kind: FileKind): Promise<string | null>;
  /** The first failure, once one happened. */
  readonly failed: unknown;
}

/** Files: each distinct file id synced once, a few at a time (`limit`). */
function fileFetcher(
  limit: <T>(task: () => Promise<T>) => Promise<T>,
  sync: (id: string, kind: FileKind) => Promise<string | null>,
): FileFetcher {
  const fileNames = new Map<string, Promise<string | null>>();
  let failed: unknown = null;
  return {
    fetch(id, kind) {
      let pending = fileNames.get(id);
      if (!pending) {
        pending = limit(async () => {
          if (failed) throw failed; // after one failure, queued downloads are not started
          return sync(id, kind).catch((err: unknown) => {
            failed ??= err;
            throw err;
          });
        });
        fileNames.set(id, pending);
      }
      return pending;
    },
    get failed() {
      return failed;
    },
  };
}

/** The published rooms whose files could be synced; the others are skipped with a warning. */
async function syncRooms(storeRooms: StoreRecord[], files: FileFetcher, warnings: string[]): Promise<ContentRoom[]> {
  // allSettled: the staging directory is removed only after every download in flight has stopped.
  const roomResults = await Promise.allSettled(storeRooms.filter(isPublished).map((r) => syncRoom(r, files, warnings)));
  const rejected = roomResults.find((r) => r.status === 'rejected');
  if (rejected) throw files.failed ?? rejected.reason;
  return roomResults.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
}

/** One room record as a content room, with its model (and preview) file synced; null when skipped. */
async function syncRoom(r: StoreRecord, files: FileFetcher, warnings: string[]): Promise<ContentRoom | null> {
  const modelId = fileId(r.model);
  if (!modelId) {
    warnings.push(`room ${String(r.id)} skipped: it has no model file`);
    return null;
  }
  const imageId = fileId(r.image);
  const [model, image] = await Promise.all([files.fetch(modelId, 'model'), imageId ? files.fetch(imageId, 'image') : null]);
  if (!model) {
    warnings.push(`room ${String(r.id)} skipped: its model file ${shownId(modelId)} could not be used`);
    return null;
  }
  const parsed = ContentRoom.safeParse({
    id: Number(r.id),
    title: r.title,
    architect: r.architect,
    description: r.description,
    series: r.series,
    slots: typeof r.slots === 'string' && r.slots.trim() !== '' ? Number(r.slots) : r.slots,
    token_id: r.token_id,
    model: `${FILES_DIR}/${model}`,
    image: image ? `${FILES_DIR}/${image}` : null,
    ...(r.kind === 'room' || r.kind === 'sculpture' ? { kind: r.kind } : {}),
  });
  if (!parsed.success) {
    warnings.push(`room ${String(r.id)} skipped: ${describeIssue(parsed.error)}`);
    return null;
  }
  return parsed.data;
}

/** The content files (records sorted by id) and the sync state, written into `dir`. */
async function writeContent(dir: string, content: Omit<Content, 'dir'>, state: SyncState): Promise<void> {
  const byId = <T extends { id: number }>(list: T[]) => [...list].sort((a, b) => a.id - b.id);
  const write = (file: string, value: unknown) => writeFileAtomic(join(dir, file), `${JSON.stringify(value, null, 1)}\n`);
  await Promise.all([
    write(CONTENT_FILES.collections, byId(content.collections)),
    write(CONTENT_FILES.artworks, byId(content.artworks)),
    write(CONTENT_FILES.rooms, byId(content.rooms)),
    write(SYNC_STATE, {
      upstream: state.upstream,
      files: Object.fromEntries(Object.entries(state.files).sort(([a], [b]) => a.localeCompare(b))),
    }),
  ]);
}

async function readSyncState(contentDir: string, upstream: string): Promise<SyncState | null> {
  const text = await fs.readFile(join(contentDir, SYNC_STATE), 'utf8').catch(() => null);
  if (!text) return null;
  try {
    const state = SyncState.parse(JSON.parse(text));
    return state.upstream === upstream ? state : null; // files of another store are not reused
  } catch {
    return null;
  }
}

/**
 * Download (or reuse) one file into the staging directory; its file name, or null when unusable.
 * A file kept from the previous sync is reused without a download when its `/files/<id>` version
 * (size, modified time) is unchanged, or when the store answers its ETag with 304.
 */
async function syncFile(
  client: StoreClient,
  id: string,
  kind: FileKind,
  staging: string,
  contentDir: string,
  previous: SyncState | null,
  state: SyncState,
  stats: SyncSummary['files'],
  warnings: string[],
): Promise<string | null> {
  const known = previous?.files[id];
  const knownPath = known ? join(contentDir, FILES_DIR, known.name) : null;
  const usable =
    knownPath && known
      ? await fs.stat(knownPath).then(
          (s) => s.size === known.bytes,
          () => false,
        )
      : false;
  const version = await client.fileVersion(id);
  const reuse = async () => {
    const dest = join(staging, FILES_DIR, known!.name);
    await fs.link(knownPath!, dest).catch(() => fs.copyFile(knownPath!, dest));
    state.files[id] = { ...known!, version: version ?? known!.version };
    stats.reused++;
    return known!.name;
  };
  if (usable && version !== null && version === known!.version) return reuse();
  const temp = join(staging, FILES_DIR, `${id}.part`);
  // Its name must fit this file system (a 300-character id does not): such a file skips its record.
  const unstorable = await fs.writeFile(temp, '').then(
    () => fs.rm(temp).then(() => null),
    (err: NodeJS.ErrnoException) => {
      if (err.code && UNSTORABLE.has(err.code)) return err.code;
      throw err;
    },
  );
  if (unstorable) {
    warnings.push(`file ${shownId(id)} cannot be stored under its id here (${unstorable})`);
    return null;
  }
  const result = await client.download(id, temp, usable ? known!.etag : null);
  if (result.status === 'not-modified') return reuse();
  if (result.status === 'missing') {
    warnings.push(`file ${id} is not readable in the store (HTTP ${result.http})`);
    return null;
  }
  const ext = kind === 'model' ? await modelExtension(temp) : IMAGE_EXTENSIONS[result.type];
  if (!ext) {
    await fs.rm(temp, { force: true });
    warnings.push(kind === 'model' ? `file ${id} is not a GLB or glTF model` : `file ${id} has an unsupported image type "${result.type}"`);
    return null;
  }
  const name = `${id}.${ext}`;
  await fs.rename(temp, join(staging, FILES_DIR, name));
  state.files[id] = { name, etag: result.etag, bytes: result.bytes, version };
  stats.downloaded++;
  stats.bytes += result.bytes;
  return name;
}

/** `glb` for binary glTF, `gltf` for JSON glTF, null otherwise (from the bytes, not the name). */
async function modelExtension(path: string): Promise<'glb' | 'gltf' | null> {
  const handle = await fs.open(path, 'r');
  try {
    const head = Buffer.alloc(64);
    const { bytesRead } = await handle.read(head, 0, 64, 0);
    const start = head.subarray(0, bytesRead);
    if (start.subarray(0, 4).toString('latin1') === 'glTF') return 'glb';
    return /^\s*\{/.test(start.toString('utf8')) ? 'gltf' : null;
  } finally {
    await handle.close();
  }
}

/**
 * Replace `target` with `staging` by renames: the old directory is moved aside, the new one moved
 * in, and the old one removed. If moving the new one in fails, the old one is moved back.
 */
async function swapInto(staging: string, target: string): Promise<void> {
  const aside = `${target}.old-${randomBytes(6).toString('hex')}`;
  const hadPrevious = await fs.stat(target).then(
    () => true,
    () => false,
  );
  if (hadPrevious) await fs.rename(target, aside);
  try {
    await fs.rename(staging, target);
  } catch (err) {
    if (hadPrevious) await fs.rename(aside, target);
    throw err;
  }
  if (hadPrevious) await fs.rm(aside, { recursive: true, force: true });
}

function concurrencyLimit(n: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const queue: Array<() => void> = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= n) await new Promise<void>((r) => queue.push(r));
    active++;
    try {
      return await task();
    } finally {
      active--;
      queue.shift()?.();
    }
  };
}

// ---------------------------------------------------------------------------------------------
// CLI
