/**
 * `make bench-viewer`: the 3D viewer in headless Chromium (Debian's, WebGL through SwiftShader —
 * software rendering, so a lower bound on what a GPU does), served by the server as shipped
 * (default configuration, access log on, the built bundle from dist/viewer).
 *
 * Content: the sample rooms and two real rooms of ../shared/assets/rooms (CC-BY, see its
 * LICENSES.md), baked into a temporary DATA_DIR. Per room, in the same run:
 *  1. first full frame: navigation start → the first frame rendered with the model and every slot
 *     frame (the page's `firstFullFrameMs`), cold browser cache, median of rounds;
 *     — over loopback, and over an emulated visitor connection (50 Mbit/s, 20 ms round trip);
 *  2. model download + decode, the optimized GLB (Draco + WebP; a fresh Draco decoder each time, its
 *     start included) against the source GLB, HTTP cache disabled, alternating, medians; ratio —
 *     over the emulated connection (the figure a visitor sees) and over loopback (decode only);
 *  3. the page's JavaScript weight (bundle + Draco decoder, gzip as served).
 * Screenshots (room, real room, exhibition) go to docs/screenshots/ as small PNGs.
 * Targets: first full frame ≤ 1.5 s; real room optimized load+decode ≤ 0.5× the source's.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import pino from 'pino';
import sharp from 'sharp';
import { publishManifest, readManifest } from '../artifacts/store.ts';
import { bakeRooms } from '../bake/pipeline.ts';
import { writeSampleContent } from '../bake/sample/generate.ts';
import { startServer } from '../server/app.ts';
import { loadConfig } from '../server/config.ts';
import { ViewerAssets } from '../server/view/assets.ts';
import { startModelServer } from '../test/fakes/model-server.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil } from '../test/helpers/chromium.ts';

const ROOT = resolve(import.meta.dirname, '..');
const SHARED_ROOMS = resolve(ROOT, '../shared/assets/rooms');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SHOTS = join(ROOT, 'docs', 'screenshots');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;

interface RoomRow {
  room: number;
  title: string;
  slots: number;
  source_bytes: number;
  optimized_bytes: number;
  first_full_frame_ms: number;
  first_full_frame_rounds: number[];
  first_full_frame_broadband_ms: number;
  /** Model download + decode over the emulated broadband connection. */
  load_optimized_ms: number;
  load_source_ms: number;
  ratio: number;
  /** The same over loopback (no transfer time: decode and decoder start only). */
  loopback_optimized_ms: number;
  loopback_source_ms: number;
  loopback_ratio: number;
}

async function bakeContent(work: string): Promise<string> {
  const content = join(work, 'content');
  await writeSampleContent(content);
  const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as Array<Record<string, unknown>>;
  const image = rooms[0]!.image;
  rooms.push(
    { id: 8, title: 'Cube Room (Naomi Chen, CC-BY 3.0)', architect: 'Naomi Chen', description: 'A real room: baked-light texture, no slot nodes.', series: 'Real rooms', slots: 8, token_id: '8', model: join(SHARED_ROOMS, 'cube-room.glb'), image },
    { id: 9, title: 'Garage (Brandon Jones et al., CC-BY 3.0)', architect: 'Brandon Jones', description: 'A real room with shelves and props.', series: 'Real rooms', slots: 8, token_id: '9', model: join(SHARED_ROOMS, 'garage.glb'), image },
  );
  writeFileSync(join(content, 'rooms.json'), JSON.stringify(rooms));
  const dataDir = join(work, 'data');
  const summary = await bakeRooms({ contentDir: content, dataDir, concurrency: 2 });
  if (summary.failed) throw new Error(`${summary.failed} rooms failed to bake`);
  return dataDir;
}

/** A visitor's connection for the download figures: 50 Mbit/s down, 20 ms round trip. */
const BROADBAND = { offline: false, latency: 20, downloadThroughput: (50e6 / 8) | 0, uploadThroughput: (10e6 / 8) | 0 };
type Network = typeof BROADBAND | null;

async function emulate(page: Page, network: Network) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  if (network) await cdp.send('Network.emulateNetworkConditions', network);
  return cdp;
}

async function firstFullFrame(browser: Browser, url: string, network: Network = null): Promise<number> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  await emulate(page, network);
  // Readiness is the page's own signal; the load event may wait on the presence stream or preloads.
  await page.goto(url, { waitUntil: 'commit', timeout: 60_000 });
  await pageUntil(page, 'window.museumViewer && window.museumViewer.firstFullFrameMs', 60_000);
  const state = (await page.evaluate('({ ms: museumViewer.firstFullFrameMs, error: museumViewer.error, slots: museumViewer.slots().length })')) as { ms: number; error: string | null };
  await context.close();
  if (state.error) throw new Error(`${url}: ${state.error}`);
  return state.ms;
}

async function loadTimes(page: Page, optimized: string, source: string, network: Network): Promise<{ optimized: number; source: number }> {
  const cdp = await emulate(page, network);
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  const o: number[] = [];
  const s: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    o.push((await page.evaluate(`museumViewer.measureLoad(${JSON.stringify(optimized)}, true)`)) as number);
    s.push((await page.evaluate(`museumViewer.measureLoad(${JSON.stringify(source)}, false)`)) as number);
  }
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
  await cdp.detach();
  return { optimized: median(o), source: median(s) };
}

async function screenshot(page: Page, name: string): Promise<void> {
  const png = await page.screenshot();
  await sharp(png).resize(960).png({ palette: true, quality: 100, compressionLevel: 9 }).toFile(join(SHOTS, name));
}

async function main(): Promise<void> {
  if (!HAS_CHROMIUM) throw new Error('needs /usr/bin/chromium (scripts/system-deps.sh)');
  const work = mkdtempSync(join(tmpdir(), 'museum-bench-viewer-'));
  const media = await startModelServer();
  try {
    process.stderr.write('baking the sample rooms and two real rooms…\n');
    const dataDir = await bakeContent(work);
    // Colourful artworks for the exhibition screenshot, from a local media host.
    const manifest = (await readManifest(dataDir))!;
    const hues = ['#c0392b', '#2874a6', '#d4ac0d', '#1e8449', '#7d3c98', '#ca6f1e'];
    for (const [i, hue] of hues.entries()) {
      const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="600" height="${i % 2 ? 800 : 450}"><defs><linearGradient id="g" x2="1" y2="1"><stop offset="0" stop-color="${hue}"/><stop offset="1" stop-color="#f4ecd8"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)"/><circle cx="300" cy="${i % 2 ? 400 : 225}" r="120" fill="#1b2631" fill-opacity="0.55"/></svg>`;
      media.files.set(`/art-${i}.png`, { body: await sharp(Buffer.from(svg)).png().toBuffer() });
      const a = manifest.artworks[i]!;
      manifest.artworks[i] = { ...a, media: { url: `${media.url}/art-${i}.png`, type: 'image', content_type: 'image/png', width: 600, height: i % 2 ? 800 : 450 }, ratio: i % 2 ? 0.75 : 600 / 450 };
    }
    await publishManifest(dataDir, manifest);

    const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, STATE_DB: join(work, 'state.db'), VIEWER_MEDIA_ALLOW_HOSTS: new URL(media.url).host });
    // The access log on (info), written where the default goes, minus the terminal.
    const server = await startServer(config, { log: pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false })) });
    const browser = await launchChromium();
    try {
      const published = (await readManifest(dataDir))!;
      const largestSample = [...published.rooms].filter((r) => r.id <= 7).sort((a, b) => (b.model?.bytes ?? 0) - (a.model?.bytes ?? 0))[0]!;
      const mostSlots = [...published.rooms].filter((r) => r.id <= 7).sort((a, b) => b.slots - a.slots)[0]!;
      const measured = [largestSample, ...(mostSlots.id === largestSample.id ? [] : [mostSlots]), ...published.rooms.filter((r) => r.id >= 8)];
      // Warm the server (bundle read, first texture of code paths) once.
      await firstFullFrame(browser, `${server.url}/view/rooms/${measured[0]!.id}`);
      const rows: RoomRow[] = [];
      for (const room of measured) {
        const url = `${server.url}/view/rooms/${room.id}`;
        const frames: number[] = [];
        const framesBroadband: number[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          frames.push(await firstFullFrame(browser, url));
          framesBroadband.push(await firstFullFrame(browser, url, BROADBAND));
        }
        const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
        await page.goto(url);
        await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
        const files = [`/files/${room.model_optimized!.sha256}.glb`, `/files/${room.model!.sha256}.glb`] as const;
        const times = await loadTimes(page, ...files, BROADBAND);
        const loopback = await loadTimes(page, ...files, null);
        const slots = (await page.evaluate('museumViewer.slots().length')) as number;
        if (room.id === mostSlots.id || room.id === 8) {
          await page.check('#facing');
          await page.evaluate('museumViewer.stage.renderNow()');
          await screenshot(page, room.id === 8 ? 'viewer-real-room.png' : 'viewer-room.png');
        }
        await page.close();
        const row: RoomRow = {
          room: room.id,
          title: room.title,
          slots,
          source_bytes: room.model!.bytes,
          optimized_bytes: room.model_optimized!.bytes,
          first_full_frame_ms: Math.round(median(frames)),
          first_full_frame_rounds: frames.map(Math.round),
          first_full_frame_broadband_ms: Math.round(median(framesBroadband)),
          load_optimized_ms: Math.round(times.optimized),
          load_source_ms: Math.round(times.source),
          ratio: Number((times.optimized / times.source).toFixed(2)),
          loopback_optimized_ms: Math.round(loopback.optimized),
          loopback_source_ms: Math.round(loopback.source),
          loopback_ratio: Number((loopback.optimized / loopback.source).toFixed(2)),
        };
        rows.push(row);
        process.stderr.write(
          `  room ${row.room} ${row.title} (${row.slots} slots): first full frame ${row.first_full_frame_ms} ms (broadband ${row.first_full_frame_broadband_ms} ms)` +
            ` · load+decode, broadband: optimized ${row.load_optimized_ms} ms (${kb(row.optimized_bytes)}) vs source ${row.load_source_ms} ms (${kb(row.source_bytes)}) = ${row.ratio}×` +
            ` · loopback: ${row.loopback_optimized_ms} vs ${row.loopback_source_ms} ms = ${row.loopback_ratio}×\n`,
        );
      }

      // The exhibition view, for the screenshot.
      await fetch(`${server.url}/v1/guide/exhibitions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          format: 'museum-exhibition@1',
          id: 'bench-show',
          name: 'Colour Studies',
          placements: [{ uid: 'hall', room: { id: mostSlots.id, title: mostSlots.title }, artworks: manifest.artworks.slice(0, 8).map((a) => ({ id: a.id })) }],
        }),
      });
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await page.goto(`${server.url}/view/exhibitions/bench-show`);
      await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
      const first = (await page.evaluate('museumViewer.hang.hung[2].slot')) as string;
      const at = (await page.evaluate(`(() => { const v = museumViewer; const p = v.focusSlot(${JSON.stringify(first)}); const r = v.canvasRect(); return { x: r.left + p.x, y: r.top + p.y }; })()`)) as { x: number; y: number };
      // Stand in front of the third work and click it for its record.
      await page.mouse.click(at.x, at.y);
      await screenshot(page, 'viewer-exhibition.png');
      await page.close();

      // Page weight: what a first visit transfers in JavaScript (gzip as served).
      const assets = await new ViewerAssets().load();
      const bundle = [...assets.files].find(([name]) => name === assets.urls.viewer.js.split('/').pop())![1];
      const dracoJs = assets.files.get(assets.urls.draco.js.split('/').pop()!)!;
      const dracoWasm = assets.files.get(assets.urls.draco.wasm.split('/').pop()!)!;
      const gz = (b: Buffer) => gzipSync(b, { level: 9 }).length;
      const weight = {
        bundle_bytes: bundle.body.length,
        bundle_gzip: gz(bundle.body),
        draco_js_gzip: gz(dracoJs.body),
        draco_wasm_bytes: dracoWasm.body.length,
        draco_wasm_gzip: gz(dracoWasm.body),
      };
      process.stderr.write(
        `  page JS: bundle ${kb(weight.bundle_bytes)} (${kb(weight.bundle_gzip)} gzip) · Draco decoder (rooms with Draco only) ${kb(weight.draco_js_gzip)} JS + ${kb(weight.draco_wasm_gzip)} wasm gzip\n`,
      );

      const result = { rounds: ROUNDS, rooms: rows, weight, at: new Date().toISOString() };
      mkdirSync(join(ROOT, '.bench'), { recursive: true });
      writeFileSync(join(ROOT, '.bench', 'viewer.json'), `${JSON.stringify(result, null, 1)}\n`);
      const worstFrame = Math.max(...rows.map((r) => r.first_full_frame_broadband_ms));
      const realRatio = Math.max(...rows.filter((r) => r.room >= 8).map((r) => r.ratio));
      console.log(`first full frame over broadband (median of ${ROUNDS}, worst room): ${worstFrame} ms — target ≤ 1500 ms: ${worstFrame <= 1500 ? 'met' : 'MISSED'}`);
      console.log(`real rooms, optimized/source load+decode over broadband (worst): ${realRatio}× — target ≤ 0.5×: ${realRatio <= 0.5 ? 'met' : 'MISSED'}`);
      console.log(`page JavaScript: ${kb(weight.bundle_gzip)} gzip (+ Draco ${kb(weight.draco_js_gzip + weight.draco_wasm_gzip)} gzip)`);
    } finally {
      await browser.close();
      await server.close();
    }
  } finally {
    await media.close();
    rmSync(work, { recursive: true, force: true });
  }
}

mkdirSync(SHOTS, { recursive: true });
await main();
