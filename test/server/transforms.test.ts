/**
 * Image transforms on `/files/<sha256>.<ext>?width=&format=`: real resizing and re-encoding (checked by
 * decoding the answers), validation (400 envelope), no enlargement, content-addressed caching under
 * DATA_DIR/cache/variants (deterministic: a regenerated variant has the same bytes), 304 without
 * re-encoding, and the cache's size bound and bounded concurrency.
 */
import { createHash } from 'node:crypto';
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
    const { res, meta } = await fetchImage(`${png()}?width=128`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(meta).toMatchObject({ format: 'png', width: 128, height: 80 });
  });

  it('snaps ?width= up to the ladder (16, 32, 64, 128, 256, 512…): two widths in one step are one cache entry', async () => {
    const a = await fetchImage(`${png()}?width=130&format=webp`);
    const b = await fetchImage(`${png()}?width=255&format=webp`);
    expect(a.meta).toMatchObject({ width: 256, height: 160 });
    expect(b.res.headers.get('etag')).toBe(a.res.headers.get('etag'));
    expect(b.bytes.equals(a.bytes)).toBe(true);
    const sha = fx.files['room1.image']!.ref.sha256;
    expect(readdirSync(variantsDir).filter((f) => f.startsWith(`${sha}-w`) && f.endsWith('.webp') && /-w(130|255)\./.test(f))).toEqual([]);
    expect(existsSync(join(variantsDir, `${sha}-w256.webp`))).toBe(true);
    // 600 snaps to 768, above the 640-wide source: the source's own width.
    expect((await fetchImage(`${png()}?width=600&format=webp`)).meta).toMatchObject({ width: 640, height: 400 });
  });

  it('re-encodes to ?format= webp, jpeg, png and avif, alone or with a width', async () => {
    const expected = {
      webp: ['image/webp', 'webp'],
      jpeg: ['image/jpeg', 'jpeg'],
      png: ['image/png', 'png'],
      avif: ['image/avif', 'heif'],
    } as const;
    for (const [format, [type, decoded]] of Object.entries(expected)) {
      const { res, meta } = await fetchImage(`${jpg()}?format=${format}&width=200`);
      expect(res.status, format).toBe(200);
      expect(res.headers.get('content-type')).toBe(type);
      expect(meta).toMatchObject({ format: decoded, width: 256, height: 192 });
    }
    const full = await fetchImage(`${png()}?format=webp`);
    expect(full.meta).toMatchObject({ format: 'webp', width: 640, height: 400 });
  });

  it(
    'never enlarges: a width at or above the original gives the original size (the original file when the format is ' + 'unchanged)',
    async () => {
      const same = await fetchImage(`${png()}?width=4096`);
      expect(same.res.headers.get('etag')).toBe(`"${fx.files['room1.image']!.ref.sha256}"`);
      expect(same.bytes.equals(fx.files['room1.image']!.bytes)).toBe(true);
      const converted = await fetchImage(`${png()}?width=2000&format=jpeg`);
      expect(converted.meta).toMatchObject({ format: 'jpeg', width: 640, height: 400 });
      // Equivalent requests share one variant.
      const again = await fetchImage(`${png()}?width=3000&format=jpeg`);
      expect(again.res.headers.get('etag')).toBe(converted.res.headers.get('etag'));
    },
  );

  it('answers 400 in the envelope for invalid widths and formats, and for non-raster files', async () => {
    const bad = [
      '?width=15',
      '?width=4097',
      '?width=0',
      '?width=-20',
      '?width=abc',
      '?width=20.5',
      '?width=1e3',
      '?width=',
      '?width=%20100',
      '?format=gif',
      '?format=WEBP',
      '?format=',
      '?width=100&format=tiff',
    ];
    for (const query of bad) {
      expect(await errorOf(await server.get(`${png()}${query}`, { key: null })), query).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    }
    for (const role of ['room1.model', 'room1.slot_data']) {
      const ref = fx.files[role]!.ref;
      expect(await errorOf(await server.get(`/files/${ref.sha256}.${ref.ext}?width=100`, { key: null })), role).toMatchObject({
        status: 400,
        code: 'BAD_REQUEST',
      });
    }
    expect(await errorOf(await server.get(`/files/${'0'.repeat(64)}.png?width=100`, { key: null }))).toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
    });
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
    await fs.copyFile(
      join(artifactPaths(server.dataDir).files, `${fx.files['room1.image']!.ref.sha256}.png`),
      join(artifactPaths(dataDir).files, `${fx.files['room1.image']!.ref.sha256}.png`),
    );
    const files = new ArtifactFiles(artifactPaths(dataDir).files);
    const variants = new ImageVariants(dataDir, files, pino({ level: 'silent' }), { maxBytes: 25_000 });
    const { name, file } = await source(files);
    const sizes: number[] = [];
    for (const width of [16, 32, 64, 128]) {
      const out = await variants.variant(name, file, { width, format: 'png' });
      expect('size' in out).toBe(true);
      sizes.push((out as { size: number }).size);
      expect(await variants.cachedBytes()).toBeLessThanOrEqual(25_000);
    }
    const onDisk = readdirSync(variants.dir);
    expect(onDisk.length).toBeLessThan(4);
    // The most recent variant is always kept; the oldest went first.
    expect(onDisk).toContain(`${fx.files['room1.image']!.ref.sha256}-w128.png`);
    expect(onDisk).not.toContain(`${fx.files['room1.image']!.ref.sha256}-w16.png`);
    const total = onDisk.reduce((sum, f) => sum + statSync(join(variants.dir, f)).size, 0);
    expect(total).toBeLessThanOrEqual(25_000);
    expect(sizes.every((s) => s > 0)).toBe(true);
  });

  /** A source that takes a while to encode (noise, 2048²), so requests overlap; its own DATA_DIR. */
  async function slowSource(dir: string) {
    const dataDir = join(server.dataDir, '..', dir);
    await fs.mkdir(artifactPaths(dataDir).files, { recursive: true });
    const side = 2048;
    const raw = Buffer.alloc(side * side * 3);
    for (let i = 0; i < raw.length; i++) raw[i] = (i * 2654435761) >>> 24;
    const bytes = await sharp(raw, { raw: { width: side, height: side, channels: 3 } })
      .png({ compressionLevel: 1 })
      .toBuffer();
    const name = `${createHash('sha256').update(bytes).digest('hex')}.png`;
    await fs.writeFile(join(artifactPaths(dataDir).files, name), bytes);
    const files = new ArtifactFiles(artifactPaths(dataDir).files);
    return { dataDir, files, name, file: (await files.byName(name))! };
  }
  const busyOf = (outcomes: Array<PromiseSettledResult<unknown>>) =>
    outcomes
      .filter((o) => o.status === 'rejected')
      .map((o) => (o as PromiseRejectedResult).reason as { status: number; code: string; headers?: Record<string, string> });

  it('makes at most 2 uncached variants at a time per client and 4 in all; more are 503 BUSY with Retry-After', async () => {
    const { dataDir, files, name, file } = await slowSource('busy');
    const variants = new ImageVariants(dataDir, files, pino({ level: 'silent' }));
    // One client (two addresses of one /64), three different variants: two are made, one refused.
    const one = await Promise.allSettled(
      [512, 768, 1024].map((width, i) => variants.variant(name, file, { width, format: 'avif' }, undefined, `2001:db8:5:5::${i + 1}`)),
    );
    expect(one.filter((o) => o.status === 'fulfilled')).toHaveLength(2);
    expect(busyOf(one)).toEqual([expect.objectContaining({ status: 503, code: 'BUSY', headers: { 'Retry-After': '5' } })]);
    // Five clients, one variant each: four are made, one refused.
    const all = await Promise.allSettled(
      [1536, 256, 128, 64, 32].map((width, i) => variants.variant(name, file, { width, format: 'avif' }, undefined, `198.51.100.${i + 1}`)),
    );
    expect(all.filter((o) => o.status === 'fulfilled')).toHaveLength(4);
    expect(busyOf(all)).toEqual([expect.objectContaining({ status: 503, code: 'BUSY' })]);
  });

  it('serves cached variants, and waits for one being made, while the bounds refuse new ones', async () => {
    const { dataDir, files, name, file } = await slowSource('busy-cached');
    const variants = new ImageVariants(dataDir, files, pino({ level: 'silent' }));
    const client = '198.51.100.9';
    await variants.variant(name, file, { width: 16, format: 'webp' }, undefined, client);
    // Three new variants at once, large enough to take a while: which two are admitted depends on their
    // I/O order, so any one may be the one refused.
    const widths = [1024, 1536, 2048];
    const outcomes = widths.map((width) =>
      variants.variant(name, file, { width, format: 'avif' }, undefined, client).then(
        () => ({ width, refused: null }),
        (err: unknown) => ({ width, refused: err }),
      ),
    );
    const refused = await Promise.race([
      new Promise<{ width: number; refused: unknown }>((found) => {
        for (const outcome of outcomes) void outcome.then((o) => o.refused && found(o));
      }),
      Promise.all(outcomes).then(() => ({ width: 0, refused: null })),
    ]);
    expect(refused.refused).toMatchObject({ status: 503, code: 'BUSY' });
    // The same client: a cached variant, and one already being made (no new work), are answered.
    const cached = await variants.variant(name, file, { width: 16, format: 'webp' }, undefined, client);
    expect(cached).toMatchObject({ size: expect.any(Number) });
    const beingMade = widths.find((width) => width !== refused.width)!;
    const joined = await variants.variant(name, file, { width: beingMade - 1, format: 'avif' }, undefined, client);
    expect(joined).toMatchObject({ size: expect.any(Number) });
    expect((await Promise.all(outcomes)).filter((o) => o.refused)).toHaveLength(1);
  });

  it('through HTTP: 503 BUSY in the envelope with Retry-After, per client behind TRUST_PROXY', async () => {
    const { dataDir, name } = await slowSource('busy-http');
    const s = await startTestServer({ dataDir, env: { TRUST_PROXY: 'true' } });
    try {
      const get = (width: number, ip: string) =>
        s.get(`/files/${name}?width=${width}&format=avif`, { key: null, headers: { 'x-forwarded-for': ip } });
      const answers = await Promise.all([64, 128, 256].map((width) => get(width, '203.0.113.50')));
      const refused = answers.filter((r) => r.status === 503);
      expect(answers.filter((r) => r.status === 200)).toHaveLength(2);
      expect(refused).toHaveLength(1);
      expect(refused[0]!.headers.get('retry-after')).toBe('5');
      expect(await errorOf(refused[0]!)).toMatchObject({ status: 503, code: 'BUSY' });
      // Retried once the others are made, it is made.
      expect((await get(256, '203.0.113.50')).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});
