import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadContent, publicCatalog } from '../../bake/content.ts';
import { SyncError, syncContent } from '../../bake/sync.ts';
import { startCanary } from '../fakes/canary.ts';
import { sampleContentStore, UNLISTED_NFT_ID } from '../fakes/content-store.ts';
import { type DirectusFake, startFakeDirectus } from '../fakes/directus.ts';

const TOKEN = 'content-token';
const SAMPLE = sampleContentStore({ artworks: 250 });
let fake: DirectusFake;
let tmp: string;
let n = 0;

beforeAll(async () => {
  fake = await startFakeDirectus({ token: TOKEN, characters: 0, content: SAMPLE });
  tmp = mkdtempSync(join(tmpdir(), 'sync-test-'));
});
afterAll(async () => {
  await fake?.close();
  rmSync(tmp, { recursive: true, force: true });
});
afterEach(() => fake.clearFaults());

const freshDir = () => join(tmp, `content-${++n}`);
const sync = (contentDir: string, extra: Partial<Parameters<typeof syncContent>[0]> = {}) =>
  syncContent({ upstreamUrl: fake.url, token: TOKEN, contentDir, backoffMs: 5, timeoutMs: 1_000, fileTimeoutMs: 1_000, ...extra });

/** Every file under a directory with its bytes, to prove a directory was left untouched. */
function snapshotDir(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) {
      const path = join(entry.parentPath, entry.name);
      out[path.slice(dir.length)] = readFileSync(path).toString('base64');
    }
  }
  return out;
}

function previousContent(): string {
  const dir = freshDir();
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'rooms.json'), JSON.stringify([{ id: 9, title: 'Old room', slots: 2, model: 'old.glb' }]));
  writeFileSync(join(dir, 'old.glb'), 'old model bytes');
  return dir;
}
/** A URL nothing listens on. */
async function closedPortUrl(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
const leftovers = () => readdirSync(tmp).filter((name) => name.includes('.sync-') || name.includes('.old-'));

/** A fake store of its own (e.g. with changed records), closed after `use`. */
async function withStore<T>(options: Parameters<typeof startFakeDirectus>[0], use: (store: DirectusFake) => Promise<T>): Promise<T> {
  const store = await startFakeDirectus({ characters: 0, ...options });
  try {
    return await use(store);
  } finally {
    await store.close();
  }
}
const syncFrom = (store: DirectusFake, contentDir: string, extra: Partial<Parameters<typeof syncContent>[0]> = {}) =>
  syncContent({ upstreamUrl: store.url, contentDir, backoffMs: 5, timeoutMs: 1_000, fileTimeoutMs: 1_000, ...extra });

describe('syncContent', () => {
  it('pages through every collection and writes a content source the bake loads', async () => {
    const dir = freshDir();
    const before = fake.requestsTo('/items/nfts').length;
    const summary = await sync(dir);
    const nftPages = fake.requestsTo('/items/nfts').slice(before);
    expect(nftPages.map((r) => r.query.get('offset'))).toEqual(['0', '100', '200']);
    expect(nftPages.every((r) => r.query.get('limit') === '100' && r.query.get('sort') === 'id')).toBe(true);
    expect(nftPages.every((r) => r.headers.authorization === `Bearer ${TOKEN}`)).toBe(true);

    const content = await loadContent(dir);
    expect(content.artworks).toHaveLength(249); // the record without media_info is not listed
    expect(content.artworks.map((a) => a.id)).not.toContain(UNLISTED_NFT_ID);
    expect(content.collections.map((c) => [c.id, c.status, c.parent, c.sort])).toEqual([
      [1, 'published', null, 1],
      [2, 'published', 1, 1],
      [3, 'published', 1, 2],
      [4, 'published', null, 2],
      [5, 'draft', 4, 1],
      [6, 'draft', null, 3],
    ]);
    expect(summary).toMatchObject({ collections: 6, artworks: 249, unlisted: 1, rooms: 3, files: { downloaded: 5, reused: 0 } });
    expect(leftovers()).toEqual([]);
  });

  it('maps the real records back to the content they were made from: media blobs, marketplace record, both collections', async () => {
    const dir = freshDir();
    await sync(dir);
    const content = await loadContent(dir);
    // The fake store is derived from the sample content: a sync gives it back exactly.
    expect(content.collections).toEqual(SAMPLE.content.collections);
    expect(content.artworks).toEqual([...SAMPLE.content.artworks].sort((a, b) => a.id - b.id));
    const store = fake.items.nfts!.find((r) => r.id === 102)!;
    expect(store).toMatchObject({
      collection: 'first-season',
      collection_type: 2,
      response_opensea: { opensea_url: expect.stringMatching(/^https:/) },
    });
    const synced = content.artworks.find((a) => a.id === 102)!;
    expect(synced).toMatchObject({
      collection: 'first-season',
      museum_collection: 'founders-portraits',
      marketplace_url: (store.response_opensea as { opensea_url: string }).opensea_url,
    });

    // What the bake publishes from it: normalized media for every work that has any.
    const { artworks } = publicCatalog(content, { ipfsGateway: 'https://gw.example' });
    const byId = new Map(artworks.map((a) => [a.id, a]));
    expect(byId.get(102)!.media?.url).toBe('https://media.museum.example/works/102-display.png');
    expect(byId.get(104)!.media).toMatchObject({ url: 'https://media.museum.example/originals/104.png', width: null });
    expect(byId.get(110)!.animation?.url).toMatch(/^https:\/\/gw\.example\/ipfs\//);
    expect(artworks.filter((a) => a.media === null).map((a) => a.id)).toEqual([112]);
    expect(artworks.filter((a) => a.ratio !== 1).length).toBeGreaterThan(200);
  });

  it('downloads room models and previews byte for byte', async () => {
    const dir = freshDir();
    await sync(dir);
    const content = await loadContent(dir);
    for (const room of content.rooms) {
      const store = fake.items.rooms!.find((r) => r.id === room.id)!;
      expect(room.model).toBe(`files/${store.model as string}.glb`);
      expect(readFileSync(join(dir, room.model))).toEqual(Buffer.from(fake.files.get(store.model as string)!.data));
      if (store.image === null) expect(room.image).toBeNull();
      else {
        expect(room.image).toBe(`files/${store.image as string}.png`);
        expect(readFileSync(join(dir, room.image!))).toEqual(Buffer.from(fake.files.get(store.image as string)!.data));
      }
      expect(room).toMatchObject({ title: store.title, slots: store.slots, token_id: store.token_id });
    }
  });

  it('is deterministic and reuses unchanged files by their /files metadata, without ETags and without downloading', async () => {
    const dir = freshDir();
    await sync(dir);
    const first = snapshotDir(dir);
    expect(fake.requestsTo(/^\/assets\//).every((r) => r.headers['if-none-match'] === undefined)).toBe(true); // the store sends no ETag
    const assetsBefore = fake.requestsTo(/^\/assets\//).length;
    const metaBefore = fake.requestsTo(/^\/files\//).length;
    const again = await sync(dir);
    expect(again.files).toEqual({ downloaded: 0, reused: 5, bytes: 0 });
    expect(fake.requestsTo(/^\/assets\//).length).toBe(assetsBefore);
    expect(fake.requestsTo(/^\/files\//).length - metaBefore).toBe(5);
    expect(snapshotDir(dir)).toEqual(first);
  });

  it('downloads a file again when the store changed it (size or modified time)', async () => {
    const content = sampleContentStore({ artworks: 20 });
    await withStore({ content }, async (store) => {
      const dir = freshDir();
      await syncFrom(store, dir);
      const room = store.items.rooms![0]!;
      const changed = Buffer.concat([Buffer.from(store.files.get(room.model as string)!.data), Buffer.alloc(4, 0x20)]);
      store.replaceFile(room.model as string, changed);
      const again = await syncFrom(store, dir);
      expect(again.files).toMatchObject({ downloaded: 1, reused: 4, bytes: changed.byteLength });
      expect(readFileSync(join(dir, `files/${room.model as string}.glb`))).toEqual(changed);
      // Same size, new modified time: downloaded again too.
      store.replaceFile(room.model as string, changed);
      expect((await syncFrom(store, dir)).files).toMatchObject({ downloaded: 1, reused: 4 });
    });
  });

  it('revalidates with the ETag when the store has one and its metadata cannot be read', async () => {
    await withStore({ content: sampleContentStore({ artworks: 20 }), assetEtags: true }, async (store) => {
      const dir = freshDir();
      await syncFrom(store, dir);
      store.fault(/^\/files\//, { kind: 'status', status: 403 });
      const again = await syncFrom(store, dir);
      expect(again.files).toEqual({ downloaded: 0, reused: 5, bytes: 0 });
      expect(
        store
          .requestsTo(/^\/assets\//)
          .slice(-5)
          .every((r) => r.status === 304),
      ).toBe(true);
    });
  });

  it('pages with the limit a store allows when it caps ours (QUERY_LIMIT_MAX)', async () => {
    await withStore({ content: sampleContentStore({ artworks: 250 }), maxLimit: 40 }, async (store) => {
      const lines: string[] = [];
      const summary = await syncFrom(store, freshDir(), { log: (line) => lines.push(line) });
      expect(summary).toMatchObject({ collections: 6, artworks: 249, rooms: 3 });
      const refused = store.requests.filter((r) => r.status === 400);
      expect(refused).toHaveLength(1); // once: the limit it names is used from then on
      expect(refused[0]!.query.get('limit')).toBe('100');
      const nftPages = store.requestsTo('/items/nfts');
      expect(nftPages.map((r) => r.query.get('offset'))).toEqual(['0', '40', '80', '120', '160', '200', '240']);
      expect(nftPages.every((r) => r.query.get('limit') === '40')).toBe(true);
      expect(lines).toContain('sync: the store allows at most 40 records per request; paging with 40');
    });
  });

  it('pages on when a store silently answers fewer records than asked (the first page names the total)', async () => {
    await withStore({ content: sampleContentStore({ artworks: 250 }), silentMaxLimit: 60 }, async (store) => {
      const summary = await syncFrom(store, freshDir());
      expect(summary).toMatchObject({ collections: 6, artworks: 249, rooms: 3 });
      const nftPages = store.requestsTo('/items/nfts');
      expect(nftPages.map((r) => r.query.get('offset'))).toEqual(['0', '60', '120', '180', '240']);
      expect(nftPages[0]!.query.get('meta')).toBe('filter_count');
    });
  });

  it('fails with one clear line on any other 400, quoting the store', async () => {
    await withStore({ content: sampleContentStore({ artworks: 5 }) }, async (store) => {
      store.fault('/items/collections', { kind: 'status', status: 400 });
      const error = await syncFrom(store, freshDir()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SyncError);
      expect((error as Error).message).toMatch(/^content store at http:\/\/[^ ]+: reading collections \(offset 0\): HTTP 400/);
    });
  });

  it('retries 5xx answers, timeouts and resets, then succeeds', async () => {
    fake.fault('/items/nfts', { kind: 'status', status: 503, times: 2 });
    fake.fault('/items/rooms', { kind: 'timeout', times: 1 });
    fake.fault(/^\/assets\//, { kind: 'reset', times: 1 });
    const dir = freshDir();
    const summary = await sync(dir);
    expect(summary.artworks).toBe(249);
    expect(summary.rooms).toBe(3);
    expect(fake.requests.filter((r) => r.fault === 'status' && r.path === '/items/nfts')).toHaveLength(2);
  });

  it('fails with one clear line when the store is unreachable, leaving the previous content untouched', async () => {
    const dir = previousContent();
    const before = snapshotDir(dir);
    const closed = await closedPortUrl();
    const error = await sync(dir, { upstreamUrl: closed, retries: 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SyncError);
    expect((error as Error).message).toBe(
      `content store at ${closed}: reading collections (offset 0) failed after 2 attempts: unreachable (ECONNREFUSED)`,
    );
    expect(snapshotDir(dir)).toEqual(before);
    expect(leftovers()).toEqual([]);
  });

  it('keeps the previous content when the store keeps failing midway (a file download)', async () => {
    const dir = previousContent();
    const before = snapshotDir(dir);
    fake.fault(/^\/assets\//, { kind: 'status', status: 500 });
    await expect(sync(dir, { retries: 2 })).rejects.toThrow(/downloading file [\w-]+ failed after 3 attempts: HTTP 500/);
    expect(snapshotDir(dir)).toEqual(before);
    expect(leftovers()).toEqual([]);
  });

  it(
    'trusts the store but checks where it redirects: an asset redirected inward fails the sync with one line, the token stays ' + 'home',
    async () => {
      const inside = await startCanary();
      const store = await startCanary((req, res) => {
        const path = new URL(req.url!, 'http://x').pathname;
        if (path === '/items/rooms')
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ data: [{ id: 1, title: 'R', slots: 2, model: 'm1', image: null }] }));
        else if (path.startsWith('/items/')) res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":[]}');
        else if (path === '/assets/m1') res.writeHead(302, { location: `${inside.url}/latest/meta-data/` }).end();
        else res.writeHead(404).end();
      });
      try {
        const dir = previousContent();
        const before = snapshotDir(dir);
        const error = await sync(dir, { upstreamUrl: store.url, net: { allowHosts: [], trustedOrigins: [] } }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SyncError);
        expect((error as Error).message).toBe(
          `content store at ${store.url}: ${inside.url}/latest/meta-data/ refused: 127.0.0.1:${inside.port} is a loopback address (allow ` +
            `the host with BAKE_ALLOW_HOSTS)`,
        );
        expect(inside.requests).toEqual([]);
        expect(store.requests.every((r) => r.headers.authorization === `Bearer ${TOKEN}`)).toBe(true);
        expect(snapshotDir(dir)).toEqual(before);
      } finally {
        await Promise.all([inside.close(), store.close()]);
      }
    },
  );

  it('keeps the previous content when the store answers garbage', async () => {
    const dir = previousContent();
    const before = snapshotDir(dir);
    fake.fault('/items/collections', { kind: 'garbage' });
    await expect(sync(dir, { retries: 1 })).rejects.toThrow(
      /reading collections \(offset 0\) failed after 2 attempts: the answer is not JSON/,
    );
    expect(snapshotDir(dir)).toEqual(before);
  });

  it('skips records the bake cannot use, with a warning each, and syncs the rest', async () => {
    const content = sampleContentStore({ artworks: 30, rooms: 4 });
    content.rooms![1]!.model = null;
    content.rooms![2]!.model = 'deleted-file';
    // A model file that is an HTML page (an error page saved as the file).
    content.files![content.rooms![3]!.model as string] = {
      data: Buffer.from('<!doctype html><title>Error</title>'),
      type: 'text/html',
      filename: 'model.glb',
    };
    const nft = (id: number) => content.nfts!.find((r) => r.id === id)!;
    nft(1000).collection_type = 77; // a museum collection that is not in the store
    Object.assign(nft(1001), { media_info: { type: 'image', url: null }, response_opensea: null }); // set, but unusable
    // nothing live
    Object.assign(nft(1002), { media_info: { type: 'image', url: 'https://openseauserdata.com/gone.png' }, response_opensea: null });
    content.collections!.push({
      id: 9,
      name: 'Orphan',
      title: '',
      description: '',
      slug: 'orphan',
      status: 'published',
      parent_collection: 77,
    });
    await withStore({ content }, async (store) => {
      const summary = await syncFrom(store, freshDir());
      expect(summary).toMatchObject({ rooms: 1, artworks: 28, collections: 7 });
      const htmlModel = content.rooms![3]!.model as string;
      expect(summary.warnings).toEqual(
        [
          '3 artworks have no usable still image (media null): 112, 1001, 1002',
          'artwork 1000 skipped: its museum collection 77 is not in the store',
          'collection 9: parent 77 is not in the store; kept unpublished',
          `file ${htmlModel} is not a GLB or glTF model`,
          'file deleted-file is not readable in the store (HTTP 403)',
          'room 2 skipped: it has no model file',
          'room 3 skipped: its model file deleted-file could not be used',
          `room 4 skipped: its model file ${htmlModel} could not be used`,
        ].sort((a, b) => a.localeCompare(b, 'en', { numeric: true })),
      );
    });
  });

  it('skips a room whose file id cannot be stored here (300 characters: ENAMETOOLONG), with a warning; the rest syncs', async () => {
    const content = sampleContentStore({ artworks: 10, rooms: 3 });
    const longId = 'f'.repeat(300);
    const room = content.rooms![1]!;
    content.files![longId] = content.files![room.model as string]!;
    room.model = longId;
    await withStore({ content }, async (store) => {
      const summary = await syncFrom(store, freshDir());
      expect(summary.rooms).toBe(2);
      const shown = `${'f'.repeat(64)}… (300 characters)`;
      expect(summary.warnings).toContain(`file ${shown} cannot be stored under its id here (ENAMETOOLONG)`);
      expect(summary.warnings).toContain(`room ${String(room.id)} skipped: its model file ${shown} could not be used`);
    });
  });

  it('fails with one line, keeping the previous content, when a store pages on past the record cap', async () => {
    // Full pages of fresh records at every offset, for ever.
    const store = await startCanary((req, res) => {
      const url = new URL(req.url!, 'http://x');
      const offset = Number(url.searchParams.get('offset'));
      const limit = Number(url.searchParams.get('limit'));
      const data = Array.from({ length: limit }, (_, i) => ({
        id: offset + i + 1,
        name: `c${offset + i}`,
        slug: `c${offset + i}`,
        status: 'published',
      }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }));
    });
    try {
      const dir = previousContent();
      const before = snapshotDir(dir);
      const error = await sync(dir, { upstreamUrl: store.url, maxRecords: 1_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SyncError);
      expect((error as Error).message).toBe(
        `content store at ${store.url}: collections has more than 1000 records (the sync reads at most that many per collection)`,
      );
      expect(store.requests.length).toBe(11); // 1,100 records read, then it stopped
      expect(snapshotDir(dir)).toEqual(before);
      expect(leftovers()).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('refuses a page answer over 64 MB as it streams in, before parsing, keeping the previous content', async () => {
    // Up to 1 GB, chunked (no Content-Length): the sync must count the bytes and cut it off.
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    let sent = 0;
    const store = await startCanary((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"data":[');
      const more = () => {
        while (sent < 1024 * 1024 * 1024) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end(']}');
      };
      res.on('error', () => undefined);
      more();
    });
    try {
      const dir = previousContent();
      const before = snapshotDir(dir);
      const error = await sync(dir, { upstreamUrl: store.url, timeoutMs: 30_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SyncError);
      expect((error as Error).message).toBe(
        `content store at ${store.url}: reading collections (offset 0): the response is larger than 67108864 bytes`,
      );
      expect(store.requests).toHaveLength(1); // not retried
      expect(sent).toBeLessThan(128 * 1024 * 1024); // the connection was cut just past 64 MB
      expect(snapshotDir(dir)).toEqual(before);
    } finally {
      await store.close();
    }
  });

  it('refuses a page answer whose Content-Length is over the cap without reading it', async () => {
    const store = await startCanary((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2_000_000) });
      res.on('error', () => undefined);
      res.write('{"data":[]');
    });
    try {
      const error = await sync(freshDir(), { upstreamUrl: store.url, maxPageBytes: 1_000_000 }).catch((e: unknown) => e);
      expect((error as Error).message).toBe(
        `content store at ${store.url}: reading collections (offset 0): the response is larger than 1000000 bytes`,
      );
    } finally {
      await store.close();
    }
  });

  it('fails, keeping the previous content, when the records lack the fields it reads (another schema)', async () => {
    const content = sampleContentStore({ artworks: 10 });
    // The flat shape the sync used to read: no media blobs, no marketplace record.
    content.nfts = content.nfts!.map(({ id, name, artist_name, collection }) => ({
      id,
      name,
      artist_name,
      collection,
      image_url: `https://cdn.example/${id}.png`,
      width: 800,
      height: 600,
    }));
    await withStore({ content }, async (store) => {
      const dir = previousContent();
      const before = snapshotDir(dir);
      const error = await syncFrom(store, dir).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SyncError);
      expect((error as Error).message).toBe(
        `content store at ${store.url}: nfts records have no collection_type, media_info, display_media_info, display_animation_info, ` +
          `response_opensea: not the content store schema the sync reads (or the token's role may not read those fields)`,
      );
      expect(snapshotDir(dir)).toEqual(before);
      expect(store.requestsTo(/^\/(assets|files)\//)).toEqual([]); // nothing downloaded for nothing
    });
  });

  it('fails, keeping the previous content, when most listed artworks would have no media', async () => {
    const content = sampleContentStore({ artworks: 40 });
    // Blobs in a shape the sync does not read (`uri`), and no marketplace fallback.
    content.nfts = content.nfts!.map((r, i) =>
      i % 4 === 0 || r.media_info === null
        ? r
        : { ...r, media_info: { type: 'image', uri: 'https://cdn.example/x.png' }, display_media_info: null, response_opensea: null },
    );
    await withStore({ content }, async (store) => {
      const dir = previousContent();
      const before = snapshotDir(dir);
      const error = await syncFrom(store, dir).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SyncError);
      expect((error as Error).message).toMatch(
        new RegExp(
          '^content store at \\S+: 30 of 39 listed artworks would have no media \\(artwork \\d+: media_info has no url\\): ' +
            'the nfts records are not what the sync reads$',
        ),
      );
      expect(snapshotDir(dir)).toEqual(before);
    });
  });

  it('fails when no artwork record is listed at all', async () => {
    const content = sampleContentStore({ artworks: 6 });
    content.nfts = content.nfts!.map((r) => ({ ...r, media_info: null }));
    await withStore({ content }, async (store) => {
      await expect(syncFrom(store, freshDir())).rejects.toThrow(
        /none of the 6 nfts records has media_info set, so no artwork would be listed/,
      );
    });
  });

  it('refuses at once with a clear line when the token is wrong', async () => {
    const dir = previousContent();
    const before = fake.requests.length;
    await expect(sync(dir, { token: 'wrong' })).rejects.toThrow(/the token was refused \(check CONTENT_UPSTREAM_TOKEN\)/);
    expect(fake.requests.length - before).toBeLessThanOrEqual(3); // one request per collection, no retries
    await expect(sync(dir, { token: undefined })).rejects.toThrow(/access denied/);
    expect(existsSync(join(dir, 'old.glb'))).toBe(true);
  });
});

describe('museum bake sync', () => {
  it('syncs from the environment and prints one JSON summary', async () => {
    const dir = freshDir();
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/museum.js', 'bake', 'sync', '--content', dir, '--json'], {
      env: { ...process.env, CONTENT_UPSTREAM_URL: fake.url, CONTENT_UPSTREAM_TOKEN: TOKEN },
    });
    expect(JSON.parse(stdout)).toMatchObject({ dir, artworks: 249, unlisted: 1, rooms: 3, collections: 6 });
    expect((await loadContent(dir)).rooms).toHaveLength(3);
  });

  it('exits 1 with one line when no store is configured', async () => {
    const result = await promisify(execFile)(process.execPath, ['bin/museum.js', 'bake', 'sync', '--content', freshDir()], {
      env: { ...process.env, CONTENT_UPSTREAM_URL: '' },
    }).catch((e: { code: number; stderr: string }) => e);
    expect((result as { code: number }).code).toBe(1);
    expect((result as { stderr: string }).stderr.trim()).toBe('museum: CONTENT_UPSTREAM_URL is not set: nothing to sync from');
  });
});
