/**
 * Walk mode in real Chromium over a real bake of the sample content: the visitor keeps to the
 * navmesh (checked in Node with the navmesh module on the very triangles the page walked on),
 * holding W towards a wall stops in front of it, and the exhibition tour reaches every stop.
 * The page walks fast through its documented `?walk_speed=` option.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadNavigation, type Vec3 } from '../../artifacts/navmesh.ts';
import { readManifest } from '../../artifacts/store.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil, watchedPage } from '../helpers/chromium.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

interface SlotInfo {
  id: string;
  position: Vec3;
  facing: Vec3;
}

/** Whether `p` lies (in plan, within `tolerance` m) on a triangle of `floor`, at its height. */
function onTriangles(floor: { positions: number[]; indices: number[] }, p: Vec3, tolerance: number): boolean {
  const v = (i: number) => floor.positions.slice(3 * floor.indices[i]!, 3 * floor.indices[i]! + 3) as Vec3;
  for (let t = 0; t < floor.indices.length; t += 3) {
    const [a, b, c] = [v(t), v(t + 1), v(t + 2)];
    // Barycentric coordinates of p in the triangle's plan (x, z).
    const det = (b[2] - c[2]) * (a[0] - c[0]) + (c[0] - b[0]) * (a[2] - c[2]);
    if (Math.abs(det) < 1e-12) continue;
    const l1 = ((b[2] - c[2]) * (p[0] - c[0]) + (c[0] - b[0]) * (p[2] - c[2])) / det;
    const l2 = ((c[2] - a[2]) * (p[0] - c[0]) + (a[0] - c[0]) * (p[2] - c[2])) / det;
    const l3 = 1 - l1 - l2;
    const slack = tolerance / Math.sqrt(Math.abs(det));
    if (l1 < -slack || l2 < -slack || l3 < -slack) continue;
    const y = l1 * a[1] + l2 * b[1] + l3 * c[1];
    if (Math.abs(y - p[1]) < 0.35) return true;
  }
  return false;
}

const horizontal = (a: Vec3, b: Vec3) => Math.hypot(a[0] - b[0], a[2] - b[2]);

describe.skipIf(!HAS_CHROMIUM)('walk mode in Chromium', () => {
  let root: string;
  let server: TestServer;
  let browser: Browser;
  const exhibitionId = 'walk-test:1';

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'museum-walk-'));
    const dataDir = join(root, 'data');
    await writeSampleContent(join(root, 'content'));
    const summary = await bakeRooms({ contentDir: join(root, 'content'), dataDir, concurrency: 2 });
    expect(summary.failed).toBe(0);
    server = await startTestServer({ dataDir });
    const [a1, a2, a3] = (await readManifest(dataDir))!.artworks;
    const res = await server.post(
      '/v1/guide/exhibitions',
      {
        format: 'museum-exhibition@1',
        id: exhibitionId,
        name: 'A walk',
        placements: [
          { uid: 'annex', room: { id: 7, title: 'Annex' }, artworks: [{ id: a1!.id }, { id: a2!.id }, { id: a3!.id }] },
          { uid: 'pavilion', room: { id: 6, title: 'Pavilion' }, artworks: [{ id: a2!.id }, { id: a1!.id }] },
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
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('holding W towards a wall leaves the visitor on the navmesh in front of it', async () => {
    const { page, errors, failed } = await watchedPage(browser);
    await page.goto(`${server.url}/view/rooms/1?walk_speed=4`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    await page.check('#walk');
    const start = await pageUntil<Vec3>(page, 'window.museumViewer.visitor()');
    expect(await page.evaluate('window.museumViewer.floorSource')).toBe('baked'); // the room's navmesh_url GLB
    const { eye, floorY } = (await page.evaluate(
      '(() => { const s = window.museumViewer.stage; const p = s.camera.position; return { eye: p.y, floorY: s.floorAt(p.x, p.z) }; })()',
    )) as { eye: number; floorY: number };
    expect(eye - floorY).toBeCloseTo(1.6, 2); // eye 1.6 m above the floor under the feet
    expect(start[1] - floorY).toBeLessThan(0.3); // the feet on the navmesh, within a step of that floor

    const slot = (await page.evaluate(
      '(() => { const f = window.museumViewer.room.frames.frames[0].slot; return { id: f.id, position: f.position, facing: f.facing }; })()',
    )) as SlotInfo;
    // Look at the wall behind the frame at eye height, so W heads straight at it.
    await page.evaluate(`window.museumViewer.faceToward([${slot.position[0]}, ${eye}, ${slot.position[2]}])`);
    await page.keyboard.down('KeyW');
    // Several seconds of walking, far more than the room is wide, and until the visitor stands still
    // (a loaded machine draws fewer frames: the walk takes longer, it never goes further).
    const started = Date.now();
    let last = start;
    for (let still = 0; still < 4 && Date.now() - started < 20_000; ) {
      await page.waitForTimeout(250);
      const now = (await page.evaluate('window.museumViewer.visitor()')) as Vec3;
      still = Date.now() - started > 3_000 && horizontal(now, last) < 0.01 ? still + 1 : 0;
      last = now;
    }
    await page.keyboard.up('KeyW');
    const end = (await page.evaluate('window.museumViewer.visitor()')) as Vec3;
    const floor = (await page.evaluate('window.museumViewer.walkFloorTriangles()')) as { positions: number[]; indices: number[] };

    expect(horizontal(start, end)).toBeGreaterThan(1);
    // Exactly on one of the walked triangles (1 cm), and the navmesh module rebuilt from them finds
    // the floor there (its rebuild at 0.1 m cells may pull the edge in by up to a cell).
    expect(onTriangles(floor, end, 0.01)).toBe(true);
    const navigation = await loadNavigation(floor.positions, floor.indices);
    try {
      const near = navigation.closestPoint(end);
      expect(near).not.toBeNull();
      expect(horizontal(near!, end)).toBeLessThan(0.15);
      expect(Math.abs(near![1] - end[1])).toBeLessThan(0.35);
    } finally {
      navigation.destroy();
    }
    // On the near side of the wall (the frame faces into the room), stopped within a metre of it.
    const ahead = (end[0] - slot.position[0]) * slot.facing[0] + (end[2] - slot.position[2]) * slot.facing[2];
    expect(ahead).toBeGreaterThan(0.1);
    expect(ahead).toBeLessThan(1);
    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
    await page.close();
  });

  it('in walk mode a click on a frame walks along the navmesh to its view and faces it', async () => {
    const { page, errors, failed } = await watchedPage(browser);
    await page.goto(`${server.url}/view/rooms/1?walk_speed=10`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    await page.check('#walk');
    await pageUntil(page, 'window.museumViewer.visitor()');
    // Face slot 3's frame, then click its projected centre.
    const at = (await page.evaluate(`(() => {
      const v = window.museumViewer; const f = v.room.frames.frames[2].slot;
      v.faceToward(f.position); v.stage.renderNow();
      const p = new v.stage.camera.position.constructor(...f.position).project(v.stage.camera); const r = v.canvasRect();
      return { id: f.id, x: r.left + ((p.x + 1) / 2) * r.width, y: r.top + ((1 - p.y) / 2) * r.height };
    })()`)) as { id: string; x: number; y: number };
    await page.mouse.click(at.x, at.y);
    const view = (await page.evaluate(`window.museumViewer.viewOf(${JSON.stringify(at.id)})`)) as Vec3;
    const end = await pageUntil<Vec3>(
      page,
      `(() => { const v = window.museumViewer.visitor(); return Math.hypot(v[0] - ${view[0]}, v[2] - ${view[2]}) < 0.1 && v; })()`,
      15_000,
    );
    expect(horizontal(end, view)).toBeLessThan(0.1);
    // Facing the artwork: it is at the middle of the view.
    const centre = (await page.evaluate(`(() => {
      const v = window.museumViewer; const r = v.canvasRect(); return v.pickAt(r.width / 2, r.height / 2);
    })()`)) as string | null;
    expect(centre).toBe(at.id);
    expect(errors).toEqual([]);
    expect(failed).toEqual([]);
    await page.close();
  });

  it('the tour of an exhibition walks to every hung artwork and ends at the last one', async () => {
    const { page, errors, failed } = await watchedPage(browser);
    await page.goto(`${server.url}/view/exhibitions/${encodeURIComponent(exhibitionId)}?walk_speed=20`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    const stops = (await page.evaluate('window.museumViewer.tour()')) as Array<{
      placement: number;
      slot: string;
      view: Vec3;
      visitor: Vec3;
    }>;
    // Walked along the server's tour route (GET …/tour answered; a failure would be in `failed`).
    expect(stops.map((s) => s.placement)).toEqual([0, 0, 0, 1, 1]);
    for (const stop of stops) expect(horizontal(stop.visitor, stop.view)).toBeLessThan(0.15);
    const last = stops.at(-1)!;
    const end = (await page.evaluate('window.museumViewer.visitor()')) as Vec3;
    expect(horizontal(end, last.view)).toBeLessThan(0.15);
    // The sample artworks' images live on hosts this test does not serve: their frames show placeholders.
    expect(failed.filter((f) => !/^502 .*\/view\/textures\//.test(f))).toEqual([]);
    expect(errors.filter((e) => !/status of 502/.test(e))).toEqual([]);
    await page.close();
  });
});
