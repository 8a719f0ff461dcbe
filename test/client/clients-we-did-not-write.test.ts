/**
 * Clients this project did not write, against every room it bakes (the sample museum and the real
 * models of ../shared/assets), through a real server over HTTP:
 *
 *  1. The original museum client's rule for baked slot data (mocaOS/museum, the world builder,
 *     `apps/museum/src/app/(fullscreen)/rooms/world/page.tsx`, `freshSlotData()` and the
 *     `modelFileId = r.model_optimized || r.model` beside it; read at commit b596afe4b413): the
 *     slots are trusted when `version === 1`, the list is not empty, and `model` is the file id of
 *     the GLB the builder loads — else it falls back to runtime extraction and its own facing probe.
 *     Our file id is the sha256 of the `/files/<sha256>.glb` URL. Re-stated here as that client does
 *     it, from the Room's URLs alone (none of our code decides).
 *  2. three.js's own GLTFLoader (with its DRACOLoader, KTX2Loader and MeshoptDecoder, set up as
 *     three's documentation does: an import map over three's files, on an origin of its own) in
 *     Chromium, loading every model variant a room lists: no placeholder is opaque; generated
 *     `Auto_NNN` quads carry the original's faint blue `Slot Placeholder` material, authored ones the
 *     architect's (as the source model has it), and every one sits where the slot data says.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SLOT_PLACEHOLDER_LOOK } from '../../artifacts/format.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { SHARED_ASSETS } from '../bake/fixtures.ts';
import { HAS_CHROMIUM, launchChromium, pageUntil, watchedPage } from '../helpers/chromium.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/**
 * The real models, as rooms of the content store: the two interiors and the helmet as a sculpture
 * (generated anchors around it). The 6 cm Avocado is left out: no frame fits on it, its bake places
 * no anchor (a reported shortfall), and the original's rule rightly distrusts an empty list.
 */
const REAL_ROOMS = [
  { id: 8, title: 'Cube Room', model: 'rooms/cube-room.glb', slots: 8, kind: 'room' },
  { id: 9, title: 'Garage', model: 'rooms/garage.glb', slots: 8, kind: 'room' },
  { id: 10, title: 'Damaged Helmet', model: 'textured/DamagedHelmet.glb', slots: 6, kind: 'sculpture' },
] as const;

/** What the original client reads of a Room and of its slot data (a plain JSON client: no types of ours). */
interface ClientRoom {
  id: number;
  model_url: string | null;
  model_optimized_url: string | null;
  slot_data_url: string | null;
  model_variants: Array<{ name: string; url: string }>;
}
interface ClientSlotData {
  version: number;
  model: string;
  source_model: string;
  models: string[];
  slots: Array<{ id: string; source: string; position: [number, number, number] }>;
}

/** The client's file id of a model URL: the `<sha256>` of `/files/<sha256>.glb`. */
const fileIdOf = (url: string | null): string | null =>
  url ? (/\/files\/([0-9a-f]{64})\.glb$/.exec(new URL(url).pathname)?.[1] ?? null) : null;

/** The original's rule, as it states it: version 1, a non-empty list, `model` = the loaded file's id. */
function freshSlotData(slotData: unknown, modelFileId: string): ClientSlotData | undefined {
  const data = slotData as ClientSlotData | null | undefined;
  if (data?.version !== 1 || !Array.isArray(data.slots) || data.slots.length === 0) return undefined;
  return data.model === modelFileId ? data : undefined;
}

let root: string;
let server: TestServer;
let rooms: ClientRoom[];
const slotData = new Map<number, ClientSlotData>();
/** A URL the API hands out, on the test server (the Room's URLs name PUBLIC_URL). */
const local = (url: string) => `${server.url}${new URL(url).pathname}`;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'museum-other-clients-'));
  const content = join(root, 'content');
  await writeSampleContent(content);
  const sample = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as object[];
  const real = REAL_ROOMS.map((r) => ({
    ...r,
    architect: 'third party',
    token_id: String(r.id),
    model: join(SHARED_ASSETS, r.model),
    image: null,
  }));
  writeFileSync(join(content, 'rooms.json'), JSON.stringify([...sample, ...real]));
  const summary = await bakeRooms({ contentDir: content, dataDir: join(root, 'data'), concurrency: 2 });
  expect(summary.failed, JSON.stringify(summary.rooms.filter((r) => r.status === 'failed'))).toBe(0);
  server = await startTestServer({ dataDir: join(root, 'data') });
  rooms = ((await (await server.get('/v1/rooms')).json()) as { data: ClientRoom[] }).data;
  for (const room of rooms) {
    const res = await fetch(local(room.slot_data_url!));
    expect(res.status, `room ${room.id} slots`).toBe(200);
    slotData.set(room.id, ((await res.json()) as { data: ClientSlotData }).data);
  }
}, 300_000);

afterAll(async () => {
  await server?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe("the original museum client's rule for baked slot data", () => {
  it('trusts the slot data of every baked room: sample rooms and real ones', () => {
    expect(rooms.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const distrusted = rooms.filter((room) => {
      const modelFileId = fileIdOf(room.model_optimized_url) ?? fileIdOf(room.model_url);
      return !modelFileId || !freshSlotData(slotData.get(room.id), modelFileId);
    });
    expect(distrusted.map((r) => r.id)).toEqual([]);
  });

  it('names files that are what the client loads: model_optimized_url hashes to `model`, model_url to `source_model`', async () => {
    for (const room of rooms) {
      const data = slotData.get(room.id)!;
      for (const [url, id] of [
        [room.model_optimized_url!, data.model],
        [room.model_url!, data.source_model],
      ] as const) {
        const bytes = Buffer.from(await (await fetch(local(url))).arrayBuffer());
        expect(createHash('sha256').update(bytes).digest('hex'), `room ${room.id} ${url}`).toBe(id);
      }
    }
  });

  it('lists in `models` the source and every variant a client may pick instead, and nothing else', () => {
    for (const room of rooms) {
      const data = slotData.get(room.id)!;
      const files = [room.model_url, ...room.model_variants.map((v) => v.url)].map(fileIdOf);
      expect(data.models, `room ${room.id}`).toEqual([...new Set(files)]);
      expect(room.model_variants.map((v) => v.name)).toEqual(expect.arrayContaining(['draco', 'meshopt', 'plain']));
    }
  });

  it('is not vacuous: slot data that names the source file (as before), or another room, is distrusted', () => {
    const [first, second] = [rooms[0]!, rooms[7]!];
    const loaded = fileIdOf(first.model_optimized_url)!;
    const data = slotData.get(first.id)!;
    expect(freshSlotData(data, loaded)).toBeDefined();
    expect(freshSlotData({ ...data, model: data.source_model }, loaded)).toBeUndefined();
    expect(freshSlotData(slotData.get(second.id), loaded)).toBeUndefined();
    expect(freshSlotData({ ...data, slots: [] }, loaded)).toBeUndefined();
    expect(freshSlotData({ ...data, version: 2 }, loaded)).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// three.js GLTFLoader in Chromium

const THREE_DIR = resolve(import.meta.dirname, '../../node_modules/three');
const TYPES: Record<string, string> = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html' };

/** A page as three's manual sets one up: an import map over three's own files, every decoder registered. */
const PAGE = `<!doctype html><meta charset="utf-8"><title>three.js GLTFLoader</title><link rel="icon" href="data:,">
<script type="importmap">{"imports":{"three":"/three/build/three.module.js","three/addons/":"/three/examples/jsm/"}}</script>
<script type="module">
import * as THREE from 'three';
import { GLTFLoader } from 'three/addons/loaders/GLTFLoader.js';
import { DRACOLoader } from 'three/addons/loaders/DRACOLoader.js';
import { KTX2Loader } from 'three/addons/loaders/KTX2Loader.js';
import { MeshoptDecoder } from 'three/addons/libs/meshopt_decoder.module.js';
const renderer = new THREE.WebGLRenderer({ canvas: document.createElement('canvas') });
const loader = new GLTFLoader()
  .setDRACOLoader(new DRACOLoader().setDecoderPath('/three/examples/jsm/libs/draco/gltf/'))
  .setKTX2Loader(new KTX2Loader().setTranscoderPath('/three/examples/jsm/libs/basis/').detectSupport(renderer))
  .setMeshoptDecoder(MeshoptDecoder);
const PLACEHOLDER = /^(Slot|Auto)_\\d{3,}$/;
window.placeholdersOf = async (url) => {
  // Failures come back as text: their stacks name this page's URLs, which the test runner cannot map.
  const gltf = await loader.loadAsync(url).catch((error) => ({ error: String(error && error.message || error) }));
  if (gltf.error) return gltf;
  gltf.scene.updateMatrixWorld(true);
  const found = [];
  gltf.scene.traverse((object) => {
    if (!PLACEHOLDER.test(object.name)) return;
    const meshes = object.isMesh ? [object] : object.children.filter((c) => c.isMesh);
    const position = object.getWorldPosition(new THREE.Vector3()).toArray();
    for (const { material: m } of meshes) {
      found.push({
        name: object.name, position, material: m.name, color: m.color.toArray(), opacity: m.opacity,
        transparent: m.transparent, doubleSided: m.side === THREE.DoubleSide, metalness: m.metalness, roughness: m.roughness,
      });
    }
  });
  return found;
};
window.ready = true;
</script>`;

interface StaticSite {
  url: string;
  close(): Promise<void>;
}

/**
 * Another site than the museum (its own origin: every model is fetched cross-origin, as any page
 * would): the page above and three's own files, on loopback like the museum under test.
 */
async function startStaticSite(): Promise<StaticSite> {
  const site = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://site').pathname;
    const file = resolve(THREE_DIR, `.${path.replace(/^\/three\//, '/')}`);
    if (path === '/') return void res.writeHead(200, { 'Content-Type': TYPES['.html'] }).end(PAGE);
    if (!path.startsWith('/three/') || !file.startsWith(`${THREE_DIR}/`) || !existsSync(file)) return void res.writeHead(404).end();
    res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(readFileSync(file));
  });
  await new Promise<void>((done) => site.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${(site.address() as AddressInfo).port}`,
    close: () => new Promise((done) => site.close(() => done())),
  };
}

interface SeenPlaceholder {
  name: string;
  position: [number, number, number];
  material: string;
  color: [number, number, number];
  opacity: number;
  transparent: boolean;
  doubleSided: boolean;
  metalness: number;
  roughness: number;
}

describe.skipIf(!HAS_CHROMIUM)("three.js's GLTFLoader on every model variant", () => {
  let browser: Browser;
  let page: Page;
  let errors: string[];
  let site: StaticSite;

  beforeAll(async () => {
    browser = await launchChromium();
    const watched = await watchedPage(browser);
    ({ page, errors } = watched);
    site = await startStaticSite();
    await page.goto(`${site.url}/`);
    await pageUntil(page, 'window.ready === true');
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await site?.close();
  });

  /** The placeholders three finds in a model the API hands out (fetched cross-origin from the museum, as any site would). */
  const placeholdersOf = async (url: string): Promise<SeenPlaceholder[]> => {
    const seen = (await page.evaluate(`window.placeholdersOf(${JSON.stringify(local(url))})`)) as SeenPlaceholder[] | { error: string };
    if ('error' in seen) throw new Error(`three's GLTFLoader could not load ${url}: ${seen.error}`);
    return seen;
  };

  it('finds no opaque placeholder: generated ones are faint blue panes, authored ones keep the source model’s material', async () => {
    const look = SLOT_PLACEHOLDER_LOOK;
    const checked: string[] = [];
    for (const room of rooms) {
      const data = slotData.get(room.id)!;
      const architect = new Map((await placeholdersOf(room.model_url!)).map((p) => [p.name, p]));
      for (const variant of room.model_variants) {
        const where = `room ${room.id} ${variant.name}`;
        const seen = await placeholdersOf(variant.url);
        expect(seen.map((p) => p.name).sort(), where).toEqual(data.slots.map((s) => s.id).sort());
        for (const p of seen) {
          expect(p.transparent && p.opacity < 1, `${where} ${p.name} is opaque: ${JSON.stringify(p)}`).toBe(true);
          const slot = data.slots.find((s) => s.id === p.name)!;
          expect(Math.hypot(...p.position.map((v, k) => v - slot.position[k]!)), `${where} ${p.name} position`).toBeLessThan(1e-3);
          if (slot.source === 'generated') {
            expect(p, `${where} ${p.name}`).toMatchObject({ material: 'Slot Placeholder', transparent: true, doubleSided: true });
            [...p.color, p.opacity].forEach((v, k) => expect(v, `${where} ${p.name} colour`).toBeCloseTo(look.baseColorFactor[k]!, 5));
            expect([p.metalness, p.roughness]).toEqual([look.metallicFactor, look.roughnessFactor]);
          } else {
            const authored = architect.get(p.name)!;
            const { name: _, position: __, ...material } = authored;
            expect({ ...p, name: undefined, position: undefined }, `${where} ${p.name}`).toMatchObject(material);
          }
        }
        checked.push(where);
      }
    }
    // Every room, every variant (draco, meshopt, plain and whatever a room lists besides).
    expect(checked.length).toBeGreaterThanOrEqual(rooms.length * 3);
    expect(errors).toEqual([]);
  }, 240_000);
});
