import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadContent } from '../../bake/content.ts';
import { SyncError, syncContent } from '../../bake/sync.ts';
import { startCanary } from '../fakes/canary.ts';
import { type DirectusFake, sampleContentStore, startFakeDirectus } from '../fakes/directus.ts';

const TOKEN = 'content-token';
let fake: DirectusFake;
let tmp: string;
let n = 0;

beforeAll(async () => {
  fake = await startFakeDirectus({ token: TOKEN, characters: 0, content: sampleContentStore({ artworks: 250 }) });
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
    expect(content.artworks).toHaveLength(249); // one draft record is not synced
    expect(content.artworks.map((a) => a.id)).toEqual(fake.items.nfts!.filter((r) => r.status === 'published').map((r) => r.id));
    const store = fake.items.nfts![0]!;
    expect(content.artworks[0]).toMatchObject({ id: store.id, name: store.name, artist_name: store.artist_name, image_url: store.image_url, width: store.width });
    expect(content.collections.map((c) => [c.id, c.status, c.parent])).toEqual([
      [1, 'published', null],
      [2, 'published', 1],
      [3, 'published', null],
      [4, 'draft', null],
    ]);
    expect(summary).toMatchObject({ collections: 4, artworks: 249, rooms: 3, files: { downloaded: 5, reused: 0 } });
    expect(leftovers()).toEqual([]);
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
    expect(content.rooms.find((r) => r.id === 1)!.kind).toBe('room');
    expect(content.rooms.find((r) => r.id === 2)!.kind).toBeUndefined();
  });

  it('is deterministic and reuses unchanged files on the next sync', async () => {
    const dir = freshDir();
    await sync(dir);
    const first = snapshotDir(dir);
    const assetsBefore = fake.requestsTo(/^\/assets\//).length;
    const again = await sync(dir);
    expect(again.files).toEqual({ downloaded: 0, reused: 5, bytes: 0 });
    expect(fake.requestsTo(/^\/assets\//).slice(assetsBefore).every((r) => r.status === 304)).toBe(true);
    expect(snapshotDir(dir)).toEqual(first);
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
    expect((error as Error).message).toBe(`content store at ${closed}: reading collections (offset 0) failed after 2 attempts: unreachable (ECONNREFUSED)`);
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

  it('trusts the store but checks where it redirects: an asset redirected inward fails the sync with one line, the token stays home', async () => {
    const inside = await startCanary();
    const store = await startCanary((req, res) => {
      const path = new URL(req.url!, 'http://x').pathname;
      if (path === '/items/rooms') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ id: 1, title: 'R', slots: 2, model: 'm1', image: null }] }));
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
        `content store at ${store.url}: ${inside.url}/latest/meta-data/ refused: 127.0.0.1:${inside.port} is a loopback address (allow the host with BAKE_ALLOW_HOSTS)`,
      );
      expect(inside.requests).toEqual([]);
      expect(store.requests.every((r) => r.headers.authorization === `Bearer ${TOKEN}`)).toBe(true);
      expect(snapshotDir(dir)).toEqual(before);
    } finally {
      await Promise.all([inside.close(), store.close()]);
    }
  });

  it('keeps the previous content when the store answers garbage', async () => {
    const dir = previousContent();
    const before = snapshotDir(dir);
    fake.fault('/items/collections', { kind: 'garbage' });
    await expect(sync(dir, { retries: 1 })).rejects.toThrow(/reading collections \(offset 0\) failed after 2 attempts: the answer is not JSON/);
    expect(snapshotDir(dir)).toEqual(before);
  });

  it('skips records the bake cannot use, with a warning each, and syncs the rest', async () => {
    const content = sampleContentStore({ artworks: 5, rooms: 3 });
    content.rooms![1]!.model = null;
    content.rooms![2]!.model = 'deleted-file';
    content.nfts![0]!.collection = null;
    content.collections!.push({ id: 9, name: 'Orphan', title: '', description: '', slug: 'orphan', status: 'published', parent_collection: 77 });
    const store = await startFakeDirectus({ characters: 0, content });
    try {
      const summary = await syncContent({ upstreamUrl: store.url, contentDir: freshDir(), backoffMs: 5 });
      expect(summary).toMatchObject({ rooms: 1, artworks: 4, collections: 5 });
      expect(summary.warnings).toEqual([
        'artwork 1000 skipped: collection: Invalid input: expected string, received null',
        'collection 9: parent 77 is not in the store; kept unpublished',
        'file deleted-file is not readable in the store (HTTP 403)',
        'room 2 skipped: it has no model file',
        'room 3 skipped: its model file deleted-file could not be used',
      ]);
    } finally {
      await store.close();
    }
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
    expect(JSON.parse(stdout)).toMatchObject({ dir, artworks: 249, rooms: 3, collections: 4 });
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
