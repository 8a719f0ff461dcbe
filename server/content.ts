/**
 * The content snapshot: everything the server answers from the baked artifacts, loaded from one
 * published manifest and indexed once. A new bake is picked up without a restart: the watcher
 * builds the next snapshot completely, then swaps one reference, so a request sees the old
 * snapshot or the new one, never a mix.
 */
import { createHash } from 'node:crypto';
import { watch, type FSWatcher, promises as fs } from 'node:fs';
import type { Logger } from 'pino';
import {
  artifactPaths,
  type Artwork,
  type Collection,
  type FileRef,
  fileUrl,
  filePath,
  type Manifest,
  type ManifestRoom,
  type Room,
  readRoomSlotData,
} from '../artifacts/format.ts';
import { setImmediate as nextTick } from 'node:timers/promises';
import { emptyManifest } from '../artifacts/store.ts';
import { readManifestOffThread } from './manifest-off-thread.ts';

/** Artworks indexed per tick while a snapshot is built (issue 43: no long task on the event loop). */
const ARTWORKS_PER_TICK = 1_000;

/** A pre-serialized response body with its strong validator. */
export interface FrozenBody {
  body: Buffer;
  etag: string;
}

export const freeze = (value: unknown): FrozenBody => {
  const body = Buffer.from(JSON.stringify(value));
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"` };
};

/**
 * Memoize something derived from a snapshot (a pre-serialized list, a page cache): it is built once
 * per bake and lives exactly as long as the snapshot, so a request never pairs data of two bakes.
 */
export function perSnapshot<T>(derive: (snapshot: ContentSnapshot) => T): (snapshot: ContentSnapshot) => T {
  const memo = new WeakMap<ContentSnapshot, T>();
  return (snapshot) => {
    let value = memo.get(snapshot);
    if (value === undefined) {
      value = derive(snapshot);
      memo.set(snapshot, value);
    }
    return value;
  };
}

export interface ContentSnapshot {
  readonly manifest: Manifest;
  readonly rooms: Room[];
  readonly roomsById: ReadonlyMap<number, ManifestRoom>;
  /** `{ data: RoomSlotData }` per room, serialized once per bake. */
  readonly slotBodies: ReadonlyMap<number, FrozenBody>;
  /** Published top-level collections (with child_collections). */
  readonly topCollections: Collection[];
  readonly collectionsBySlug: ReadonlyMap<string, Collection>;
  /** Public artworks (what the API answers), in manifest order. */
  readonly artworks: Artwork[];
  readonly artworksById: ReadonlyMap<number, Artwork>;
  /** The museum collection slug of each artwork that has one (the list's `collection` filter matches it). */
  readonly museumCollectionOf: ReadonlyMap<number, string>;
  /** Lower-cased `title \n artist` per artwork, aligned with `artworks`, for search. */
  readonly artworkSearchText: string[];
  /** The still the bake stored for an artwork (a content file), by artwork id. */
  readonly storedStills: ReadonlyMap<number, FileRef>;
}

/** A manifest room as the API shows it: file references as URLs under PUBLIC_URL. */
function publicRoom(room: ManifestRoom, publicUrl: string): Room {
  const url = (ref: ManifestRoom['model']) => (ref ? fileUrl(publicUrl, ref) : null);
  return {
    id: room.id,
    title: room.title,
    architect: room.architect,
    description: room.description,
    series: room.series,
    slots: room.slots,
    // The content store may hand a token id over as a number; clients get one type.
    token_id: room.token_id === null ? null : String(room.token_id),
    image_url: url(room.image),
    thumbnail_url: url(room.thumbnail),
    model_url: url(room.model),
    model_optimized_url: url(room.model_optimized),
    slot_data_url: room.slot_data ? `${publicUrl}/v1/rooms/${room.id}/slots` : null,
    navmesh_url: url(room.navmesh ?? null),
    spawn: room.spawn ?? null,
    model_variants: (room.model_variants ?? []).map(({ name, file, extensions_required, max_texture_size }) => ({
      name,
      url: fileUrl(publicUrl, file),
      bytes: file.bytes,
      extensions_required,
      max_texture_size,
    })),
  };
}

async function buildSnapshot(dataDir: string, manifest: Manifest, publicUrl: string): Promise<ContentSnapshot> {
  const rooms: Room[] = [];
  const roomsById = new Map<number, ManifestRoom>();
  const slotBodies = new Map<number, FrozenBody>();
  for (const room of manifest.rooms) {
    roomsById.set(room.id, room);
    if (room.slot_data) {
      const data = readRoomSlotData(JSON.parse(await fs.readFile(filePath(dataDir, room.slot_data), 'utf8')), room);
      slotBodies.set(room.id, freeze({ data }));
    }
    rooms.push(publicRoom(room, publicUrl));
  }
  const collectionsBySlug = new Map(manifest.collections.map((c) => [c.slug, c]));
  const museumCollectionOf = new Map<number, string>();
  const artworks: Artwork[] = [];
  const artworksById = new Map<number, Artwork>();
  const artworkSearchText: string[] = [];
  const storedStills = new Map<number, FileRef>();
  for (const [i, { museum_collection, media_file, ...artwork }] of manifest.artworks.entries()) {
    if (i > 0 && i % ARTWORKS_PER_TICK === 0) await nextTick();
    if (museum_collection !== null) museumCollectionOf.set(artwork.id, museum_collection);
    if (media_file) storedStills.set(artwork.id, media_file);
    // A still the bake stored (a content file) is served by this server: its URL under PUBLIC_URL.
    const served = media_file && artwork.media ? { ...artwork, media: { ...artwork.media, url: fileUrl(publicUrl, media_file) } } : artwork;
    artworks.push(served);
    artworksById.set(served.id, served);
    artworkSearchText.push(`${served.name}\n${served.artist_name}`.toLowerCase());
  }
  return {
    manifest,
    rooms,
    roomsById,
    slotBodies,
    topCollections: manifest.collections.filter((c) => c.parent_collection === null),
    collectionsBySlug,
    artworks,
    artworksById,
    museumCollectionOf,
    artworkSearchText,
    storedStills,
  };
}

/** Holds the current snapshot and replaces it when a new manifest is published. */
export class ContentStore {
  private current: ContentSnapshot;
  private watcher: FSWatcher | null = null;
  private poll: NodeJS.Timeout | null = null;
  private loadedStamp = '';
  private reloading: Promise<void> | null = null;
  private readonly listeners = new Set<(s: ContentSnapshot) => void>();
  private closed = false;

  private constructor(
    readonly dataDir: string,
    private readonly publicUrl: string,
    private readonly log: Logger,
    initial: ContentSnapshot,
  ) {
    this.current = initial;
  }

  static async open(dataDir: string, publicUrl: string, log: Logger): Promise<ContentStore> {
    const store = new ContentStore(dataDir, publicUrl, log, await buildSnapshot(dataDir, emptyManifest(), publicUrl));
    await store.reload();
    return store;
  }

  get snapshot(): ContentSnapshot {
    return this.current;
  }

  /** Called with each new snapshot after it is installed. */
  onChange(listener: (s: ContentSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Load the published manifest if it changed; a broken publish keeps the previous snapshot. */
  reload(): Promise<void> {
    this.reloading ??= this.doReload().finally(() => {
      this.reloading = null;
    });
    return this.reloading;
  }

  private async doReload(): Promise<void> {
    const path = artifactPaths(this.dataDir).manifest;
    const stat = await fs.stat(path).catch(() => null);
    const stamp = stat ? `${stat.ino}:${stat.size}:${stat.mtimeMs}` : 'none';
    if (stamp === this.loadedStamp) return;
    try {
      // Parsed and validated in a worker thread: a large manifest never blocks requests (issue 43).
      const manifest = (await readManifestOffThread(this.dataDir)) ?? emptyManifest();
      const next = await buildSnapshot(this.dataDir, manifest, this.publicUrl);
      this.current = next;
      this.loadedStamp = stamp;
      this.log.info({ bakeId: manifest.bake_id, rooms: manifest.rooms.length }, 'content snapshot loaded');
      for (const listener of this.listeners) listener(next);
    } catch (err) {
      this.loadedStamp = stamp;
      this.log.error({ err }, 'could not load the published manifest; keeping the previous snapshot');
    }
  }

  /** Watch DATA_DIR for a new manifest (fs events, with a slow poll as a fallback). */
  watch(pollMs = 2_000): void {
    if (this.poll) return;
    void fs.mkdir(this.dataDir, { recursive: true }).then(() => {
      if (this.closed) return;
      try {
        this.watcher = watch(this.dataDir, (_event, name) => {
          if (name === 'manifest.json') void this.reload();
        });
        this.watcher.on('error', () => undefined);
      } catch {
        // fs.watch is unavailable on some filesystems; the poll still works.
      }
    });
    this.poll = setInterval(() => void this.reload(), pollMs).unref();
  }

  close(): void {
    this.closed = true;
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
    this.poll = null;
  }
}
