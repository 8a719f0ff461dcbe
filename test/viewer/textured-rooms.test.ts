/**
 * Textured rooms in real Chromium: three's GLTFLoader reads a GLB's embedded images through
 * `blob:` URLs, which the viewer's CSP must let it fetch. Two rooms, baked by the project's own
 * bake: the sample's Brick Atelier (a base-colour texture and a normal map, both generated) and a
 * real model, the Cube Room of ../shared/assets (its baked-light texture, read from the .gltf's own
 * folder). Standing in front of each slot, the wall pixels around the frame carry the texture's
 * colours, not the untextured material's (white lit grey), and the page logs no error at all.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { SHARED_ASSETS } from '../bake/fixtures.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil, watchedPage } from '../helpers/chromium.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const CUBE_ROOM = join(SHARED_ASSETS, 'rooms', 'cube-room', 'cube-room.gltf');

type RGB = [number, number, number];

/**
 * The colours of the wall around every slot frame of the page's room: the camera stands in front
 * of each slot in turn, and points on a ring around the frame's centre that the pick pass finds on
 * no frame are read back from the canvas.
 */
const WALL_SAMPLES = `(() => {
  const v = window.museumViewer;
  const out = [];
  for (const s of v.slots()) {
    const p = v.focusSlot(s.id);
    const r = v.canvasRect();
    for (let k = 0; k < 8; k++) {
      const a = (k / 8) * 2 * Math.PI;
      const x = p.x + Math.cos(a) * r.width * 0.3;
      const y = p.y + Math.sin(a) * r.height * 0.3;
      if (x < 0 || y < 0 || x >= r.width || y >= r.height || v.pickAt(x, y) !== null) continue;
      out.push(v.colourAt(x, y));
    }
  }
  return out;
})()`;

/** How far a colour is from grey: its largest channel minus its smallest. */
const chroma = (c: RGB) => Math.max(...c) - Math.min(...c);
const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

describe.skipIf(!HAS_CHROMIUM)('textured rooms in Chromium', () => {
  let root: string;
  let server: TestServer;
  let browser: Browser;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'museum-textured-'));
    const content = join(root, 'content');
    await writeSampleContent(content);
    const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as Array<{ id: number; image: string | null }>;
    const atelier = rooms.find((r) => r.id === 3)!;
    const cube = {
      id: 8,
      title: 'Cube Room',
      architect: 'Naomi Chen',
      description: 'CC-BY 3.0',
      series: 'Real rooms',
      slots: 6,
      token_id: '8',
      model: CUBE_ROOM,
      image: null,
    };
    writeFileSync(join(content, 'rooms.json'), JSON.stringify([atelier, cube]));
    const dataDir = join(root, 'data');
    const summary = await bakeRooms({ contentDir: content, dataDir, concurrency: 2 });
    expect(summary.failed).toBe(0);
    server = await startTestServer({ dataDir });
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const wallColours = async (roomId: number) => {
    const { page, errors, failed } = await watchedPage(browser);
    await page.goto(`${server.url}/view/rooms/${roomId}`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    expect(await page.evaluate('window.museumViewer.error')).toBeNull();
    const colours = (await page.evaluate(WALL_SAMPLES)) as RGB[];
    await page.close();
    return { colours, errors, failed };
  };

  it('the Brick Atelier shows its brick texture (warm, varied), not plain lit grey', async () => {
    const { colours, errors, failed } = await wallColours(3);
    expect(colours.length).toBeGreaterThan(20);
    // The brick texture is red-brown (R well above B); the untextured wall would be grey (R ≈ G ≈ B).
    const warm = colours.filter(([r, , b]) => r - b > 30);
    expect(warm.length / colours.length, `wall colours ${JSON.stringify(colours.slice(0, 8))}`).toBeGreaterThan(0.6);
    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
  }, 60_000);

  it("the Cube Room (a real model) shows its baked-light texture's colours, not plain lit grey", async () => {
    const { colours, errors, failed } = await wallColours(8);
    expect(colours.length).toBeGreaterThanOrEqual(8);
    // The baked-light texture is blue, cyan and violet; the untextured (white) material renders grey.
    expect(mean(colours.map(chroma)), `wall colours ${JSON.stringify(colours.slice(0, 8))}`).toBeGreaterThan(25);
    expect(mean(colours.map(([r, , b]) => b - r))).toBeGreaterThan(10);
    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
  }, 60_000);
});
