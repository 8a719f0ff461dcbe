/**
 * The model variants (decisions, "Model variants"): for every sample room and two real rooms of
 * ../shared/assets/rooms, the bake's meshopt and plain GLBs carry every Slot_/Auto_ anchor exactly
 * as the slot records say (1 mm, 0.1°, world scale 1, read as a client reads them: three.js's world
 * matrices), plain loads in three's GLTFLoader with no decoder and has float32 positions, meshopt
 * loads with three's MeshoptDecoder, `extensions_required` is the file's own, the Khronos validator
 * finds no error; the bake is deterministic and incremental with them, and a room whose variant
 * cannot be made fails alone with its previous artifacts kept.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import * as THREE from 'three';
import { GLTFLoader } from 'three/examples/jsm/loaders/GLTFLoader.js';
import { MeshoptDecoder } from 'three/examples/jsm/libs/meshopt_decoder.module.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filePath, type ManifestModelVariant, type ManifestRoom, RoomSlotData } from '../../artifacts/format.ts';
import { readManifest } from '../../artifacts/store.ts';
import { NodeIO } from '@gltf-transform/core';
import { writeGlb } from '../../bake/gltf-io.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { OPTIMIZER_SETTINGS } from '../../bake/settings.ts';
import { SHARED_ASSETS, splitGlb, validate } from './fixtures.ts';

const REAL_ROOMS = [
  { id: 8, title: 'Cube Room', slots: 6, model: join(SHARED_ASSETS, 'rooms', 'cube-room', 'cube-room.gltf') },
  { id: 9, title: 'Garage', slots: 8, model: join(SHARED_ASSETS, 'rooms', 'garage', 'garage.gltf') },
];
const COMPRESSION = ['KHR_draco_mesh_compression', 'EXT_meshopt_compression', 'KHR_mesh_quantization'];

const roots: string[] = [];
const tmp = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  roots.push(dir);
  return dir;
};

/** The sample content plus the real rooms (used from ../shared/assets, never copied). */
async function contentDir(): Promise<string> {
  const content = tmp('museum-variants-content-');
  await writeSampleContent(content);
  const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as unknown[];
  const real = REAL_ROOMS.map((r) => ({
    ...r,
    architect: 'shared assets',
    description: 'CC-BY',
    series: 'Real rooms',
    token_id: String(r.id),
    image: null,
  }));
  writeFileSync(join(content, 'rooms.json'), JSON.stringify([...rooms, ...real]));
  return content;
}

let content: string;
let data: string;
let rooms: ManifestRoom[];

beforeAll(async () => {
  content = await contentDir();
  data = tmp('museum-variants-data-');
  const summary = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
  expect(summary.rooms.filter((r) => r.status === 'failed')).toEqual([]);
  rooms = (await readManifest(data))!.rooms;
}, 600_000);
afterAll(() => {
  for (const dir of roots) rmSync(dir, { recursive: true, force: true });
});

const variantOf = (room: ManifestRoom, name: ManifestModelVariant['name']) => room.model_variants!.find((v) => v.name === name)!;
const bytesOf = (variant: ManifestModelVariant) => readFile(filePath(data, variant.file));
const slotsOf = async (room: ManifestRoom) => RoomSlotData.parse(JSON.parse(await readFile(filePath(data, room.slot_data!), 'utf8'))).slots;

/** Parse a GLB as a browser client does, with three's GLTFLoader (images are not decoded in Node). */
async function loadInThree(glb: Uint8Array, withMeshopt: boolean): Promise<THREE.Group> {
  // GLTFLoader reads the page's URL class as `self.URL` (Node has URL and Blob, not `self`).
  (globalThis as { self?: unknown }).self ??= globalThis;
  // Node decodes no images (three logs "Couldn't load texture" and goes on): the geometry, the node
  // graph and the extensions are what is checked here; the viewer's browser tests see the textures.
  const loader = new GLTFLoader();
  if (withMeshopt) loader.setMeshoptDecoder(MeshoptDecoder);
  const buffer = glb.buffer.slice(glb.byteOffset, glb.byteOffset + glb.byteLength) as ArrayBuffer;
  const gltf = await loader.parseAsync(buffer, '');
  gltf.scene.updateMatrixWorld(true);
  return gltf.scene;
}

/** Every slot record against the node of the same name in three's scene: 1 mm, 0.1°, scale 1. */
function expectAnchors(scene: THREE.Group, slots: Awaited<ReturnType<typeof slotsOf>>, label: string): void {
  expect(slots.length, label).toBeGreaterThan(0);
  for (const slot of slots) {
    const node = scene.getObjectByName(slot.id);
    expect(node, `${label} ${slot.id}`).toBeDefined();
    const [position, rotation, scale] = [new THREE.Vector3(), new THREE.Quaternion(), new THREE.Vector3()];
    node!.matrixWorld.decompose(position, rotation, scale);
    expect(position.distanceTo(new THREE.Vector3(...slot.position)), `${label} ${slot.id} position (m)`).toBeLessThan(0.001);
    const degrees = (rotation.angleTo(new THREE.Quaternion(...slot.quaternion)) * 180) / Math.PI;
    expect(degrees, `${label} ${slot.id} rotation (°)`).toBeLessThan(0.1);
    for (const s of scale.toArray()) expect(Math.abs(s - 1), `${label} ${slot.id} scale`).toBeLessThan(1e-4);
  }
}

describe('every room (7 sample rooms, cube-room, garage)', () => {
  it('has the variants, draco being model_optimized itself; ktx2 exactly where the room has textures', () => {
    expect(rooms).toHaveLength(9);
    const textured = (room: ManifestRoom) => variantOf(room, 'draco').max_texture_size !== null;
    for (const room of rooms) {
      expect(
        room.model_variants!.map((v) => v.name),
        `room ${room.id}`,
      ).toEqual(['draco', 'meshopt', 'plain', ...(textured(room) ? ['ktx2'] : [])]);
      expect(variantOf(room, 'draco').file).toEqual(room.model_optimized);
    }
    // Both kinds are really here: the Brick Atelier (3) and cube-room (8) have textures, some sample room none.
    expect(rooms.filter((r) => r.id === 3 || r.id === 8).every(textured)).toBe(true);
    expect(rooms.some((r) => !textured(r))).toBe(true);
  });

  it('ktx2: every image KTX2 (KHR_texture_basisu, no WebP left), mipmapped, ETC1S colour and UASTC normals, size as draco', async () => {
    for (const room of rooms.filter((r) => r.model_variants!.some((v) => v.name === 'ktx2'))) {
      const ktx2 = variantOf(room, 'ktx2');
      expect(ktx2.extensions_required, `room ${room.id}`).toContain('KHR_texture_basisu');
      expect(ktx2.extensions_required, `room ${room.id}`).not.toContain('EXT_texture_webp');
      expect(ktx2.max_texture_size, `room ${room.id}`).toBe(variantOf(room, 'draco').max_texture_size);
      const { json, bin } = splitGlb(await bytesOf(ktx2));
      const views = json.bufferViews as Array<{ byteOffset?: number; byteLength: number }>;
      const images = json.images as Array<{ bufferView: number; mimeType: string }>;
      const normalSources = new Set(
        (json.materials as Array<{ normalTexture?: { index: number } }>).flatMap((m) =>
          m.normalTexture
            ? [
                (json.textures as Array<{ extensions: { KHR_texture_basisu: { source: number } } }>)[m.normalTexture.index]!.extensions
                  .KHR_texture_basisu.source,
              ]
            : [],
        ),
      );
      for (const [i, image] of images.entries()) {
        expect(image.mimeType, `room ${room.id} image ${i}`).toBe('image/ktx2');
        const view = views[image.bufferView]!;
        const header = new DataView(bin!.buffer, bin!.byteOffset + (view.byteOffset ?? 0), 80);
        // KTX2 header: vkFormat 0 (Basis), levelCount at 40, supercompressionScheme at 44 (1 BasisLZ = ETC1S, else UASTC).
        expect(header.getUint32(40, true), `room ${room.id} image ${i} mip levels`).toBeGreaterThan(1);
        expect(header.getUint32(44, true) === 1 ? 'ETC1S' : 'UASTC', `room ${room.id} image ${i}`).toBe(
          normalSources.has(i) ? 'UASTC' : 'ETC1S',
        );
      }
    }
  });

  it('extensions_required is exactly the file’s extensionsRequired, and each variant requires what it is', async () => {
    for (const room of rooms) {
      for (const variant of room.model_variants!) {
        const { json } = splitGlb(await bytesOf(variant));
        const required = (json.extensionsRequired as string[] | undefined) ?? [];
        expect(variant.extensions_required, `room ${room.id} ${variant.name}`).toEqual(required);
        const compression = required.filter((e) => COMPRESSION.includes(e)).sort();
        const expected = {
          draco: ['KHR_draco_mesh_compression'],
          meshopt: ['EXT_meshopt_compression', 'KHR_mesh_quantization'],
          plain: [],
          ktx2: ['EXT_meshopt_compression', 'KHR_mesh_quantization'],
        }[variant.name];
        expect(compression, `room ${room.id} ${variant.name}`).toEqual(expected);
      }
    }
  });

  it('plain: float32 positions, no compression extension used, textures at most 1024 px', async () => {
    for (const room of rooms) {
      const plain = variantOf(room, 'plain');
      const { json } = splitGlb(await bytesOf(plain));
      expect(
        ((json.extensionsUsed as string[] | undefined) ?? []).filter((e) => COMPRESSION.includes(e)),
        `room ${room.id}`,
      ).toEqual([]);
      const accessors = json.accessors as Array<{ componentType: number; normalized?: boolean }>;
      const meshes = json.meshes as Array<{ primitives: Array<{ attributes: Record<string, number> }> }>;
      for (const prim of meshes.flatMap((m) => m.primitives)) {
        expect(accessors[prim.attributes.POSITION!]!.componentType, `room ${room.id} POSITION`).toBe(5126);
      }
      expect(plain.max_texture_size ?? 0).toBeLessThanOrEqual(1024);
    }
    // The rooms with 2048 px textures really were resized (and say so).
    const cube = rooms.find((r) => r.id === 8)!;
    expect([variantOf(cube, 'draco').max_texture_size, variantOf(cube, 'plain').max_texture_size]).toEqual([2048, 1024]);
  });

  it('plain loads in three.js with no decoder registered, every anchor on its node', async () => {
    for (const room of rooms) {
      const scene = await loadInThree(await bytesOf(variantOf(room, 'plain')), false);
      expectAnchors(scene, await slotsOf(room), `room ${room.id} plain`);
    }
  });

  it('meshopt needs its decoder, loads with three’s MeshoptDecoder, every anchor on its node', async () => {
    for (const room of rooms) {
      const glb = await bytesOf(variantOf(room, 'meshopt'));
      await expect(loadInThree(glb, false), `room ${room.id}`).rejects.toThrow(/meshopt/i);
      expectAnchors(await loadInThree(glb, true), await slotsOf(room), `room ${room.id} meshopt`);
    }
  });

  it('ktx2: every anchor on its node (world transforms read with glTF-Transform and meshopt’s decoder)', async () => {
    const { MeshoptDecoder: decoder } = await import('meshoptimizer');
    await decoder.ready;
    const { ALL_EXTENSIONS } = await import('@gltf-transform/extensions');
    const io = new NodeIO().registerExtensions(ALL_EXTENSIONS).registerDependencies({ 'meshopt.decoder': decoder });
    for (const room of rooms.filter((r) => r.model_variants!.some((v) => v.name === 'ktx2'))) {
      const document = await io.readBinary(await bytesOf(variantOf(room, 'ktx2')));
      const nodes = new Map(
        document
          .getRoot()
          .listNodes()
          .map((n) => [n.getName(), n]),
      );
      const slots = await slotsOf(room);
      expect(slots.length).toBeGreaterThan(0);
      for (const slot of slots) {
        const node = nodes.get(slot.id);
        expect(node, `room ${room.id} ${slot.id}`).toBeDefined();
        const [position, rotation, scale] = [new THREE.Vector3(), new THREE.Quaternion(), new THREE.Vector3()];
        new THREE.Matrix4().fromArray(node!.getWorldMatrix()).decompose(position, rotation, scale);
        expect(position.distanceTo(new THREE.Vector3(...slot.position)), `${room.id} ${slot.id} (m)`).toBeLessThan(0.001);
        expect((rotation.angleTo(new THREE.Quaternion(...slot.quaternion)) * 180) / Math.PI, `${room.id} ${slot.id} (°)`).toBeLessThan(0.1);
      }
    }
  });

  it('cube-room: its RGBA light map (material OPAQUE: alpha never read) has no alpha channel in any variant', async () => {
    const cube = rooms.find((r) => r.id === 8)!;
    // (ktx2 has no WebP: its Basis textures are RGB or RGBA by what the encoder was given.)
    for (const variant of cube.model_variants!.filter((v) => v.name !== 'ktx2')) {
      const { json, bin } = splitGlb(await bytesOf(variant));
      const views = json.bufferViews as Array<{ byteOffset?: number; byteLength: number }>;
      const images = (json.images as Array<{ bufferView: number; mimeType: string }>).filter((i) => i.mimeType === 'image/webp');
      expect(images, variant.name).toHaveLength(1);
      const view = views[images[0]!.bufferView]!;
      const image = bin!.subarray(view.byteOffset ?? 0, (view.byteOffset ?? 0) + view.byteLength);
      const { hasAlpha, channels } = await sharp(image).metadata();
      expect({ hasAlpha, channels }, variant.name).toEqual({ hasAlpha: false, channels: 3 });
    }
  });

  it('every variant is valid for the Khronos validator', async () => {
    for (const room of rooms) {
      for (const variant of room.model_variants!) {
        const report = await validate(await bytesOf(variant));
        expect(report.messages, `room ${room.id} ${variant.name}`).toEqual([]);
        expect(report.errors).toBe(0);
      }
    }
  }, 120_000);
});

describe('with the rest of the bake', () => {
  it('is deterministic: the same sources give the same variant files', async () => {
    const again = tmp('museum-variants-again-');
    await bakeRooms({ contentDir: content, dataDir: again, concurrency: 2, only: [3, 8] });
    const second = (await readManifest(again))!.rooms;
    for (const id of [3, 8]) {
      // Room 8 (cube-room) has textures: its ktx2 variant is among these.
      const names = (list: ManifestRoom[]) => list.find((r) => r.id === id)!.model_variants!.map((v) => v.file.sha256);
      expect(names(second), `room ${id}`).toEqual(names(rooms));
    }
  }, 300_000);

  it('is incremental: nothing rebakes when nothing changed, a lost variant file rebakes its room, a variant setting rebakes ' +
    'all', async () => {
    const unchanged = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
    expect(unchanged.baked).toBe(0);
    // The garage: the real room that bakes fastest (the cube room's KTX2 light map alone takes seconds).
    const garage = rooms.find((r) => r.id === 9)!;
    rmSync(filePath(data, variantOf(garage, 'meshopt').file));
    const repaired = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
    expect(repaired.rooms.filter((r) => r.status === 'baked').map((r) => [r.id, r.reason])).toEqual([[9, 'published files missing']]);

    const smaller = {
      ...OPTIMIZER_SETTINGS,
      variants: { ...OPTIMIZER_SETTINGS.variants, plain: { ...OPTIMIZER_SETTINGS.variants.plain, maxTextureSize: 512 } },
    };
    // A copy of the bake just repaired: the same files a bake of these sources writes, without baking again.
    const copy = tmp('museum-variants-settings-');
    cpSync(data, copy, { recursive: true });
    const rebaked = await bakeRooms({ contentDir: content, dataDir: copy, concurrency: 2, only: [8], settings: smaller });
    expect(rebaked.rooms.find((r) => r.id === 8)!.reason).toBe('sources or settings changed');
    const room = (await readManifest(copy))!.rooms.find((r) => r.id === 8)!;
    expect(variantOf(room, 'plain').max_texture_size).toBe(512);
  }, 300_000);

  it('a room whose variant cannot be made fails with one line, its previous artifacts still published', async () => {
    const dir = tmp('museum-variants-ktx2-');
    const room = (texture: boolean) => {
      const b = new RoomBuilder('Hall');
      const wall = b.material('Wall');
      if (texture) {
        // A KTX2 texture (what a decoder-less client cannot load): the draco model keeps it, plain cannot.
        const ktx2 = Buffer.concat([
          Buffer.from([0xab, 0x4b, 0x54, 0x58, 0x20, 0x32, 0x30, 0xbb, 0x0d, 0x0a, 0x1a, 0x0a]),
          Buffer.alloc(68),
        ]);
        wall.setBaseColorTexture(b.document.createTexture('basis').setImage(ktx2).setMimeType('image/ktx2'));
      }
      b.floorAndCeiling('Hall', [0, 0], [8, 8], 4, b.material('Floor'), b.material('Ceiling'));
      b.innerWalls(8, 8, 4, wall);
      return b;
    };
    writeFileSync(
      join(dir, 'rooms.json'),
      JSON.stringify([{ id: 1, title: 'Hall', slots: 3, token_id: 1, model: 'hall.glb', image: null }]),
    );
    writeFileSync(join(dir, 'hall.glb'), await writeGlb(room(false).document));
    const data = tmp('museum-variants-ktx2-data-');
    await bakeRooms({ contentDir: dir, dataDir: data, concurrency: 1 });
    const before = (await readManifest(data))!.rooms[0]!;
    writeFileSync(join(dir, 'hall.glb'), await writeGlb(room(true).document));
    const summary = await bakeRooms({ contentDir: dir, dataDir: data, concurrency: 1 });
    expect(summary.failed).toBe(1);
    const reason = summary.rooms[0]!.reason;
    expect(reason).toMatch(/plain model variant could not be made: .*image\/ktx2, which needs a decoder/);
    expect(reason).not.toContain('\n');
    const after = (await readManifest(data))!.rooms[0]!;
    expect(after.model_variants).toEqual(before.model_variants);
    expect(after.model_optimized).toEqual(before.model_optimized);
  }, 120_000);
});
