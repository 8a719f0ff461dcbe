/**
 * The viewer's model variants in real Chromium (issue 36, decisions.md "Model variants"), over a real
 * bake of the sample content and the real cube-room (../shared/assets/rooms) served by the server:
 *  - each `?variant=` (draco, meshopt, plain; ktx2 for cube-room, which has textures) loads and renders:
 *    every slot's frame is on screen where its record says, the model's own Slot_/Auto_ nodes sit on
 *    their anchors in three's scene (1 mm, 0.1°, world scale 1), the picture matches the Draco one;
 *    only the decoder the variant needs is requested (plain: none; ktx2: meshopt's and the Basis
 *    transcoder), ktx2's textures are compressed GPU textures with mipmaps; no console error;
 *  - no `?variant=` picks meshopt; an unknown name says so and shows meshopt; a room baked before
 *    variants shows its Draco model;
 *  - a Basis transcoder that dies at start (KTX2Loader then never answers) or is not served: the
 *    ktx2 page does not hang; for the first its model timeout (`?model_timeout=`) says so in
 *    `museumViewer.error` and the warning, for the second GLTFLoader shows the model without the texture.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishManifest, readManifest } from '../../artifacts/store.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil, watchedPage } from '../helpers/chromium.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const CUBE_ROOM = resolve(import.meta.dirname, '../../../shared/assets/rooms/cube-room.glb');
const CUBE_ROOM_ID = 8;
/** Room 2 is published as a manifest written before variants existed (no model_variants). */
const OLD_BAKE_ROOM_ID = 2;
const VARIANTS = ['draco', 'meshopt', 'plain'] as const;
/** cube-room has textures: it has a ktx2 variant too (room 1 has none: no ktx2). */
const VARIANTS_OF: Record<number, readonly string[]> = { 1: VARIANTS, [CUBE_ROOM_ID]: [...VARIANTS, 'ktx2'] };

/** Every texture of the model on stage: compressed (a GPU format three uploads as is) or not. */
const TEXTURES = `(() => {
  const found = [];
  window.museumViewer.stage.model.traverse((o) => {
    for (const m of [o.material].flat()) {
      if (!m) continue;
      for (const v of Object.values(m)) if (v && v.isTexture) found.push({ compressed: !!v.isCompressedTexture, format: v.format, mips: v.mipmaps ? v.mipmaps.length : 0 });
    }
  });
  return found;
})()`;

interface Shown {
  error: string | null;
  model: { name: string | null; url: string | null } | null;
  slots: number;
  warning: string;
  panel: string;
}

/** Per slot: distance (mm) and angle (°) of the model's own node from the slot record, and its world scale. */
const ANCHORS = `(() => {
  const v = window.museumViewer;
  return v.room.frames.frames.map((f) => {
    const node = v.stage.model.getObjectByName(f.slot.id);
    if (!node) return { id: f.slot.id, missing: true };
    node.updateWorldMatrix(true, false);
    const p = new node.position.constructor(), q = new node.quaternion.constructor(), s = new node.scale.constructor();
    node.matrixWorld.decompose(p, q, s);
    const [x, y, z, w] = f.slot.quaternion;
    const dot = Math.min(1, Math.abs(q.x * x + q.y * y + q.z * z + q.w * w));
    return {
      id: f.slot.id,
      mm: p.distanceTo(new node.position.constructor(...f.slot.position)) * 1000,
      degrees: (2 * Math.acos(dot) * 180) / Math.PI,
      scale: [s.x, s.y, s.z],
    };
  });
})()`;

const SHOWN = `(() => {
  const v = window.museumViewer;
  return {
    error: v.error,
    model: v.model(),
    slots: v.slots().length,
    warning: document.getElementById('warning').hidden ? '' : document.getElementById('warning').innerText,
    panel: document.getElementById('model').innerText,
  };
})()`;

describe.skipIf(!HAS_CHROMIUM)('model variants in the viewer', () => {
  let root: string;
  let server: TestServer;
  let browser: Browser;
  /** Overview pictures of each room's Draco variant (48×30 RGB), to compare the others with. */
  const dracoPictures = new Map<number, Buffer>();

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'museum-variants-'));
    const content = join(root, 'content');
    const dataDir = join(root, 'data');
    await writeSampleContent(content);
    const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as Array<Record<string, unknown>>;
    rooms.push({ ...rooms[0], id: CUBE_ROOM_ID, title: 'Cube Room', token_id: String(CUBE_ROOM_ID), slots: 8, model: CUBE_ROOM });
    writeFileSync(join(content, 'rooms.json'), JSON.stringify(rooms));
    const summary = await bakeRooms({ contentDir: content, dataDir, concurrency: 2 });
    expect(summary.failed).toBe(0);
    const manifest = (await readManifest(dataDir))!;
    const old = manifest.rooms.find((r) => r.id === OLD_BAKE_ROOM_ID)!;
    expect(old.model_variants?.length).toBe(3);
    delete (old as { model_variants?: unknown }).model_variants;
    await publishManifest(dataDir, manifest);
    server = await startTestServer({ dataDir });
    browser = await launchChromium();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  /** Open a view and wait for it; `requests`: the same-origin paths it asked for. */
  async function open(path: string) {
    const watched = await watchedPage(browser);
    const requests: string[] = [];
    watched.page.on('request', (r) => requests.push(new URL(r.url()).pathname));
    await watched.page.goto(`${server.url}${path}`);
    await pageUntil(watched.page, 'window.museumViewer && window.museumViewer.ready');
    return { ...watched, requests, shown: (await watched.page.evaluate(SHOWN)) as Shown };
  }

  async function overviewPicture(page: Page): Promise<Buffer> {
    const png = await page.locator('#stage canvas').screenshot();
    return sharp(png).resize(48, 30, { fit: 'fill' }).removeAlpha().raw().toBuffer();
  }

  const decoderRequests = (requests: string[]) => ({
    draco: requests.filter((p) => /\/draco_(wasm_wrapper|decoder)-/.test(p)).length,
    meshopt: requests.filter((p) => /\/meshopt_decoder-/.test(p)).length,
    basis: requests.filter((p) => /\/basis_transcoder-/.test(p)).length,
  });

  for (const roomId of [1, CUBE_ROOM_ID]) {
    it.each(VARIANTS_OF[roomId]!)(
      `room ${roomId}, ?variant=%s: loads with only its decoder, frames and anchors where the records say`,
      async (variant) => {
        const { page, errors, failed, requests, shown } = await open(`/view/rooms/${roomId}?variant=${variant}`);
        const baked = (await readManifest(server.dataDir))!.rooms
          .find((r) => r.id === roomId)!
          .model_variants!.find((v) => v.name === variant)!;
        const slotData = (await (await server.get(`/v1/rooms/${roomId}/slots`, { key: null })).json()) as { data: { slots: unknown[] } };
        expect(shown.error).toBeNull();
        expect(shown.warning).toBe('');
        expect(shown.model?.name).toBe(variant);
        expect(shown.model?.url).toBe(`/files/${baked.file.sha256}.glb`);
        expect(requests).toContain(shown.model?.url);
        expect(shown.panel).toMatch(new RegExp(`^Showing ${variant} \\(\\d+ KB\\)\\. Show: ${VARIANTS_OF[roomId]!.join(' · ')}$`));
        expect(decoderRequests(requests)).toEqual({
          draco: variant === 'draco' ? 2 : 0,
          meshopt: variant === 'meshopt' || variant === 'ktx2' ? 1 : 0,
          basis: variant === 'ktx2' ? 2 : 0,
        });
        // ktx2: every texture transcoded to a compressed GPU format with its mipmaps; the others upload images.
        const textures = (await page.evaluate(TEXTURES)) as Array<{ compressed: boolean; format: number; mips: number }>;
        if (roomId === CUBE_ROOM_ID) expect(textures.length).toBeGreaterThan(0);
        for (const t of textures) expect(t.compressed, variant).toBe(variant === 'ktx2');
        // Transcoded to a GPU block format, not KTX2Loader's uncompressed RGBA fallback (THREE.RGBAFormat, 1023).
        if (variant === 'ktx2') for (const t of textures) expect(t.format, 'GPU format').not.toBe(1023);
        if (variant === 'ktx2') for (const t of textures) expect(t.mips).toBeGreaterThan(1);

        // Every slot's frame is what is on screen at its projected centre (the page's pick pass).
        expect(shown.slots).toBe(slotData.data.slots.length);
        expect(shown.slots).toBeGreaterThan(0);
        const picks = (await page.evaluate(`(() => {
        const v = window.museumViewer;
        return v.slots().map((s) => { const p = v.focusSlot(s.id); return { id: s.id, picked: v.pickAt(p.x, p.y) }; });
      })()`)) as Array<{ id: string; picked: string | null }>;
        expect(picks.map((p) => p.picked)).toEqual(picks.map((p) => p.id));

        // The model's own anchor nodes, as three loaded them, are where the slot records say.
        const anchors = (await page.evaluate(ANCHORS)) as Array<{
          id: string;
          missing?: true;
          mm: number;
          degrees: number;
          scale: number[];
        }>;
        for (const a of anchors) {
          expect(a.missing, a.id).toBeUndefined();
          expect(a.mm, a.id).toBeLessThan(1);
          expect(a.degrees, a.id).toBeLessThan(0.1);
          for (const s of a.scale) expect(s, a.id).toBeCloseTo(1, 4);
        }

        // The room itself is drawn, and looks like its Draco variant from the overview.
        await page.evaluate('window.museumViewer.stage.home(), window.museumViewer.stage.renderNow()');
        const stats = await sharp(await page.locator('#stage canvas').screenshot()).stats();
        expect(Math.max(...stats.channels.slice(0, 3).map((c) => c.stdev))).toBeGreaterThan(15);
        const picture = await overviewPicture(page);
        if (variant === 'draco') dracoPictures.set(roomId, picture);
        const draco = dracoPictures.get(roomId);
        if (draco) {
          const meanDifference = picture.reduce((sum, v, i) => sum + Math.abs(v - draco[i]!), 0) / picture.length;
          expect(meanDifference).toBeLessThan(3);
        }
        expect(errors).toEqual([]);
        expect(failed).toEqual([]);
        await page.close();
      },
    );
  }

  it('picks meshopt when no variant is asked for, and preloads its decoder (not Draco)', async () => {
    const html = await (await server.get(`/view/rooms/${CUBE_ROOM_ID}`, { key: null })).text();
    expect(html).toMatch(/<link rel="modulepreload" href="\/view\/assets\/meshopt_decoder-[\w-]+\.js">/);
    expect(html).not.toMatch(/<link [^>]*draco_/);
    const { page, errors, failed, requests, shown } = await open(`/view/rooms/${CUBE_ROOM_ID}`);
    expect(shown.model?.name).toBe('meshopt');
    expect(shown.warning).toBe('');
    expect(shown.slots).toBe(8);
    expect(decoderRequests(requests)).toEqual({ draco: 0, meshopt: 1, basis: 0 });
    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
    await page.close();
  });

  it('says so for an unknown variant, shows the default, and keeps the name text', async () => {
    const asked = '<img src=x onerror=alert(1)>';
    const html = await (await server.get(`/view/rooms/1?variant=${encodeURIComponent(asked)}`, { key: null })).text();
    expect(html).not.toContain('<img');
    const { page, errors, failed, shown } = await open(`/view/rooms/1?variant=${encodeURIComponent(asked)}`);
    expect(shown.warning).toBe(`There is no model variant "${asked}": showing meshopt. This room has draco, meshopt, plain.`);
    expect(shown.model?.name).toBe('meshopt');
    expect(shown.slots).toBe(10);
    expect(await page.locator('img').count()).toBe(0);
    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
    await page.close();
    // A very long name is cut to its first 40 characters.
    const long = await open(`/view/rooms/1?variant=${'v'.repeat(5000)}`);
    expect(long.shown.warning).toContain(`"${'v'.repeat(40)}"`);
    expect(long.shown.warning).not.toContain('v'.repeat(41));
    await long.page.close();
  });

  it('shows the Draco model of a room baked before variants, whatever variant is asked for', async () => {
    const manifest = (await readManifest(server.dataDir))!;
    const optimized = `/files/${manifest.rooms.find((r) => r.id === OLD_BAKE_ROOM_ID)!.model_optimized!.sha256}.glb`;
    for (const [query, warning] of [
      ['', ''],
      ['?variant=draco', ''],
      ['?variant=plain', 'This room was baked before model variants: there is no "plain" variant, showing its Draco model.'],
    ] as const) {
      const { page, errors, failed, requests, shown } = await open(`/view/rooms/${OLD_BAKE_ROOM_ID}${query}`);
      expect(shown.model, query).toEqual({ name: null, url: optimized, bytes: null, parsedAt: expect.any(Number) });
      expect(shown.warning, query).toBe(warning);
      expect(shown.panel, query).toBe('Showing draco (baked before variants).');
      expect(shown.slots, query).toBeGreaterThan(0);
      expect(decoderRequests(requests), query).toEqual({ draco: 2, meshopt: 0, basis: 0 });
      expect(errors, query).toEqual([]);
      expect(failed, query).toEqual([]);
      await page.close();
    }
  });

  it.each([
    ['a transcoder that throws at start', { status: 200, body: 'throw new Error("broken Basis transcoder");' }],
    ['a 500 for the transcoder', { status: 500, body: 'no transcoder here' }],
  ] as const)('ktx2 with %s: the page gets ready and says what it can, never hangs', async (what, answer) => {
    const { page } = await watchedPage(browser);
    // Only the transcoder's script: its wasm and everything else are served as usual.
    await page.route(/\/view\/assets\/basis_transcoder-[\w-]+\.js$/, (route) =>
      route.fulfill({ status: answer.status, contentType: 'text/javascript; charset=utf-8', body: answer.body }),
    );
    const started = Date.now();
    await page.goto(`${server.url}/view/rooms/${CUBE_ROOM_ID}?variant=ktx2&model_timeout=3`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready', 20_000);
    const shown = (await page.evaluate(SHOWN)) as Shown;
    expect(Date.now() - started, what).toBeLessThan(15_000);
    expect(shown.model?.name).toBe('ktx2');
    // The slot frames are drawn from the slot data all the same.
    expect(shown.slots).toBe(8);
    const modelOnStage = await page.evaluate('window.museumViewer.stage.model !== null');
    if (answer.status === 200) {
      // The worker died at start: three's KTX2Loader never rejects, the page's model timeout speaks.
      const said =
        'The room model did not load within 3 s: its decoder or texture transcoder may have failed to start. Reload the page to try again.';
      expect(shown.error).toBe(said);
      expect(shown.warning).toBe(said);
      expect(modelOnStage).toBe(false);
    } else {
      // The transcoder could not be fetched: KTX2Loader rejects at once and GLTFLoader shows the model without that texture.
      expect(shown.error).toBeNull();
      expect(modelOnStage).toBe(true);
    }
    await page.close();
  });

  it('an exhibition walk shows the variant asked for in each room', async () => {
    const res = await server.post(
      '/v1/guide/exhibitions',
      {
        format: 'museum-exhibition@1',
        id: 'variants-test:1',
        name: 'Plain rooms',
        placements: [
          { uid: 'cube', room: { id: CUBE_ROOM_ID, title: 'Cube Room' }, artworks: [] },
          { uid: 'one', room: { id: 1, title: 'One' }, artworks: [] },
        ],
      },
      { key: null },
    );
    expect(res.status).toBe(200);
    const { page, errors, requests, shown } = await open('/view/exhibitions/variants-test%3A1?variant=plain');
    expect(shown.model?.name).toBe('plain');
    await page.click('#next');
    await pageUntil(page, 'window.museumViewer.ready && window.museumViewer.placement === 1');
    expect(((await page.evaluate(SHOWN)) as Shown).model?.name).toBe('plain');
    expect(decoderRequests(requests)).toEqual({ draco: 0, meshopt: 0, basis: 0 });
    expect(errors).toEqual([]);
    await page.close();
  });
});
