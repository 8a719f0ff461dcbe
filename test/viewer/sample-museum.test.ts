/**
 * The sample museum shows pictures, offline: a server baked from `museum bake sample` serves the
 * sample's own pictures (content files the bake stored) under /files, makes the viewer's textures
 * from those files directly (no outside host is allowed here, so nothing is fetched), and the sample
 * exhibition that `serve --dev-key` registers opens in Chromium with every artwork hung as a
 * picture, not a placeholder card, and no console error.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readManifest } from '../../artifacts/store.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { ensureSampleExhibition } from '../../server/sample-exhibition.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil, watchedPage } from '../helpers/chromium.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** The viewer's placeholder card colour (test/viewer/viewer-browser.test.ts). */
const CARD: [number, number, number] = [0x3a, 0x3f, 0x47];

describe('the sample museum', () => {
  let root: string;
  let content: string;
  let server: TestServer;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'museum-sample-museum-'));
    content = join(root, 'content');
    await writeSampleContent(content);
    // The exhibition's three rooms (10 + 8 + 6 slots for the 24 pictures).
    const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as Array<{ id: number }>;
    writeFileSync(join(content, 'rooms.json'), JSON.stringify(rooms.filter((r) => r.id <= 3)));
    const summary = await bakeRooms({ contentDir: content, dataDir: join(root, 'data'), concurrency: 2 });
    expect(summary.failed).toBe(0);
    // No VIEWER_MEDIA_ALLOW_HOSTS: a loopback or unknown host is never fetched.
    server = await startTestServer({ dataDir: join(root, 'data') });
  }, 180_000);

  afterAll(async () => {
    await server?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('publishes most artworks with a picture the server itself serves; the normalization cases stay as they are', async () => {
    const res = await server.get('/v1/artworks?limit=100');
    const { data } = (await res.json()) as { data: Array<{ id: number; media: { url: string; content_type: string } | null }> };
    const own = data.filter((a) => a.media?.url.startsWith('http://museum.test/files/'));
    expect(own.length).toBeGreaterThan(data.length / 2);
    expect(data.find((a) => a.id === 102)!.media!.url).toBe('https://media.museum.example/works/102-display.png');
    expect(data.find((a) => a.id === 104)!.media!.url).toBe('https://media.museum.example/originals/104.png');

    // The picture behind artwork 201 is the sample's file, byte for byte, from /files.
    const picture = data.find((a) => a.id === 201)!.media!;
    const file = await server.get(new URL(picture.url).pathname, { key: null });
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe(picture.content_type);
    expect(Buffer.compare(Buffer.from(await file.arrayBuffer()), readFileSync(join(content, 'pictures/201.jpg')))).toBe(0);
  });

  it('makes the viewer texture of a stored picture from the file, while outside media hosts stay guarded', async () => {
    const texture = await server.get('/view/textures/artworks/203.webp', { key: null });
    expect(texture.status).toBe(200);
    const meta = await sharp(Buffer.from(await texture.arrayBuffer())).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 560, 560]);
    // An artwork on an outside host is still fetched through the guard (which refuses it here): 502.
    expect((await server.get('/view/textures/artworks/101.webp', { key: null })).status).toBe(502);
  });

  it('registers the sample exhibition once: the second call finds it', async () => {
    const first = await ensureSampleExhibition(server);
    expect(first).toEqual({ link: `${server.url}/view/exhibitions/sample`, registered: true });
    expect(await ensureSampleExhibition(server)).toEqual({ link: first.link, registered: false });
    const registered = await server.get('/v1/guide/exhibitions/sample', { key: null });
    const { data } = (await registered.json()) as { data: { rooms: unknown[]; artworks: unknown[] } };
    expect([data.rooms.length, data.artworks.length]).toEqual([3, 24]);
    const manifest = (await readManifest(server.dataDir))!;
    expect(manifest.artworks.filter((a) => a.media_file).length).toBe(24);
  });

  describe.skipIf(!HAS_CHROMIUM)('in Chromium', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(async () => browser?.close());

    it('hangs every artwork of the sample exhibition as a picture, with no console error', async () => {
      await ensureSampleExhibition(server);
      const { page, errors, failed } = await watchedPage(browser);
      await page.goto(`${server.url}/view/exhibitions/sample`);
      const shown = async () => {
        await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
        const hang = (await page.evaluate('window.museumViewer.hang')) as { hung: Array<{ slot: string; placeholder: boolean }> };
        // At each frame's centre: the picture's colour, not the placeholder card's.
        const colours = (await page.evaluate(`(() => {
          const v = window.museumViewer;
          return v.hang.hung.map((h) => { const p = v.focusSlot(h.slot); return v.colourAt(p.x, p.y); });
        })()`)) as Array<[number, number, number]>;
        return { hang, colours };
      };
      const far = (c: number[], from: number[]) => c.some((v, i) => Math.abs(v - from[i]!) > 24);
      for (const [placement, count] of [
        [0, 10],
        [1, 8],
        [2, 6],
      ] as const) {
        if (placement > 0) {
          await page.click('#next');
          await pageUntil(page, `window.museumViewer.ready && window.museumViewer.placement === ${placement}`);
        }
        const { hang, colours } = await shown();
        expect(hang.hung.length).toBe(count);
        expect(
          hang.hung.every((h) => !h.placeholder),
          JSON.stringify(hang.hung),
        ).toBe(true);
        expect(
          colours.every((c) => far(c, CARD)),
          JSON.stringify(colours),
        ).toBe(true);
        // Different works, different pictures.
        expect(new Set(colours.map((c) => c.join())).size).toBeGreaterThan(count / 2);
      }
      expect(errors).toEqual([]);
      expect(failed).toEqual([]);
      page.removeAllListeners();
      await page.close();
    }, 120_000);
  });
});
