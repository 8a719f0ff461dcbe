/**
 * Image transforms on `/files/<sha256>.<ext>?width=&format=`: real resizing and re-encoding (checked by
 * decoding the answers), validation (400 envelope), no enlargement, content-addressed caching under
 * DATA_DIR/cache/variants (deterministic: a regenerated variant has the same bytes), 304 without
 * re-encoding, and the cache's size bound and bounded concurrency.
 */
import { existsSync, promises as fs, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactPaths } from '../../artifacts/format.ts';
import { ArtifactFiles } from '../../server/artifact-files.ts';
import { ImageVariants } from '../../server/image-variants.ts';
import { type FixtureBake, publishFixtureBake } from '../helpers/artifacts.ts';
import { errorOf, startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;
let fx: FixtureBake;
let variantsDir: string;

beforeAll(async () => {
  server = await startTestServer();
  fx = await publishFixtureBake(server.dataDir);
  await server.services.content.reload();
  variantsDir = join(artifactPaths(server.dataDir).cache, 'variants');
});
afterAll(() => server.close());

const png = () => `/files/${fx.files['room1.image']!.ref.sha256}.png`;
const jpg = () => `/files/${fx.files['room2.image']!.ref.sha256}.jpg`;
const fetchImage = async (path: string, headers: Record<string, string> = {}) => {
  const res = await server.get(path, { key: null, headers });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { res, bytes, meta: res.status === 200 ? await sharp(bytes).metadata() : null };
};

describe('transforms', () => {
  it('resizes to ?width= keeping the aspect ratio and the format', async () => {
    const { res, meta } = await fetchImage(`${png()}?width=160`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(meta).toMatchObject({ format: 'png', width: 160, height: 100 });
  });

  it('re-encodes to ?format= webp, jpeg, png and avif, alone or with a width', async () => {
    const expected = { webp: ['image/webp', 'webp'], jpeg: ['image/jpeg', 'jpeg'], png: ['image/png', 'png'], avif: ['image/avif', 'heif'] } as const;
    for (const [format, [type, decoded]] of Object.entries(expected)) {
      const { res, meta } = await fetchImage(`${jpg()}?format=${format}&width=200`);
      expect(res.status, format).toBe(200);
      expect(res.headers.get('content-type')).toBe(type);
      expect(meta).toMatchObject({ format: decoded, width: 200, height: 150 });
    }
    const full = await fetchImage(`${png()}?format=webp`);
    expect(full.meta).toMatchObject({ format: 'webp', width: 640, height: 400 });
  });

  it('never enlarges: a width at or above the original gives the original size (the original file when the format is unchanged)', async () => {
    const same = await fetchImage(`${png()}?width=4096`);
    expect(same.res.headers.get('etag')).toBe(`"${fx.files['room1.image']!.ref.sha256}"`);
    expect(same.bytes.equals(fx.files['room1.image']!.bytes)).toBe(true);
    const converted = await fetchImage(`${png()}?width=2000&format=jpeg`);
    expect(converted.meta).toMatchObject({ format: 'jpeg', width: 640, height: 400 });
    // Equivalent requests share one variant.
    const again = await fetchImage(`${png()}?width=3000&format=jpeg`);
    expect(again.res.headers.get('etag')).toBe(converted.res.headers.get('etag'));
  });

  it('answers 400 in the envelope for invalid widths and formats, and for non-raster files', async () => {
    const bad = ['?width=15', '?width=4097', '?width=0', '?width=-20', '?width=abc', '?width=20.5', '?width=1e3', '?width=', '?width=%20100', '?format=gif', '?format=WEBP', '?format=', '?width=100&format=tiff'];
    for (const query of bad) {
      expect(await errorOf(await server.get(`${png()}${query}`, { key: null })), query).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    }
    for (const role of ['room1.model', 'room1.slot_data']) {
      const ref = fx.files[role]!.ref;
      expect(await errorOf(await server.get(`/files/${ref.sha256}.${ref.ext}?width=100`, { key: null })), role).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    }
    expect(await errorOf(await server.get(`/files/${'0'.repeat(64)}.png?width=100`, { key: null }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    // Unrelated query parameters do not make a transform.
    const plain = await fetchImage(`${png()}?v=3`);
    expect(plain.bytes.equals(fx.files['room1.image']!.bytes)).toBe(true);
  });

  it('caches variants content-addressed on disk; a regenerated variant is byte-identical', async () => {
    const path = `${png()}?width=64&format=webp`;
    const first = await fetchImage(path);
    const name = `${fx.files['room1.image']!.ref.sha256}-w64.webp`;
    expect(first.res.headers.get('etag')).toBe(`"${fx.files['room1.image']!.ref.sha256}-w64-webp"`);
    expect(existsSync(join(variantsDir, name))).toBe(true);
    expect((await fs.readFile(join(variantsDir, name))).equals(first.bytes)).toBe(true);
    const second = await fetchImage(path);
    expect(second.bytes.equals(first.bytes)).toBe(true);
    // A fresh server (empty memory cache) over a DATA_DIR without the cached file regenerates the same bytes.
    await fs.rm(join(variantsDir, name));
    const other = await startTestServer({ dataDir: server.dataDir });
    try {
      await other.services.content.reload();
      const regenerated = Buffer.from(await (await other.get(path, { key: null })).arrayBuffer());
      expect(regenerated.equals(first.bytes)).toBe(true);
    } finally {
      await other.close();
    }
  });

  it('answers 304 for a variant the client has, and serves Range and HEAD on variants', async () => {
    const path = `${png()}?width=100`;
    const first = await fetchImage(path);
    const etag = first.res.headers.get('etag')!;
    const revalidated = await server.get(path, { key: null, headers: { 'If-None-Match': etag } });
    expect(revalidated.status).toBe(304);
    const part = await server.get(path, { key: null, headers: { Range: 'bytes=0-7' } });
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer()).equals(first.bytes.subarray(0, 8))).toBe(true);
    const head = await server.get(path, { key: null, method: 'HEAD' });
    expect(head.headers.get('content-length')).toBe(String(first.bytes.length));
  });
});

describe('ImageVariants limits', () => {
  const source = async (files: ArtifactFiles) => {
    const ref = fx.files['room1.image']!.ref;
    const name = `${ref.sha256}.png`;
    return { name, file: (await files.byName(name))! };
  };

  it('keeps the cache under its byte bound, evicting the least recently used variants', async () => {
    const dataDir = join(server.dataDir, '..', 'bounded');
    await fs.mkdir(artifactPaths(dataDir).files, { recursive: true });
    await fs.copyFile(join(artifactPaths(server.dataDir).files, `${fx.files['room1.image']!.ref.sha256}.png`), join(artifactPaths(dataDir).files, `${fx.files['room1.image']!.ref.sha256}.png`));
    const files = new ArtifactFiles(artifactPaths(dataDir).files);
    const variants = new ImageVariants(dataDir, files, pino({ level: 'silent' }), { maxBytes: 100_000 });
    const { name, file } = await source(files);
    const sizes: number[] = [];
    for (const width of [100, 120, 140, 160, 180, 200]) {
      const out = await variants.variant(name, file, { width, format: 'png' });
      expect('size' in out).toBe(true);
      sizes.push((out as { size: number }).size);
      expect(await variants.cachedBytes()).toBeLessThanOrEqual(100_000);
    }
    const onDisk = readdirSync(variants.dir);
    expect(onDisk.length).toBeLessThan(6);
    // The most recent variant is always kept; the oldest went first.
    expect(onDisk).toContain(`${fx.files['room1.image']!.ref.sha256}-w200.png`);
    expect(onDisk).not.toContain(`${fx.files['room1.image']!.ref.sha256}-w100.png`);
    const total = onDisk.reduce((sum, f) => sum + statSync(join(variants.dir, f)).size, 0);
    expect(total).toBeLessThanOrEqual(100_000);
    expect(sizes.every((s) => s > 0)).toBe(true);
  });

  it('refuses transforms beyond its queue with 503 BUSY instead of piling them up', async () => {
    const files = new ArtifactFiles(artifactPaths(server.dataDir).files);
    const variants = new ImageVariants(join(server.dataDir, '..', 'busy'), files, pino({ level: 'silent' }), { concurrency: 1, maxQueue: 0 });
    const { name, file } = await source(files);
    const outcomes = await Promise.allSettled([300, 310, 320, 330].map((width) => variants.variant(name, file, { width, format: 'avif' })));
    const busy = outcomes.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason as { status: number; code: string });
    expect(outcomes.some((o) => o.status === 'fulfilled')).toBe(true);
    expect(busy.length).toBeGreaterThan(0);
    for (const reason of busy) expect(reason).toMatchObject({ status: 503, code: 'BUSY' });
  });
});
