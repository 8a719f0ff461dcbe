/**
 * Artwork texture variants (server/view/textures.ts) against a real local media host: bounded
 * WebP output, memory and disk caches, the address guard (a loopback host is refused unless
 * allowed), size and time bounds, non-raster bodies refused, failures remembered, disk bound kept.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowHosts } from '../../../common/net.ts';
import { ArtworkTextures, type TextureOptions } from '../../../server/view/textures.ts';
import { startModelServer, type FakeModelServer } from '../../fakes/model-server.ts';

describe('artwork textures', () => {
  let media: FakeModelServer;
  let root: string;
  let n = 0;
  const make = (over: Partial<TextureOptions> = {}) =>
    new ArtworkTextures({
      cacheDir: join(root, `cache-${n++}`),
      policy: { allowHosts: parseAllowHosts(new URL(media.url).host), trustedOrigins: [] },
      log: pino({ level: 'silent' }),
      ...over,
    });

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'museum-textures-'));
    const wide = await sharp({ create: { width: 2400, height: 1200, channels: 3, background: '#2060c0' } })
      .png()
      .toBuffer();
    const small = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#c02020' } })
      .jpeg()
      .toBuffer();
    media = await startModelServer({
      '/wide.png': { body: wide },
      '/small.jpg': { body: small },
      '/chunked.png': { body: wide, chunked: true },
      '/slow.png': { body: small, stallFirst: 100, stallMs: 3_000 },
      '/drawing.svg': {
        body: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'),
      },
      '/gone.png': { body: small, status: 404 },
    });
  });

  afterAll(async () => {
    await media?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('makes a bounded WebP and serves it again from memory, then from disk', async () => {
    const textures = make();
    const bytes = await textures.variant(`${media.url}/wide.png`);
    const meta = await sharp(bytes).metadata();
    expect(meta.format).toBe('webp');
    expect([meta.width, meta.height]).toEqual([1024, 512]);
    // Small images are not enlarged.
    expect((await sharp(await textures.variant(`${media.url}/small.jpg`)).metadata()).width).toBe(64);
    await textures.variant(`${media.url}/wide.png`);
    expect(media.requests.get('/wide.png')).toBe(1);
    // Another process over the same cache directory reads the file, not the host.
    const sameDir = make({ cacheDir: join(root, 'cache-0') });
    expect(Buffer.compare(await sameDir.variant(`${media.url}/wide.png`), bytes)).toBe(0);
    expect(media.requests.get('/wide.png')).toBe(1);
  });

  it('refuses a loopback host unless it is allowed, without contacting it', async () => {
    const textures = make({ policy: { allowHosts: [], trustedOrigins: [] } });
    const before = media.requests.get('/small.jpg') ?? 0;
    await expect(textures.variant(`${media.url}/small.jpg`)).rejects.toThrow(/could not be fetched/);
    await expect(
      make({ policy: { allowHosts: [], trustedOrigins: [] } }).variant('http://169.254.169.254/latest/meta-data/x.png'),
    ).rejects.toThrow();
    expect(media.requests.get('/small.jpg') ?? 0).toBe(before);
  });

  it('bounds size and time, refuses non-raster bodies, and remembers a failure', async () => {
    await expect(make({ maxSourceBytes: 1_000 }).variant(`${media.url}/wide.png`)).rejects.toThrow(/too large/);
    await expect(make({ maxSourceBytes: 1_000 }).variant(`${media.url}/chunked.png`)).rejects.toThrow();
    await expect(make({ timeoutMs: 200 }).variant(`${media.url}/slow.png`)).rejects.toThrow();
    await expect(make().variant(`${media.url}/drawing.svg`)).rejects.toThrow(/not a raster image/);
    const textures = make();
    await expect(textures.variant(`${media.url}/gone.png`)).rejects.toThrow(/answered 404/);
    await expect(textures.variant(`${media.url}/gone.png`)).rejects.toThrow(/failed recently/);
    expect(media.requests.get('/gone.png')).toBe(1);
  });

  it('remembers no failure when failureTtlMs is 0', async () => {
    const textures = make({ failureTtlMs: 0 });
    const before = media.requests.get('/gone.png') ?? 0;
    await expect(textures.variant(`${media.url}/gone.png`)).rejects.toThrow(/answered 404/);
    await expect(textures.variant(`${media.url}/gone.png`)).rejects.toThrow(/answered 404/);
    expect(media.requests.get('/gone.png')).toBe(before + 2);
  });

  it('keeps the disk cache under its byte bound, oldest out first', async () => {
    const dir = join(root, 'bounded');
    const textures = make({ cacheDir: dir, maxDiskBytes: 1, memoryEntries: 1 });
    await textures.variant(`${media.url}/wide.png`);
    await textures.variant(`${media.url}/small.jpg`);
    // Only the newest file stays (each alone is over the bound, and the newest is always kept).
    expect(readdirSync(dir).filter((f) => f.endsWith('.webp'))).toHaveLength(1);
  });

  it('evicts the least recently used file from disk: reading a file from disk counts as a use', async () => {
    const [wide, small, chunked] = ['wide.png', 'small.jpg', 'chunked.png'].map((name) => `${media.url}/${name}`) as [
      string,
      string,
      string,
    ];
    const sizing = make();
    const [wideBytes, smallBytes] = [(await sizing.variant(wide)).length, (await sizing.variant(small)).length];
    const fileOf = (url: string) => `${createHash('sha256').update(`tex1\n1024\n${url}`).digest('hex').slice(0, 40)}.webp`;
    const dir = join(root, 'lru');
    // Room for the two wide variants (wide.png and chunked.png are the same image) and the small one, less a byte.
    const textures = make({ cacheDir: dir, maxDiskBytes: 2 * wideBytes + smallBytes - 1, memoryEntries: 1 });
    await textures.variant(wide);
    await textures.variant(small); // memory now holds only the small one
    await textures.variant(wide); // read from disk: now the most recently used file
    await textures.variant(chunked); // over budget: the small one goes, not the older wide one
    expect(
      readdirSync(dir)
        .filter((f) => f.endsWith('.webp'))
        .sort(),
    ).toEqual([fileOf(wide), fileOf(chunked)].sort());
  });
});
