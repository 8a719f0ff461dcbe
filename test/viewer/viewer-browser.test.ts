/**
 * The 3D viewer, /docs and the 404 pages in real Chromium (Debian's, WebGL through SwiftShader),
 * over a real bake of the sample content served by `museum serve`'s server. A few page loads:
 *  - a room: WebGL drew something; every slot's frame is what is on screen at its projected centre
 *    (the page's id-coloured pick pass); a click shows the record; no console error, no failed request;
 *  - an exhibition: artwork 1's image (a solid colour from a local fake media host, through the
 *    texture variant) on slot 1; a broken image gives the placeholder card; hung / not-hung counts;
 *    the live visitor count; the next room;
 *  - /docs lists every operation of the generated OpenAPI document;
 *  - unknown ids answer a 404 page.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Artwork } from '../../artifacts/format.ts';
import { publishManifest, readManifest } from '../../artifacts/store.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { startModelServer, type FakeModelServer } from '../fakes/model-server.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil, watchedPage } from '../helpers/chromium.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const RED: [number, number, number] = [214, 40, 32];

describe.skipIf(!HAS_CHROMIUM)('the 3D viewer in Chromium', () => {
  let root: string;
  let server: TestServer;
  let media: FakeModelServer;
  let browser: Browser;
  const exhibitionId = 'viewer-test:1';

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'museum-viewer-'));
    const dataDir = join(root, 'data');
    await writeSampleContent(join(root, 'content'));
    const summary = await bakeRooms({ contentDir: join(root, 'content'), dataDir, concurrency: 2 });
    expect(summary.failed).toBe(0);

    // Two artworks whose images live on a local media host: one a solid colour, one broken.
    const red = await sharp({ create: { width: 400, height: 300, channels: 3, background: { r: RED[0], g: RED[1], b: RED[2] } } })
      .png()
      .toBuffer();
    media = await startModelServer({ '/red.png': { body: red }, '/broken.png': { body: Buffer.from('not an image at all') } });
    const manifest = (await readManifest(dataDir))!;
    const image = (url: string, width: number, height: number): Partial<Artwork> => ({
      media: { url, type: 'image', content_type: 'image/png', width, height },
      ratio: width / height,
    });
    manifest.artworks[0] = { ...manifest.artworks[0]!, ...image(`${media.url}/red.png`, 400, 300) };
    manifest.artworks[1] = { ...manifest.artworks[1]!, ...image(`${media.url}/broken.png`, 300, 300) };
    // Room 2's meshopt model (the one its page shows) is another file than its slots were baked into
    // (room 7's, as a re-optimized model with stale slot data would be): its view must warn.
    const corridor = manifest.rooms.find((r) => r.id === 2)!;
    const annexMeshopt = manifest.rooms.find((r) => r.id === 7)!.model_variants!.find((v) => v.name === 'meshopt')!;
    corridor.model_variants = corridor.model_variants!.map((v) => (v.name === 'meshopt' ? annexMeshopt : v));
    await publishManifest(dataDir, manifest);

    server = await startTestServer({ dataDir, env: { VIEWER_MEDIA_ALLOW_HOSTS: new URL(media.url).host } });
    // The Annex (room 7) has five slots: seven artworks, so two are not hung. The Hexagon
    // Pavilion (room 6) has five: two artworks, three empty frames.
    const [a1, a2] = manifest.artworks;
    const res = await server.post(
      '/v1/guide/exhibitions',
      {
        format: 'museum-exhibition@1',
        id: exhibitionId,
        name: 'Red & Grey',
        placements: [
          {
            uid: 'annex',
            room: { id: 7, title: 'Annex' },
            artworks: [
              { id: a1!.id },
              { id: a2!.id },
              ...[1, 2, 3, 4, 5].map((n) => ({ id: 900_000 + n, name: `Guest work ${n}`, artist: 'Visiting Artist' })),
            ],
          },
          {
            uid: 'pavilion',
            room: { id: 6, title: 'Pavilion' },
            artworks: [{ id: a1!.id }, { id: 900_010, name: 'Loan', artist: 'Lender' }],
          },
        ],
      },
      { key: null },
    );
    expect(res.status).toBe(200);
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await media?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('draws a room with every slot frame where its anchor is, and shows a record on click', async () => {
    const { page, errors, failed } = await watchedPage(browser);
    await page.goto(`${server.url}/view/rooms/1`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    const state = (await page.evaluate(`(() => {
      const v = window.museumViewer;
      return { error: v.error, slots: v.slots(), warning: document.getElementById('warning').hidden, firstFrame: v.firstFullFrameMs };
    })()`)) as { error: string | null; slots: Array<{ id: string; index: number }>; warning: boolean; firstFrame: number | null };
    expect(state.error).toBeNull();
    expect(state.slots.length).toBe(10);
    expect(state.warning).toBe(true); // hidden: the slot data matches the current model
    expect(state.firstFrame).toBeGreaterThan(0);

    // WebGL drew the room: the canvas is far from one flat colour.
    const canvas = page.locator('#stage canvas');
    const stats = await sharp(await canvas.screenshot()).stats();
    expect(Math.max(...stats.channels.slice(0, 3).map((c) => c.stdev))).toBeGreaterThan(15);

    // For every slot, standing in front of it, the pixel at its projected centre is its frame.
    const picks = (await page.evaluate(`(() => {
      const v = window.museumViewer;
      return v.slots().map((s) => { const p = v.focusSlot(s.id); return { id: s.id, picked: v.pickAt(p.x, p.y) }; });
    })()`)) as Array<{ id: string; picked: string | null }>;
    expect(picks.map((p) => p.picked)).toEqual(picks.map((p) => p.id));

    // A real click on the last focused frame shows its record.
    const last = state.slots[state.slots.length - 1]!;
    const at = (await page.evaluate(
      `(() => { const v = window.museumViewer; const p = v.focusSlot(${JSON.stringify(last.id)}); const r = v.canvasRect(); return { ` +
        `x: r.left + p.x, y: r.top + p.y }; })()`,
    )) as { x: number; y: number };
    await page.mouse.click(at.x, at.y);
    const record = await page.locator('#record').innerText();
    expect(record).toContain(last.id);
    expect(record).toMatch(/Clearance/);

    // Facing arrows on demand; a walk at eye height (1.6 m above the floor), W moves forward.
    await page.check('#facing');
    expect(await page.evaluate('window.museumViewer.room.frames.frames.every((f) => f.arrow.visible)')).toBe(true);
    await page.check('#walk');
    await pageUntil(page, 'window.museumViewer.visitor()'); // walk mode loads its floor first
    const before = (await page.evaluate(
      '(() => { const s = window.museumViewer.stage; return { p: s.camera.position.toArray(), floor: s.bounds.min.y }; })()',
    )) as { p: number[]; floor: number };
    await page.keyboard.down('KeyW');
    const [x0, y0, z0] = before.p as [number, number, number];
    const after = await pageUntil<number[]>(
      page,
      `(() => { const p = window.museumViewer.stage.camera.position; return Math.hypot(p.x - ${x0}, p.z - ${z0}) > 0.3 && p.toArray(); ` +
        `})()`,
      10_000,
    );
    await page.keyboard.up('KeyW');
    expect(y0 - before.floor).toBeCloseTo(1.6, 1);
    expect(after[1]).toBeCloseTo(y0, 6);

    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
    await page.close();
  });

  it('warns when the slot data was baked for another model than the one shown, and only then', async () => {
    const manifest = (await readManifest(server.dataDir))!;
    const shown = manifest.rooms.find((r) => r.id === 7)!.model_variants!.find((v) => v.name === 'meshopt')!.file.sha256;
    const { page, errors } = await watchedPage(browser);
    await page.goto(`${server.url}/view/rooms/2`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    expect(await page.locator('#warning').isVisible()).toBe(true);
    expect(await page.locator('#warning').innerText()).toMatch(
      new RegExp(`baked for another model .*the one shown \\(${shown.slice(0, 12)}`),
    );
    // Its Draco and plain models are files the slot data names: no warning there.
    for (const variant of ['draco', 'plain']) {
      await page.goto(`${server.url}/view/rooms/2?variant=${variant}`);
      await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
      expect(await page.locator('#warning').isVisible(), variant).toBe(false);
    }
    expect((await page.evaluate('window.museumViewer.slots().length')) as number).toBe(8);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('walks an exhibition: artworks hung in order, a placeholder for a broken image, counts and visitors', async () => {
    const { page, errors, failed } = await watchedPage(browser);
    await page.goto(`${server.url}/view/exhibitions/${encodeURIComponent(exhibitionId)}`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    const hang = (await page.evaluate('window.museumViewer.hang')) as {
      hung: Array<{ slot: string; index: number; title: string; placeholder: boolean }>;
      notHung: Array<{ title: string }>;
    };
    expect(hang.hung.map((h) => h.index)).toEqual([1, 2, 3, 4, 5]);
    expect(hang.notHung.map((a) => a.title)).toEqual(['Guest work 4', 'Guest work 5']);
    expect(hang.hung[0]!.placeholder).toBe(false);
    expect(hang.hung[1]!.placeholder).toBe(true); // broken image
    expect(hang.hung[2]!.placeholder).toBe(true); // unknown to the museum: no image
    expect(await page.locator('#counts').innerText()).toBe('5 hung · 2 not hung');
    expect(await page.locator('#not-hung li').count()).toBe(2);

    // The frame on slot 1 shows artwork 1's colour; slot 2 shows the grey card, not the image.
    const colours = (await page.evaluate(`(() => {
      const v = window.museumViewer;
      const at = (id) => { const p = v.focusSlot(id); return v.colourAt(p.x, p.y - 40); };
      return [at(v.hang.hung[0].slot), at(v.hang.hung[1].slot)];
    })()`)) as Array<[number, number, number]>;
    const near = (c: number[], want: number[], tolerance: number) => c.every((v, i) => Math.abs(v - want[i]!) <= tolerance);
    expect(near(colours[0]!, RED, 12), `slot 1 shows ${colours[0]}`).toBe(true);
    expect(near(colours[1]!, [0x3a, 0x3f, 0x47], 16), `slot 2 shows ${colours[1]}`).toBe(true);

    // Title and artist on click.
    const work = (await page.evaluate(
      `(() => { const v = window.museumViewer; const p = v.focusSlot(v.hang.hung[2].slot); const r = v.canvasRect(); return { x: ` +
        `r.left + p.x, y: r.top + p.y }; })()`,
    )) as { x: number; y: number };
    await page.mouse.click(work.x, work.y);
    const record = await page.locator('#record').innerText();
    expect(record).toContain('Guest work 1');
    expect(record).toContain('Visiting Artist');

    // The live visitor count (this page is listening).
    await pageUntil(page, `/\\d+ visitors? in the museum now/.test(document.getElementById('visitors').textContent)`, 10_000);

    // Next room: two artworks on five slots, nothing left over.
    await page.click('#next');
    await pageUntil(page, 'window.museumViewer.ready && window.museumViewer.placement === 1');
    expect(await page.locator('#counts').innerText()).toBe('2 hung · 0 not hung');
    expect((await page.evaluate('window.museumViewer.slots().length')) as number).toBe(5);

    // Only the broken image failed (the texture route answers 502; the card stands in).
    expect(failed.filter((f) => !/^502 .*\/view\/textures\/artworks\/\d+\.webp$/.test(f))).toEqual([]);
    expect(failed.length).toBe(1);
    expect(errors.filter((e) => !/status of 502/.test(e))).toEqual([]);
    page.removeAllListeners();
    await page.close();
  });

  it('a page on another origin reads the request id, ETag and rate-limit headers (Expose-Headers: *)', async () => {
    // A client page on another origin (another port), as the 3D client's own site would be.
    const client = createServer((_req, res) =>
      res.writeHead(200, { 'Content-Type': 'text/html' }).end('<!doctype html><title>client</title>'),
    );
    await new Promise<void>((done) => client.listen(0, '127.0.0.1', done));
    const { page } = await watchedPage(browser);
    await page.goto(`http://127.0.0.1:${(client.address() as AddressInfo).port}/`);
    const read = (url: string, key: string | null) =>
      page.evaluate(
        async ([url, key]) => {
          const res = await fetch(url!, key ? { headers: { 'X-API-Key': key } } : {});
          const names = ['x-request-id', 'etag', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'content-length'];
          return { status: res.status, headers: Object.fromEntries(names.map((name) => [name, res.headers.get(name)])) };
        },
        [url, key],
      );
    const slots = await read(`${server.url}/v1/rooms/1/slots`, null);
    expect(slots.status).toBe(200);
    expect(slots.headers['x-request-id']).toMatch(/^[\w.:-]+$/);
    expect(slots.headers.etag).toMatch(/^"/);
    const keyed = await read(`${server.url}/v1/rooms`, server.key);
    expect(keyed.status).toBe(200);
    expect(keyed.headers['x-ratelimit-limit']).toMatch(/^\d+$/);
    expect(keyed.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
    expect(Number(keyed.headers['content-length'])).toBeGreaterThan(0);
    const refused = await read(`${server.url}/v1/rooms`, null);
    expect(refused.status).toBe(401);
    expect(refused.headers['x-request-id']).toMatch(/^[\w.:-]+$/);
    await page.close();
    await new Promise((done) => client.close(done));
  });

  it('/docs renders every operation of the OpenAPI document with swagger-ui, served locally', async () => {
    const doc = (await (await server.get('/v1/openapi.json')).json()) as { paths: Record<string, Record<string, unknown>> };
    const expected = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    expect(expected.length).toBeGreaterThan(20);
    const { page, errors, failed } = await watchedPage(browser);
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(`${server.url}/docs`);
    await pageUntil(page, `document.querySelectorAll('.opblock').length >= ${expected.length}`);
    const shown = (await page.evaluate(
      `[...document.querySelectorAll('.opblock')].map((b) =>
      b.querySelector('.opblock-summary-method').textContent.trim() + ' ' + ` +
        `b.querySelector('.opblock-summary-path').getAttribute('data-path'))`,
    )) as string[];
    expect([...new Set(shown)].sort()).toEqual(expected);
    // Parameters and examples are there for an operation with both.
    await page.click('.opblock-get:has([data-path="/v1/artworks"]) .opblock-summary');
    await pageUntil(page, `document.querySelector('.opblock.is-open .parameters') !== null`);
    const open = await page.locator('.opblock.is-open').innerText();
    expect(open).toMatch(/limit/);
    expect(open).toMatch(/Example Value/);
    expect(requests.every((u) => u.startsWith(server.url) || u.startsWith('data:'))).toBe(true);
    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
    await page.close();
  });

  it('answers unknown rooms and exhibitions with a clear 404 page', async () => {
    for (const path of ['/view/rooms/999', '/view/rooms/abc', '/view/exhibitions/no-such-show', '/view/exhibitions/%3Cscript%3E']) {
      const res = await server.get(path, { key: null });
      expect(res.status, path).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
      const body = await res.text();
      expect(body).toMatch(/not found/);
      expect(body).not.toContain('<script>');
    }
    const { page, errors } = await watchedPage(browser);
    const res = await page.goto(`${server.url}/view/exhibitions/no-such-show`);
    expect(res?.status()).toBe(404);
    expect(await page.locator('h1').innerText()).toBe('Exhibition not found');
    expect(errors.filter((e) => !/status of 404/.test(e))).toEqual([]);
    await page.close();
  });

  it('serves the QA report, linking every room to its 3D view', async () => {
    const res = await server.get('/report', { key: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toMatch(/default-src 'none'/);
    const body = await res.text();
    for (let id = 1; id <= 7; id++) expect(body).toContain(`href="/view/rooms/${id}"`);
  });
});
