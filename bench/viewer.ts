/**
 * `make bench-viewer`: the 3D viewer in headless Chromium (Debian's, WebGL through SwiftShader —
 * software rendering, so a lower bound on what a GPU does), served by the server as shipped
 * (default configuration, access log on, the built bundle from dist/viewer).
 *
 * Content: the sample rooms and the real rooms of ../shared/assets/rooms (cube-room, garage; CC-BY,
 * see its LICENSES.md), baked by the project's bake (every model variant) into a temporary DATA_DIR.
 * For each model variant (draco, meshopt, plain, and ktx2 where the model has textures) of each real room (and, as references, its source
 * model and its Draco model written with no geometry codec, which decodes nothing but the same
 * textures), a fresh page per measurement (fresh browser
 * context, HTTP cache disabled), over an emulated visitor connection (CDP: 50 Mbit/s, 20 ms round
 * trip) and over loopback (no transfer time), the variants taking turns; medians of BENCH_ROUNDS (7):
 *  - request → parsed scene: a viewer page that has loaded no model and no decoder yet loads the
 *    model as the room page does (`museumViewer.measureLoad`: the decoder it needs requested beside
 *    it) up to GLTFLoader's parsed scene — the decoder's download and start included;
 *  - the room page itself, `/view/rooms/{id}?variant=…`: navigation → parsed scene, and → the first
 *    frame with every slot frame;
 *  - bytes: the file, and its body on the wire as transferred (Content-Encoding as /files sent it),
 *    plus the decoder's (or Basis transcoder's) bytes on the wire;
 *  - GPU texture bytes (issue #42): after the room page's first full frame, what the WebGL context
 *    allocated for the model's textures, every mip level in the format three uploaded (a page-side
 *    hook on the context, GPU_HOOK: benchmark only), checked against three's texture objects;
 *  - the Basis transcoder alone (ktx2), in a fresh page: its fetch, its worker's start (the first
 *    transcode of the room's textures minus the second) and the transcode itself.
 * Targets: meshopt ≤ 0.6× Draco, request → parsed scene over the emulated connection, on the median
 * room (issue 36; 0.5× stretch); Draco ≤ 0.5× the source model (model_url, measured the same way as
 * a reference); the first full frame ≤ 1.5 s; ktx2 (issue #42): GPU texture bytes summed over the real
 * rooms ≤ 0.3× meshopt's, its first full frame ≤ 1.8× meshopt's (the transcoder's fetch and start
 * included), and its bytes on the wire against meshopt's WebP. Also: the page's JavaScript weight, the
 * README screenshots.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, Page } from 'playwright-core';
import pino from 'pino';
import sharp from 'sharp';
import { filePath, type Manifest, type ManifestModelVariant } from '../artifacts/format.ts';
import { putContentFile, publishManifest, readManifest } from '../artifacts/store.ts';
import { readModel, writeGlb } from '../bake/gltf-io.ts';
import { bakeRooms } from '../bake/pipeline.ts';
import { writeSampleContent } from '../bake/sample/generate.ts';
import { startServer } from '../server/app.ts';
import { loadConfig } from '../server/config.ts';
import { ViewerAssets } from '../server/view/assets.ts';
import { type FakeModelServer, startModelServer } from '../test/fakes/model-server.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil } from '../test/helpers/chromium.ts';
import { median } from './stats.ts';

const ROOT = resolve(import.meta.dirname, '..');
const SHARED_ROOMS = resolve(ROOT, '../shared/assets/rooms');
const REAL_ROOMS = [
  { id: 8, file: 'cube-room.glb', title: 'Cube Room (Naomi Chen, CC-BY 3.0)', architect: 'Naomi Chen' },
  { id: 9, file: 'garage.glb', title: 'Garage (Brandon Jones et al., CC-BY 3.0)', architect: 'Brandon Jones' },
];
/** ktx2 only where the room's model has textures (the cube room; the garage has none). */
const VARIANTS = ['draco', 'meshopt', 'plain', 'ktx2'] as const;
type VariantName = (typeof VARIANTS)[number];
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const SHOTS = join(ROOT, 'docs', 'screenshots');

const kb = (n: number) => `${(n / 1024).toFixed(0)} KB`;

/** A visitor's connection: 50 Mbit/s down, 20 ms round trip. */
const BROADBAND = { offline: false, latency: 20, downloadThroughput: (50e6 / 8) | 0, uploadThroughput: (10e6 / 8) | 0 };
type Network = typeof BROADBAND | null;

async function bakeContent(work: string): Promise<string> {
  const content = join(work, 'content');
  await writeSampleContent(content);
  const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as Array<Record<string, unknown>>;
  const image = rooms[0]!.image;
  for (const r of REAL_ROOMS) {
    const { id, title, architect } = r;
    rooms.push({
      id,
      title,
      architect,
      description: 'A real room.',
      series: 'Real rooms',
      slots: 8,
      token_id: String(id),
      model: join(SHARED_ROOMS, r.file),
      image,
    });
  }
  writeFileSync(join(content, 'rooms.json'), JSON.stringify(rooms));
  const dataDir = join(work, 'data');
  const started = Date.now();
  const summary = await bakeRooms({ contentDir: content, dataDir, concurrency: 2 });
  if (summary.failed) throw new Error(`${summary.failed} rooms failed to bake`);
  process.stderr.write(`  baked in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  return dataDir;
}

/** A fresh page per measurement: a new browser context, its HTTP cache disabled, the network emulated or not. */
async function freshPage(browser: Browser, network: Network): Promise<{ page: Page; close: () => Promise<void> }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  if (network) await cdp.send('Network.emulateNetworkConditions', network);
  return { page, close: () => context.close() };
}

interface ModelLoad {
  /** The model's request → its parsed scene, the decoder's download and start included. */
  ms: number;
  wireBytes: number;
  encoding: string;
  decoderWireBytes: number;
}

/** Bytes on the wire (as transferred: the body before Content-Encoding is undone) of the model and the decoders. */
const WIRE_BYTES = (modelUrl: string) => `(() => {
  const entries = performance.getEntriesByType('resource').map((e) => ({ path: new URL(e.name).pathname, bytes: e.encodedBodySize }));
  return {
    model: entries.filter((e) => e.path === ${JSON.stringify(modelUrl)}).reduce((n, e) => Math.max(n, e.bytes), 0),
    decoders: entries.filter((e) => /\\/(draco_wasm_wrapper|draco_decoder|meshopt_decoder|basis_transcoder)-/.test(e.path)).reduce((n, e) => n + e.bytes, 0),
  };
})()`;

/**
 * Page-side (benchmark only, never in the product): what the page's WebGL contexts allocate for
 * each texture object. three (WebGL 2) allocates every 2D texture with texStorage2D (all its mip
 * levels, in its internal format) and then fills it (texSubImage2D + generateMipmap for images,
 * compressedTexSubImage2D per level for KTX2); texImage2D / compressedTexImage2D are counted per
 * level too, for any other path. Bytes per level from the internal format: uncompressed bytes per
 * pixel, or 4×4 blocks of 8 or 16 bytes for the block formats. The compressed data actually passed
 * is summed beside it as a check.
 */
const GPU_HOOK = `(() => {
  const PIXEL = { 0x8058: ['RGBA8', 4], 0x8c43: ['SRGB8_ALPHA8', 4], 0x1908: ['RGBA', 4], 0x8051: ['RGB8', 3], 0x1907: ['RGB', 3],
    0x8229: ['R8', 1], 0x822b: ['RG8', 2], 0x1909: ['LUMINANCE', 1], 0x881a: ['RGBA16F', 8], 0x8814: ['RGBA32F', 16] };
  const BLOCK = { 0x8d64: ['ETC1_RGB8', 8], 0x9274: ['RGB8_ETC2', 8], 0x9275: ['SRGB8_ETC2', 8], 0x9276: ['RGB8_PUNCHTHROUGH_ETC2', 8],
    0x9277: ['SRGB8_PUNCHTHROUGH_ETC2', 8], 0x9278: ['RGBA8_ETC2_EAC', 16], 0x9279: ['SRGB8_ALPHA8_ETC2_EAC', 16],
    0x9270: ['R11_EAC', 8], 0x9272: ['RG11_EAC', 16], 0x83f0: ['RGB_S3TC_DXT1', 8], 0x83f1: ['RGBA_S3TC_DXT1', 8],
    0x8c4c: ['SRGB_S3TC_DXT1', 8], 0x8c4d: ['SRGB_ALPHA_S3TC_DXT1', 8], 0x83f2: ['RGBA_S3TC_DXT3', 16], 0x83f3: ['RGBA_S3TC_DXT5', 16],
    0x8c4f: ['SRGB_ALPHA_S3TC_DXT5', 16], 0x8e8c: ['RGBA_BPTC', 16], 0x8e8d: ['SRGB_ALPHA_BPTC', 16],
    0x93b0: ['RGBA_ASTC_4x4', 16], 0x93d0: ['SRGB8_ALPHA8_ASTC_4x4', 16] };
  const levelBytes = (format, w, h) => {
    if (BLOCK[format]) return Math.ceil(w / 4) * Math.ceil(h / 4) * BLOCK[format][1];
    return w * h * (PIXEL[format] ? PIXEL[format][1] : 4);
  };
  const formatName = (f) => (BLOCK[f] || PIXEL[f] || ['0x' + f.toString(16)])[0];
  /** Per WebGLTexture: { format, width, height, levels: Map(level → bytes), uploaded }. */
  const textures = new Map();
  const bound = new WeakMap();
  const state = (gl) => { let s = bound.get(gl); if (!s) bound.set(gl, (s = { unit: 0, on: new Map() })); return s; };
  const current = (gl, target) => {
    const s = state(gl);
    const key = s.unit + ':' + (target >= 0x8515 && target <= 0x851a ? 0x8513 : target);
    return s.on.get(key);
  };
  const entry = (tex) => { let e = textures.get(tex); if (!e) textures.set(tex, (e = { format: 0, width: 0, height: 0, levels: new Map(), uploaded: 0 })); return e; };
  for (const P of [WebGL2RenderingContext.prototype, WebGLRenderingContext.prototype]) {
    const wrap = (name, after) => {
      const original = P[name];
      P[name] = function (...args) { const r = original.apply(this, args); try { after(this, args); } catch {} return r; };
    };
    wrap('activeTexture', (gl, [unit]) => (state(gl).unit = unit - 0x84c0));
    wrap('bindTexture', (gl, [target, tex]) => { const s = state(gl); s.on.set(s.unit + ':' + target, tex); });
    wrap('deleteTexture', (gl, [tex]) => textures.delete(tex));
    if (P.texStorage2D) wrap('texStorage2D', (gl, [target, levels, format, w, h]) => {
      const tex = current(gl, target); if (!tex) return;
      const e = entry(tex); Object.assign(e, { format, width: w, height: h });
      const faces = target === 0x8513 ? 6 : 1;
      for (let l = 0; l < levels; l++) e.levels.set(l, faces * levelBytes(format, Math.max(1, w >> l), Math.max(1, h >> l)));
    });
    wrap('texImage2D', (gl, args) => {
      const [target, level, format] = args;
      const tex = current(gl, target); if (!tex) return;
      let w = args[3], h = args[4];
      if (args.length === 6) { const src = args[5]; w = src.width || src.videoWidth || src.displayWidth; h = src.height || src.videoHeight || src.displayHeight; }
      const e = entry(tex); if (level === 0) Object.assign(e, { format, width: w, height: h });
      e.levels.set(level, levelBytes(format, w, h));
    });
    wrap('compressedTexImage2D', (gl, [target, level, format, w, h, border, data]) => {
      const tex = current(gl, target); if (!tex) return;
      const e = entry(tex); if (level === 0) Object.assign(e, { format, width: w, height: h });
      e.levels.set(level, data.byteLength); e.uploaded += data.byteLength;
    });
    wrap('compressedTexSubImage2D', (gl, [target, , , , , , , data]) => { const tex = current(gl, target); if (tex) entry(tex).uploaded += data.byteLength; });
  }
  window.__gpuTextures = { textures, formatName };
})()`;

/**
 * After the first full frame: the GPU bytes of the model's textures (each three texture's
 * WebGLTexture as the hook saw it allocated), every texture the page allocated, and, as a check,
 * the same sum from three's objects (CompressedTexture.mipmaps data; w×h×4 × 4/3 for an image).
 */
const GPU_BYTES = `(() => {
  const { textures, formatName } = window.__gpuTextures;
  const v = window.museumViewer, renderer = v.stage.renderer;
  const sum = (e) => [...e.levels.values()].reduce((n, b) => n + b, 0);
  const found = new Set();
  v.stage.model.traverse((o) => { for (const m of [o.material].flat()) if (m) for (const x of Object.values(m)) if (x && x.isTexture) found.add(x); });
  const model = [...found].map((t) => {
    const gl = renderer.properties.get(t).__webglTexture;
    const e = gl && textures.get(gl);
    const three = t.isCompressedTexture
      ? t.mipmaps.reduce((n, m) => n + m.data.byteLength, 0)
      : Math.round((t.image.width * t.image.height * 4 * (t.generateMipmaps ? 4 : 3)) / 3);
    return e
      ? { format: formatName(e.format), width: e.width, height: e.height, levels: e.levels.size, bytes: sum(e), uploaded: e.uploaded, three }
      : { format: 'not uploaded', width: 0, height: 0, levels: 0, bytes: 0, uploaded: 0, three };
  });
  return {
    model,
    modelBytes: model.reduce((n, t) => n + t.bytes, 0),
    pageBytes: [...textures.values()].reduce((n, e) => n + sum(e), 0),
    pageTextures: textures.size,
  };
})()`;

/** When (ms since navigation start) the model and the Basis transcoder's files were asked for and had arrived. */
const PAGE_TIMING = (modelUrl: string) => `(() => {
  const entries = performance.getEntriesByType('resource').map((e) => ({ path: new URL(e.name).pathname, start: e.startTime, end: e.responseEnd, bytes: e.encodedBodySize }));
  const model = entries.find((e) => e.path === ${JSON.stringify(modelUrl)});
  const basis = entries.filter((e) => /\\/basis_transcoder-/.test(e.path));
  return {
    modelArrived: model ? model.end : null,
    transcoderStart: basis.length ? Math.min(...basis.map((e) => e.start)) : null,
    transcoderArrived: basis.length ? Math.max(...basis.map((e) => e.end)) : null,
  };
})()`;

/**
 * Load one variant in a fresh viewer page that has loaded no model and no decoder yet (an
 * exhibition whose only room the museum does not know), as the page loads its room model.
 */
async function measureModel(browser: Browser, blankUrl: string, variant: Model, network: Network): Promise<ModelLoad> {
  const { page, close } = await freshPage(browser, network);
  try {
    const url = `/files/${variant.file.sha256}.${variant.file.ext}`;
    let encoding = '?';
    page.on('response', (r) => {
      if (new URL(r.url()).pathname === url) encoding = r.headers()['content-encoding'] ?? 'identity';
    });
    await page.goto(blankUrl);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    const load = page.evaluate(`museumViewer.measureLoad(${JSON.stringify(url)}, ${JSON.stringify(variant.extensions_required)})`);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`page never satisfied: measureLoad(${url}) within 30 s`)), 30_000);
    });
    const ms = (await Promise.race([load, late]).finally(() => clearTimeout(timer))) as number;
    const wire = (await page.evaluate(WIRE_BYTES(url))) as { model: number; decoders: number };
    return { ms, wireBytes: wire.model, encoding, decoderWireBytes: wire.decoders };
  } finally {
    await close();
  }
}

interface GpuTexture {
  format: string;
  width: number;
  height: number;
  levels: number;
  bytes: number;
  uploaded: number;
  three: number;
}

interface PageLoad {
  scene: number;
  frame: number;
  /** GPU bytes of the model's textures (as allocated), and of every texture the page allocated. */
  gpuModelBytes: number;
  gpuPageBytes: number;
  /** The same sum computed from three's texture objects (a check on the hook). */
  gpuThreeBytes: number;
  textures: GpuTexture[];
  modelArrived: number | null;
  transcoderStart: number | null;
  transcoderArrived: number | null;
}

/**
 * The room page itself with `?variant=`: navigation → parsed scene, and → the first frame with
 * every slot frame; then what the first frame made the GPU hold in textures (GPU_HOOK).
 */
async function measurePage(browser: Browser, roomUrl: string, variant: VariantName, network: Network): Promise<PageLoad> {
  const { page, close } = await freshPage(browser, network);
  try {
    await page.addInitScript(GPU_HOOK);
    const pending = new Set<string>();
    page.on('request', (r) => pending.add(r.url()));
    page.on('requestfinished', (r) => pending.delete(r.url()));
    page.on('requestfailed', (r) => pending.delete(r.url()));
    // Readiness is the page's own signal; the load event may wait on preloads.
    await page.goto(`${roomUrl}?variant=${variant}`, { waitUntil: 'commit', timeout: 60_000 });
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready', 30_000).catch(async (err: Error) => {
      const status = await page.evaluate('["status", "warning"].map((id) => document.getElementById(id)?.textContent).join(" ")');
      throw new Error(`${roomUrl}?variant=${variant}: ${err.message} (page: ${status}; pending: ${[...pending].join(', ')})`);
    });
    await pageUntil(page, 'window.museumViewer.firstFullFrameMs !== null', 10_000);
    const t = (await page.evaluate(
      '({ model: museumViewer.model(), frame: museumViewer.firstFullFrameMs, ' +
        'error: museumViewer.error, slots: museumViewer.slots().length })',
    )) as {
      model: { name: string; url: string; parsedAt: number } | null;
      frame: number | null;
      error: string | null;
      slots: number;
    };
    if (t.error || t.model?.name !== variant || !t.slots || !t.frame)
      throw new Error(`${roomUrl}?variant=${variant}: ${t.error ?? `showed ${t.model?.name}, ${t.slots} slots, first frame ${t.frame}`}`);
    const gpu = (await page.evaluate(GPU_BYTES)) as { model: GpuTexture[]; modelBytes: number; pageBytes: number };
    const timing = (await page.evaluate(PAGE_TIMING(t.model.url))) as Pick<
      PageLoad,
      'modelArrived' | 'transcoderStart' | 'transcoderArrived'
    >;
    return {
      scene: t.model.parsedAt,
      frame: t.frame,
      gpuModelBytes: gpu.modelBytes,
      gpuPageBytes: gpu.pageBytes,
      gpuThreeBytes: gpu.model.reduce((n, x) => n + x.three, 0),
      textures: gpu.model,
      ...timing,
    };
  } finally {
    await close();
  }
}

interface TranscoderStart {
  /** KTX2Loader.init(): the transcoder's JS and wasm fetched (the page's preload hints do the same). */
  fetchMs: number;
  /** The first transcode of the room's textures: the worker's creation, wasm compile and start, and the transcode. */
  coldMs: number;
  /** The same textures again on the started worker: the transcode alone. */
  warmMs: number;
  wireBytes: number;
}

/**
 * The Basis transcoder's cost, apart, in a fresh viewer page that has loaded none (the blank page)
 * over the emulated connection: fetch, then the room's KTX2 textures (from its ktx2 GLB) transcoded
 * twice in the page's own KTX2Loader; worker start ≈ cold − warm.
 */
async function measureTranscoder(browser: Browser, blankUrl: string, ktx2Images: string[], network: Network): Promise<TranscoderStart> {
  const { page, close } = await freshPage(browser, network);
  try {
    await page.goto(blankUrl);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    const result = (await page.evaluate(`(async () => {
      const stage = window.museumViewer.stage;
      stage.newLoader();
      const ktx2 = stage.ktx2;
      const images = ${JSON.stringify(ktx2Images)}.map((b64) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
      const transcodeAll = () => Promise.all(images.map((bytes) => new Promise((resolve, reject) => ktx2.parse(bytes.slice().buffer, resolve, reject))))
        .then((textures) => textures.forEach((t) => t.dispose()));
      const t0 = performance.now();
      await ktx2.init();
      const t1 = performance.now();
      await transcodeAll();
      const t2 = performance.now();
      await transcodeAll();
      const t3 = performance.now();
      return { fetchMs: t1 - t0, coldMs: t2 - t1, warmMs: t3 - t2 };
    })()`)) as Omit<TranscoderStart, 'wireBytes'>;
    const wireBytes = (await page.evaluate(
      `performance.getEntriesByType('resource').filter((e) => /\\/basis_transcoder-/.test(e.name)).reduce((n, e) => n + e.encodedBodySize, 0)`,
    )) as number;
    return { ...result, wireBytes };
  } finally {
    await close();
  }
}

/** A variant, or a reference: the source model, or the Draco model with no geometry codec (see noCodecReference). */
type Reference = 'source' | 'no-codec';
type Model = Pick<ManifestModelVariant, 'file' | 'extensions_required'> & { name: VariantName | Reference };

/**
 * A load with no geometry codec: the Draco model's own geometry (decoded by glTF-Transform, float32)
 * and its textures, the same bytes, written with no compression. It fetches no decoder and decodes
 * nothing but the textures every variant has: where it is as fast as meshopt (the cube room), the
 * geometry codec is off the critical path. Stored beside the bake's files: /files sends it br-encoded.
 */
async function noCodecReference(dataDir: string, draco: ManifestModelVariant): Promise<Model> {
  const document = await readModel(readFileSync(filePath(dataDir, draco.file)));
  for (const e of document.getRoot().listExtensionsUsed()) if (e.extensionName === 'KHR_draco_mesh_compression') e.dispose();
  const glb = await writeGlb(document, { compact: true });
  const required = draco.extensions_required.filter((e) => e !== 'KHR_draco_mesh_compression');
  return { name: 'no-codec', file: await putContentFile(dataDir, glb, 'glb'), extensions_required: required };
}

interface VariantRow {
  variant: VariantName | Reference;
  bytes: number;
  wire_bytes: number;
  content_encoding: string;
  decoder_wire_bytes: number;
  /** Medians over the emulated connection. */
  request_to_scene_ms: number;
  navigation_to_scene_ms: number | null;
  first_full_frame_ms: number | null;
  request_to_scene_rounds: number[];
  /** Request → parsed scene over loopback (decode and decoder start, no transfer). */
  loopback_request_to_scene_ms: number;
  /** The room page's first full frame, per round (paired with the other variants' of the same round). */
  first_full_frame_rounds: number[];
  /** GPU bytes of the model's textures after the first full frame (as allocated: every mip level), and the page's in all. */
  gpu_texture_bytes: number | null;
  gpu_page_texture_bytes: number | null;
  /** The model's textures as uploaded: format, size, mip levels, bytes. */
  gpu_textures: GpuTexture[];
  /** Of the texture images in the file: their bytes (WebP, PNG, KTX2) and their kinds. */
  texture_file_bytes: number;
  texture_mime_types: string[];
  /** Room page medians, ms from navigation start: the model and the transcoder's files arrived. */
  model_arrived_ms: number | null;
  transcoder_requested_ms: number | null;
  transcoder_arrived_ms: number | null;
}

/** Page loads that never got ready (all requests pending), retried; reported with the results. */
const stalls: string[] = [];

/**
 * Once in a few hundred page loads on this VM, a fresh page's subresources all stayed pending (see
 * RESULTS.md): such a load is noted and measured again, at most twice, rather than ending the run.
 */
async function retried<T>(measurement: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await measurement();
    } catch (err) {
      if (attempt === 2 || !/page never satisfied/.test(String(err))) throw err;
      stalls.push(String(err));
      process.stderr.write(`  stalled, measured again: ${String(err).slice(0, 400)}\n`);
    }
  }
}

/** The texture images a GLB holds: their bytes (base64, for the page) and MIME types. */
async function textureImages(dataDir: string, file: ManifestModelVariant['file']) {
  const document = await readModel(readFileSync(filePath(dataDir, file)));
  return document
    .getRoot()
    .listTextures()
    .map((t) => ({ bytes: t.getImage()!, mimeType: t.getMimeType() }));
}

const medianOrNull = (xs: Array<number | null>) => {
  const known = xs.filter((x): x is number => x !== null);
  return known.length ? Math.round(median(known)) : null;
};

async function measureRoom(
  browser: Browser,
  serverUrl: string,
  manifest: Manifest,
  roomId: number,
  blankUrl: string,
  dataDir: string,
): Promise<{ rows: VariantRow[]; transcoder: TranscoderStart[] }> {
  const room = manifest.rooms.find((r) => r.id === roomId)!;
  const variants: Model[] = [];
  for (const name of VARIANTS) {
    const found = (room.model_variants ?? []).find((v) => v.name === name);
    // ktx2 exists only for a room whose model has textures.
    if (!found && name === 'ktx2') continue;
    if (!found) throw new Error(`room ${roomId} has no ${name} variant`);
    variants.push({ ...found, name });
  }
  // The source model (model_url) beside them, as the reference the optimized model was first measured against.
  variants.push({ name: 'source', file: room.model!, extensions_required: [] });
  variants.push(await noCodecReference(dataDir, variants[0]! as ManifestModelVariant));
  const images = await Promise.all(variants.map((v) => textureImages(dataDir, v.file)));
  const ktx2 = variants.findIndex((v) => v.name === 'ktx2');
  const ktx2Images = ktx2 < 0 ? [] : images[ktx2]!.map((i) => Buffer.from(i.bytes).toString('base64'));
  const transcoder: TranscoderStart[] = [];
  const runs = variants.map(() => ({
    broadband: [] as ModelLoad[],
    loopback: [] as number[],
    pages: [] as PageLoad[],
  }));
  // The variants take turns, so a drift of the machine's speed touches them alike.
  for (let i = 0; i < ROUNDS; i++) {
    for (const [k, variant] of variants.entries()) {
      const run = runs[k]!;
      run.broadband.push(await retried(() => measureModel(browser, blankUrl, variant, BROADBAND)));
      run.loopback.push((await retried(() => measureModel(browser, blankUrl, variant, null))).ms);
      const name = variant.name;
      if (name === 'source' || name === 'no-codec') continue; // not a variant: no page shows it
      run.pages.push(await retried(() => measurePage(browser, `${serverUrl}/view/rooms/${roomId}`, name, BROADBAND)));
    }
    if (ktx2Images.length) transcoder.push(await measureTranscoder(browser, blankUrl, ktx2Images, BROADBAND));
  }
  const rows = variants.map((variant, k): VariantRow => {
    const run = runs[k]!;
    const pages = run.pages;
    const last = pages.at(-1);
    return {
      variant: variant.name,
      bytes: variant.file.bytes,
      wire_bytes: median(run.broadband.map((l) => l.wireBytes)),
      content_encoding: run.broadband[0]!.encoding,
      decoder_wire_bytes: median(run.broadband.map((l) => l.decoderWireBytes)),
      request_to_scene_ms: Math.round(median(run.broadband.map((l) => l.ms))),
      navigation_to_scene_ms: pages.length ? Math.round(median(pages.map((p) => p.scene))) : null,
      first_full_frame_ms: pages.length ? Math.round(median(pages.map((p) => p.frame))) : null,
      request_to_scene_rounds: run.broadband.map((l) => Math.round(l.ms)),
      loopback_request_to_scene_ms: Math.round(median(run.loopback)),
      first_full_frame_rounds: pages.map((p) => Math.round(p.frame)),
      // The same textures every round: the last round's (checked equal below).
      gpu_texture_bytes: last ? last.gpuModelBytes : null,
      gpu_page_texture_bytes: last ? last.gpuPageBytes : null,
      gpu_textures: last ? last.textures : [],
      texture_file_bytes: images[k]!.reduce((n, i) => n + i.bytes.byteLength, 0),
      texture_mime_types: [...new Set(images[k]!.map((i) => i.mimeType))],
      model_arrived_ms: medianOrNull(pages.map((p) => p.modelArrived)),
      transcoder_requested_ms: medianOrNull(pages.map((p) => p.transcoderStart)),
      transcoder_arrived_ms: medianOrNull(pages.map((p) => p.transcoderArrived)),
    };
  });
  for (const [k, run] of runs.entries()) {
    const sums = new Set(run.pages.map((p) => p.gpuModelBytes));
    if (sums.size > 1) throw new Error(`${variants[k]!.name}: GPU texture bytes differ between rounds: ${[...sums].join(', ')}`);
    for (const p of run.pages) {
      // The hook's allocation and three's own objects agree (every mip level counted once; × 4/3 is the mip chain's limit).
      if (Math.abs(p.gpuModelBytes - p.gpuThreeBytes) > 0.01 * p.gpuThreeBytes)
        process.stderr.write(`  ${variants[k]!.name}: GPU bytes ${p.gpuModelBytes} (hook) vs ${p.gpuThreeBytes} (three's textures)\n`);
    }
  }
  return { rows, transcoder };
}

const ms = (value: number | null) => (value === null ? '–' : `${value} ms`);

const mb = (n: number | null) =>
  n === null ? '–' : n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(2)} MB` : `${(n / 1024).toFixed(1)} KB`;

function printRoom(title: string, rows: VariantRow[]): void {
  const draco = rows.find((r) => r.variant === 'draco')!;
  const meshopt = rows.find((r) => r.variant === 'meshopt')!;
  const lines = [
    `\n${title}`,
    '| variant | bytes | on the wire | decoder on the wire | request → parsed scene | ÷ draco | ' +
      'navigation → scene | first full frame | ÷ meshopt | GPU texture bytes | loopback request → scene |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.variant} | ${kb(r.bytes)} | ${kb(r.wire_bytes)} (${r.content_encoding}) | ${kb(r.decoder_wire_bytes)} | ` +
        `${r.request_to_scene_ms} ms | ${(r.request_to_scene_ms / draco.request_to_scene_ms).toFixed(2)}× | ` +
        `${ms(r.navigation_to_scene_ms)} | ${ms(r.first_full_frame_ms)} | ` +
        `${r.first_full_frame_ms === null ? '–' : `${(r.first_full_frame_ms / meshopt.first_full_frame_ms!).toFixed(2)}×`} | ` +
        `${mb(r.gpu_texture_bytes)}${r.gpu_textures.length ? ` (${[...new Set(r.gpu_textures.map((t) => `${t.format} ${t.width}×${t.height}, ${t.levels} levels`))].join('; ')})` : ''} | ` +
        `${r.loopback_request_to_scene_ms} ms |`,
    ),
  ];
  console.log(lines.join('\n'));
}

interface RoomResult {
  title: string;
  variants: VariantRow[];
  transcoder_start: {
    fetch_ms: number;
    cold_transcode_ms: number;
    warm_transcode_ms: number;
    worker_start_ms: number;
    wire_bytes: number;
  } | null;
  load_average: string;
}

/**
 * Issue #42's figures, from this run: GPU texture bytes summed over the real rooms, ktx2 ÷ meshopt
 * (aim ≤ 0.3×); ktx2's first full frame ÷ meshopt's on each textured room (aim ≤ 1.8×, the
 * transcoder's fetch and start included) and where its extra time goes; ktx2's bytes on the wire
 * against meshopt's (the same geometry, textures WebP), the GLB and its texture images alone.
 */
function printKtx2(rooms: RoomResult[]): void {
  const row = (r: RoomResult, v: string) => r.variants.find((x) => x.variant === v);
  const textured = rooms.filter((r) => row(r, 'ktx2'));
  if (!textured.length) return;
  const gpu = (v: string) => rooms.reduce((n, r) => n + (row(r, v)?.gpu_texture_bytes ?? row(r, 'meshopt')!.gpu_texture_bytes ?? 0), 0);
  const lines = [
    '\nKTX2 (issue #42): GPU texture bytes after the first full frame, summed over the real rooms (a room without textures counts 0)',
  ];
  lines.push(
    `| variant | GPU texture bytes | ÷ meshopt |`,
    `|---|---|---|`,
    ...['draco', 'meshopt', 'plain', 'ktx2'].map((v) => `| ${v} | ${mb(gpu(v))} | ${(gpu(v) / gpu('meshopt')).toFixed(3)}× |`),
  );
  const gpuRatio = gpu('ktx2') / gpu('meshopt');
  lines.push(`ktx2 ÷ meshopt, GPU texture bytes: ${gpuRatio.toFixed(3)}× — aim ≤ 0.3×: ${gpuRatio <= 0.3 ? 'met' : 'MISSED'}`);
  for (const r of textured) {
    const k = row(r, 'ktx2')!;
    const m = row(r, 'meshopt')!;
    const name = r.title.split(' (')[0];
    const paired = median(k.first_full_frame_rounds.map((f, i) => f / m.first_full_frame_rounds[i]!));
    const frameRatio = k.first_full_frame_ms! / m.first_full_frame_ms!;
    lines.push(
      `${name}: first full frame over 50 Mbit/s + 20 ms, fresh page: ktx2 ${k.first_full_frame_ms} ms ÷ meshopt ${m.first_full_frame_ms} ms = ` +
        `${frameRatio.toFixed(2)}× (paired by round ${paired.toFixed(2)}×) — aim ≤ 1.8×: ${frameRatio <= 1.8 ? 'met' : 'MISSED'} (load average ${r.load_average})`,
    );
    lines.push(
      `  page timeline (ms from navigation, medians): model arrived ${ms(k.model_arrived_ms)} (meshopt ${ms(m.model_arrived_ms)}), ` +
        `transcoder requested ${ms(k.transcoder_requested_ms)}, arrived ${ms(k.transcoder_arrived_ms)}; scene parsed ` +
        `${ms(k.navigation_to_scene_ms)} (meshopt ${ms(m.navigation_to_scene_ms)})`,
    );
    const t = r.transcoder_start;
    if (t)
      lines.push(
        `  transcoder alone (fresh page, 50 Mbit/s + 20 ms, medians): fetch ${t.fetch_ms} ms (${kb(t.wire_bytes)} on the wire), ` +
          `first transcode of the room's textures ${t.cold_transcode_ms} ms = worker start ~${t.worker_start_ms} ms + transcode ${t.warm_transcode_ms} ms`,
      );
    lines.push(
      `  on the wire: ktx2 GLB ${kb(k.wire_bytes)} (${k.content_encoding}) vs meshopt ${kb(m.wire_bytes)} (${m.content_encoding}): ` +
        `${(k.wire_bytes / m.wire_bytes).toFixed(2)}×; texture images in the file: KTX2 ${kb(k.texture_file_bytes)} vs ` +
        `${m.texture_mime_types.join(', ')} ${kb(m.texture_file_bytes)}: ${(k.texture_file_bytes / m.texture_file_bytes).toFixed(2)}×; ` +
        `plus the transcoder ${kb(k.decoder_wire_bytes - m.decoder_wire_bytes)} on the wire beside meshopt's decoder`,
    );
  }
  console.log(lines.join('\n'));
}

/** What a first visit transfers in JavaScript (gzip as served): the bundle, and each decoder when a model needs it. */
async function pageWeight() {
  const assets = await new ViewerAssets().load();
  const body = (url: string) => assets.files.get(basename(url))!.body;
  const gz = (b: Buffer) => gzipSync(b, { level: 9 }).length;
  const { draco, meshopt } = assets.urls.decoders;
  return {
    bundle_bytes: body(assets.urls.viewer.js).length,
    bundle_gzip: gz(body(assets.urls.viewer.js)),
    draco_gzip: gz(body(draco.js)) + gz(body(draco.wasm)),
    meshopt_gzip: gz(body(meshopt)),
  };
}

async function screenshot(page: Page, name: string): Promise<void> {
  const png = await page.screenshot();
  await sharp(png).resize(960).png({ palette: true, quality: 100, compressionLevel: 9 }).toFile(join(SHOTS, name));
}

/** Colourful artworks from a local media host, for the exhibition screenshot. */
async function colourfulArtworks(dataDir: string, media: FakeModelServer): Promise<Manifest> {
  const manifest = (await readManifest(dataDir))!;
  const hues = ['#c0392b', '#2874a6', '#d4ac0d', '#1e8449', '#7d3c98', '#ca6f1e'];
  for (const [i, hue] of hues.entries()) {
    const h = i % 2 ? 800 : 450;
    const svg =
      `<svg xmlns="http://www.w3.org/2000/svg" width="600" height="${h}"><defs>` +
      `<linearGradient id="g" x2="1" y2="1"><stop offset="0" stop-color="${hue}"/>` +
      `<stop offset="1" stop-color="#f4ecd8"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)"/>` +
      `<circle cx="300" cy="${h / 2}" r="120" fill="#1b2631" fill-opacity="0.55"/></svg>`;
    media.files.set(`/art-${i}.png`, { body: await sharp(Buffer.from(svg)).png().toBuffer() });
    const a = manifest.artworks[i]!;
    manifest.artworks[i] = {
      ...a,
      media: { url: `${media.url}/art-${i}.png`, type: 'image', content_type: 'image/png', width: 600, height: h },
      ratio: 600 / h,
    };
  }
  await publishManifest(dataDir, manifest);
  return manifest;
}

/** The README's screenshots: the sample room with most slots and the cube room (facing arrows on), an exhibition. */
async function screenshots(browser: Browser, serverUrl: string, manifest: Manifest): Promise<void> {
  const mostSlots = [...manifest.rooms].filter((r) => r.id <= 7).sort((a, b) => b.slots - a.slots)[0]!;
  for (const [id, name] of [
    [mostSlots.id, 'viewer-room.png'],
    [8, 'viewer-real-room.png'],
  ] as const) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${serverUrl}/view/rooms/${id}`);
    await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
    await page.check('#facing');
    await page.evaluate('museumViewer.stage.renderNow()');
    await screenshot(page, name);
    await page.close();
  }
  await fetch(`${serverUrl}/v1/guide/exhibitions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      format: 'museum-exhibition@1',
      id: 'bench-show',
      name: 'Colour Studies',
      placements: [
        {
          uid: 'hall',
          room: { id: mostSlots.id, title: mostSlots.title },
          artworks: manifest.artworks.slice(0, 8).map((a) => ({ id: a.id })),
        },
      ],
    }),
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${serverUrl}/view/exhibitions/bench-show`);
  await pageUntil(page, 'window.museumViewer && window.museumViewer.ready');
  // Stand in front of the third work and click it for its record.
  const at = (await page.evaluate(`(() => {
    const v = museumViewer; const p = v.focusSlot(v.hang.hung[2].slot); const r = v.canvasRect();
    return { x: r.left + p.x, y: r.top + p.y };
  })()`)) as { x: number; y: number };
  await page.mouse.click(at.x, at.y);
  await screenshot(page, 'viewer-exhibition.png');
  await page.close();
}

/** A viewer page that loads no model and no decoder: an exhibition whose one room the museum does not know. */
async function blankViewerPage(serverUrl: string): Promise<string> {
  const res = await fetch(`${serverUrl}/v1/guide/exhibitions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      format: 'museum-exhibition@1',
      id: 'bench-blank',
      name: 'Blank',
      placements: [{ uid: 'none', room: { id: 999_999, title: 'None' }, artworks: [] }],
    }),
  });
  if (!res.ok) throw new Error(`registering the blank exhibition answered ${res.status}`);
  return `${serverUrl}/view/exhibitions/bench-blank`;
}

// ---- Walk mode: path queries in the page (issue #41) ----

const PATH_QUERIES = 2000;

/** A path query's time in the page on each real room's baked navmesh: median / p95 over PATH_QUERIES. */
async function measurePathQueries(browser: Browser, serverUrl: string) {
  const rows = [];
  for (const room of REAL_ROOMS) {
    const page = await browser.newPage();
    await page.goto(`${serverUrl}/view/rooms/${room.id}`);
    for (let i = 0; !(await page.evaluate('window.museumViewer?.ready')); i++) {
      if (i > 600) throw new Error(`room ${room.id} never got ready`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const result = (await page.evaluate(`window.museumViewer.measurePathQueries(${PATH_QUERIES})`)) as {
      medianMs: number;
      p95Ms: number;
      meanMs: number;
      triangles: number;
    };
    rows.push({ room: room.id, title: room.title, ...result });
    console.log(
      `path query, ${room.title}: median ${result.medianMs.toFixed(3)} ms, p95 ${result.p95Ms.toFixed(3)} ms, mean ${result.meanMs.toFixed(4)} ms (${PATH_QUERIES} queries, ${result.triangles} triangles)`,
    );
    await page.close();
  }
  return rows;
}

/** One room's figures for the JSON record: its rows, the ratios to Draco, the transcoder's start. */
function roomSummary(room: (typeof REAL_ROOMS)[number], rows: VariantRow[], transcoder: TranscoderStart[], load: string) {
  const transcoder_start = transcoder.length
    ? {
        fetch_ms: Math.round(median(transcoder.map((t) => t.fetchMs))),
        cold_transcode_ms: Math.round(median(transcoder.map((t) => t.coldMs))),
        warm_transcode_ms: Math.round(median(transcoder.map((t) => t.warmMs))),
        worker_start_ms: Math.round(median(transcoder.map((t) => t.coldMs - t.warmMs))),
        wire_bytes: median(transcoder.map((t) => t.wireBytes)),
      }
    : null;
  const row = (v: VariantName | Reference) => rows.find((r) => r.variant === v)!;
  const ratio = (v: VariantName | Reference) => row(v).request_to_scene_ms / row('draco').request_to_scene_ms;
  // Each round's meshopt load beside the Draco load of the same round (they ran one after the other).
  const paired = median(row('meshopt').request_to_scene_rounds.map((ms, i) => ms / row('draco').request_to_scene_rounds[i]!));
  return {
    room: room.id,
    title: room.title,
    variants: rows,
    meshopt_ratio: Number(ratio('meshopt').toFixed(2)),
    meshopt_paired_ratio: Number(paired.toFixed(2)),
    plain_ratio: Number(ratio('plain').toFixed(2)),
    draco_to_source_ratio: Number((1 / ratio('source')).toFixed(2)),
    no_codec_ratio: Number(ratio('no-codec').toFixed(2)),
    transcoder_start,
    load_average: load,
  };
}

/** The targets' lines: meshopt ÷ draco, no codec, draco ÷ source, first full frame, page weight. */
function printTargets(rooms: Array<ReturnType<typeof roomSummary>>, weight: Awaited<ReturnType<typeof pageWeight>>): void {
  const ratio = median(rooms.map((r) => r.meshopt_ratio));
  console.log(
    `\nmeshopt ÷ draco, request → parsed scene over 50 Mbit/s: ` +
      rooms.map((r) => `${r.title.split(' (')[0]} ${r.meshopt_ratio}× (paired by round ${r.meshopt_paired_ratio}×)`).join(', '),
  );
  console.log(
    `median room: ${ratio.toFixed(2)}× — target ≤ 0.6×: ${ratio <= 0.6 ? 'met' : 'MISSED'} ` +
      `(stretch ≤ 0.5×: ${ratio <= 0.5 ? 'met' : 'not met'})`,
  );
  console.log(
    `no geometry codec (float32, the same textures: no decoder, nothing to decode but the textures) ÷ draco: ` +
      `${rooms.map((r) => `${r.title.split(' (')[0]} ${r.no_codec_ratio}×`).join(', ')}; median room ` +
      `${median(rooms.map((r) => r.no_codec_ratio)).toFixed(2)}×`,
  );
  const worstSource = Math.max(...rooms.map((r) => r.draco_to_source_ratio));
  console.log(
    `draco ÷ source model (model_url), request → parsed scene over 50 Mbit/s: ` +
      `${rooms.map((r) => `${r.title.split(' (')[0]} ${r.draco_to_source_ratio}×`).join(', ')} — ` +
      `target ≤ 0.5×: ${worstSource <= 0.5 ? 'met' : 'MISSED'}`,
  );
  const worstFrame = Math.max(...rooms.flatMap((r) => r.variants.map((v) => v.first_full_frame_ms ?? 0)));
  console.log(
    `first full frame over 50 Mbit/s (worst room and variant): ${worstFrame} ms — ` +
      `target ≤ 1500 ms: ${worstFrame <= 1500 ? 'met' : 'MISSED'}`,
  );
  console.log(
    `page JavaScript: ${kb(weight.bundle_gzip)} gzip; decoders only for models that need them: ` +
      `meshopt ${kb(weight.meshopt_gzip)}, Draco ${kb(weight.draco_gzip)} gzip`,
  );
}

async function main(): Promise<void> {
  if (!HAS_CHROMIUM) throw new Error('needs /usr/bin/chromium (scripts/system-deps.sh)');
  const work = mkdtempSync(join(tmpdir(), 'museum-bench-viewer-'));
  const media = await startModelServer();
  try {
    process.stderr.write('baking the sample rooms and the real rooms (every variant)…\n');
    const dataDir = await bakeContent(work);
    const manifest = await colourfulArtworks(dataDir, media);
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      STATE_DB: join(work, 'state.db'),
      VIEWER_MEDIA_ALLOW_HOSTS: new URL(media.url).host,
    });
    // The access log on (info), written where the default goes, minus the terminal.
    const server = await startServer(config, { log: pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false })) });
    const browser = await launchChromium();
    try {
      const blankUrl = await blankViewerPage(server.url);
      // Warm the server (bundle read, first use of each path) once per variant.
      for (const variant of VARIANTS) await measurePage(browser, `${server.url}/view/rooms/${REAL_ROOMS[0]!.id}`, variant, null);
      const rooms = [];
      for (const room of REAL_ROOMS) {
        process.stderr.write(`measuring ${room.title} (${ROUNDS} rounds × ${VARIANTS.length} variants)…\n`);
        const loadBefore = loadavg()[0]!;
        const { rows, transcoder } = await measureRoom(browser, server.url, manifest, room.id, blankUrl, dataDir);
        const load = [loadBefore, loadavg()[0]!].map((l) => l.toFixed(1)).join(' → ');
        printRoom(`${room.title}, medians of ${ROUNDS}, 50 Mbit/s + 20 ms unless loopback (load average ${load})`, rows);
        rooms.push(roomSummary(room, rows, transcoder, load));
      }
      printKtx2(rooms);
      mkdirSync(SHOTS, { recursive: true });
      await screenshots(browser, server.url, manifest);
      const weight = await pageWeight();
      const path_queries = await measurePathQueries(browser, server.url);
      const result = {
        rounds: ROUNDS,
        load_average: loadavg(),
        network: BROADBAND,
        rooms,
        weight,
        stalls,
        path_queries,
        at: new Date().toISOString(),
      };
      mkdirSync(join(ROOT, '.bench'), { recursive: true });
      writeFileSync(join(ROOT, '.bench', 'viewer.json'), `${JSON.stringify(result, null, 1)}\n`);
      printTargets(rooms, weight);
    } finally {
      await browser.close();
      await server.close();
    }
  } finally {
    await media.close();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
