/**
 * `make screenshots`: the README's pictures of issue #42, re-made from code (headless Chromium,
 * SwiftShader, the server as shipped over a fresh bake; needs `make build`):
 *  - docs/screenshots/viewer-variants.png: the textured real room (Cube Room, room 8 in a bake of
 *    the sample and the real rooms, as test/viewer/variants-browser.test.ts bakes it) in each model
 *    variant — draco, meshopt, plain, ktx2 — from one camera (the draco page's overview, set on
 *    the others), composed two by two, each labelled with its variant, file size and the texture
 *    format the GPU got;
 *  - docs/screenshots/qa-plan.png: the QA report's plan picture of a real room (`/report`: the
 *    walkable floor of its navmesh in green, the spawn ring, each slot's view joined to its frame).
 * The other README screenshots come from `make bench-viewer` (viewer-room, viewer-real-room,
 * viewer-exhibition) and the walk test (viewer-walk).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { bakeRooms } from '../bake/pipeline.ts';
import { writeSampleContent } from '../bake/sample/generate.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil, watchedPage } from '../test/helpers/chromium.ts';
import { startTestServer } from '../test/helpers/server.ts';

const ROOT = resolve(import.meta.dirname, '..');
const SHOTS = join(ROOT, 'docs', 'screenshots');
const SHARED_ROOMS = resolve(ROOT, '../shared/assets/rooms');
const REAL_ROOMS = [
  { id: 8, file: 'cube-room.glb', title: 'Cube Room (Naomi Chen, CC-BY 3.0)' },
  { id: 9, file: 'garage.glb', title: 'Garage (Brandon Jones et al., CC-BY 3.0)' },
];
const TEXTURED_ROOM = 8;
/** The room whose plan picture is shown: `SCREENSHOT_PLAN_ROOM` (default the garage, the larger floor). */
const PLAN_ROOM = Number(process.env.SCREENSHOT_PLAN_ROOM ?? 9);
const VARIANTS = ['draco', 'meshopt', 'plain', 'ktx2'] as const;
/** Each variant's tile: the canvas scaled to this width. */
const TILE = 640;

/** The textures of the model on stage: the GPU format three gave each (a compressed block format, or RGBA). */
const TEXTURE_FORMATS = `(() => {
  const names = { 1023: 'RGBA8', 36492: 'BC7', 37808: 'ASTC 4×4', 37492: 'ETC2', 36196: 'ETC1', 33776: 'BC1', 33779: 'BC3' };
  const out = new Set();
  window.museumViewer.stage.model.traverse((o) => {
    for (const m of [o.material].flat()) if (m) for (const v of Object.values(m)) if (v && v.isTexture) {
      const size = (v.image && v.image.width) || (v.mipmaps && v.mipmaps[0] && v.mipmaps[0].width) || 0;
      out.add((names[v.format] ?? 'format ' + v.format) + ' ' + size + '²');
    }
  });
  return [...out].join(', ');
})()`;

async function bake(work: string): Promise<string> {
  const content = join(work, 'content');
  await writeSampleContent(content);
  const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as Array<Record<string, unknown>>;
  for (const r of REAL_ROOMS)
    rooms.push({ ...rooms[0], id: r.id, title: r.title, token_id: String(r.id), slots: 8, model: join(SHARED_ROOMS, r.file) });
  writeFileSync(join(content, 'rooms.json'), JSON.stringify(rooms));
  const dataDir = join(work, 'data');
  const summary = await bakeRooms({ contentDir: content, dataDir, concurrency: 2 });
  if (summary.failed) throw new Error(`${summary.failed} rooms failed to bake`);
  return dataDir;
}

const label = (text: string, width: number) =>
  Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="34"><rect width="100%" height="100%" fill="#111418"/>` +
      `<text x="12" y="23" font-family="DejaVu Sans, sans-serif" font-size="17" fill="#e6e6e6">${text}</text></svg>`,
  );

async function main(): Promise<void> {
  if (!HAS_CHROMIUM) throw new Error('needs /usr/bin/chromium (scripts/system-deps.sh)');
  const work = mkdtempSync(join(tmpdir(), 'museum-screenshots-'));
  try {
    process.stderr.write('baking the sample rooms and the real rooms…\n');
    const server = await startTestServer({ dataDir: await bake(work) });
    const browser = await launchChromium();
    try {
      mkdirSync(SHOTS, { recursive: true });
      // One camera for every variant: the draco page's overview.
      let camera: { position: number[]; target: number[] } | null = null;
      const tiles: Buffer[] = [];
      for (const variant of VARIANTS) {
        const { page, errors } = await watchedPage(browser);
        await page.goto(`${server.url}/view/rooms/${TEXTURED_ROOM}?variant=${variant}`);
        await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
        const shown = (await page.evaluate('({ error: museumViewer.error, model: museumViewer.model() })')) as {
          error: string | null;
          model: { name: string; bytes: number } | null;
        };
        if (shown.error || shown.model?.name !== variant) throw new Error(`${variant}: ${shown.error ?? `showed ${shown.model?.name}`}`);
        if (errors.length) throw new Error(`${variant}: ${errors.join('; ')}`);
        camera ??= (await page.evaluate(
          '({ position: museumViewer.stage.camera.position.toArray(), target: museumViewer.stage.orbit.target.toArray() })',
        )) as { position: number[]; target: number[] };
        await page.evaluate(`(() => {
          const s = museumViewer.stage;
          s.camera.position.fromArray(${JSON.stringify(camera.position)});
          s.orbit.target.fromArray(${JSON.stringify(camera.target)});
          s.orbit.update();
          s.renderNow();
        })()`);
        const formats = (await page.evaluate(TEXTURE_FORMATS)) as string;
        const canvas = await sharp(await page.locator('#stage canvas').screenshot())
          .resize(TILE)
          .png()
          .toBuffer();
        const { height = 0 } = await sharp(canvas).metadata();
        const text = `${variant} · ${(shown.model.bytes / 1024).toFixed(0)} KB · GPU texture ${formats}`;
        tiles.push(
          await sharp({ create: { width: TILE, height: height + 34, channels: 3, background: '#111418' } })
            .composite([
              { input: label(text, TILE), top: 0, left: 0 },
              { input: canvas, top: 34, left: 0 },
            ])
            .png()
            .toBuffer(),
        );
        await page.close();
      }
      const { height: tileHeight = 0 } = await sharp(tiles[0]!).metadata();
      const gap = 4;
      await sharp({ create: { width: 2 * TILE + gap, height: 2 * tileHeight + gap, channels: 3, background: '#000000' } })
        .composite(tiles.map((input, i) => ({ input, left: (i % 2) * (TILE + gap), top: Math.floor(i / 2) * (tileHeight + gap) })))
        .png({ palette: true, quality: 100, compressionLevel: 9 })
        .toFile(join(SHOTS, 'viewer-variants.png'));
      process.stderr.write(`wrote ${join(SHOTS, 'viewer-variants.png')}\n`);

      // The QA report's plan picture of one real room (its thumbnail is left out: this bake gives the real
      // rooms the sample's picture).
      const { page } = await watchedPage(browser, { width: 1280, height: 900 });
      await page.goto(`${server.url}/report`);
      const plan = page.locator(`#room-${PLAN_ROOM} figure:has(img.plan)`);
      await plan.scrollIntoViewIfNeeded();
      await sharp(await plan.screenshot())
        .png({ palette: true, quality: 100, compressionLevel: 9 })
        .toFile(join(SHOTS, 'qa-plan.png'));
      process.stderr.write(`wrote ${join(SHOTS, 'qa-plan.png')}\n`);
      await page.close();
    } finally {
      await browser.close();
      await server.close();
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
