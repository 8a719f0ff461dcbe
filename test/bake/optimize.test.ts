import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { Document } from '@gltf-transform/core';
import { DRACO_DEFAULTS } from '@gltf-transform/functions';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { isGlb, localResourceLoader, ModelError, readModel, writeGlb } from '../../bake/gltf-io.ts';
import { normalMapAngularError } from '../../bake/normal-error.ts';
import {
  assertTextureSizes,
  optimizeModel,
  optimizerSettingsId,
  OPTIMIZER_SETTINGS,
  startTextureCompression,
  type OptimizerSettings,
} from '../../bake/optimize.ts';
import { withLosslessNormals } from '../../bake/settings.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { RoomBuilder, SLOT_MATERIAL_NAME } from '../../bake/sample/room-builder.ts';
import { hugeTextureGlb, sharedModels, validate } from './fixtures.ts';

async function load(path: string) {
  const bytes = await readFile(path);
  const loader = localResourceLoader(dirname(path));
  const read = () => readModel(bytes, loader);
  const source = isGlb(bytes) ? new Uint8Array(bytes) : await writeGlb(await read());
  return { source, read };
}

const slotFacts = (document: Document) =>
  document
    .getRoot()
    .listNodes()
    .filter((n) => /^Slot_\d{3}$/.test(n.getName()))
    .map((n) => {
      const prim = n.getMesh()?.listPrimitives()[0];
      // Name, material and vertex attributes (clients map the artwork with the quad's UVs).
      return [n.getName(), prim?.getMaterial()?.getName() ?? null, prim?.listSemantics().sort().join(',')] as const;
    })
    .sort();

/** Per primitive, its triangles as sorted vertex tuples (every attribute, decoded): equal geometry whatever the order. */
async function decodedTriangles(glb: Uint8Array): Promise<string[][]> {
  const document = await readModel(glb);
  return document
    .getRoot()
    .listMeshes()
    .flatMap((mesh) => mesh.listPrimitives())
    .map((primitive) => {
      const semantics = primitive.listSemantics().sort();
      const indices = primitive.getIndices();
      const count = indices ? indices.getCount() : primitive.getAttribute('POSITION')!.getCount();
      const vertex = (i: number) => semantics.map((s) => primitive.getAttribute(s)!.getElement(i, []).join(',')).join('|');
      const triangles: string[] = [];
      for (let t = 0; t < count; t += 3) {
        const corners = [0, 1, 2].map((k) => vertex(indices ? indices.getScalar(t + k) : t + k));
        const first = corners.indexOf([...corners].sort()[0]!); // rotate, keeping the winding
        triangles.push([0, 1, 2].map((k) => corners[(first + k) % 3]).join(' / '));
      }
      return triangles.sort();
    });
}

describe('optimizer on every shared asset', () => {
  it.each(sharedModels().map((p) => [basename(p), p]))('%s: valid, never larger than its source', async (_name, path) => {
    const { source, read } = await load(path);
    const result = await optimizeModel({ source, read });
    expect(result.glb.byteLength).toBeLessThanOrEqual(source.byteLength);
    const report = await validate(result.glb);
    expect(report.messages).toEqual([]);
    expect(report.errors).toBe(0);
    // The output is a model we can read back.
    expect((await readModel(result.glb)).getRoot().listMeshes().length).toBeGreaterThan(0);
  });

  it('falls back without Draco when Draco would grow a tiny model, and says so', async () => {
    const { source, read } = await load(sharedModels().find((p) => p.endsWith('MultipleScenes.gltf'))!);
    const result = await optimizeModel({ source, read });
    expect(result.skipped).toContain('draco');
    expect(result.warnings.join(' ')).toMatch(/skipped draco/);
  });

  it('returns the source itself when nothing makes it smaller', async () => {
    const { source, read } = await load(sharedModels().find((p) => p.endsWith('TriangleWithoutIndices.gltf'))!);
    const result = await optimizeModel({ source, read });
    expect(result.isSource).toBe(true);
    expect(Buffer.from(result.glb).equals(Buffer.from(source))).toBe(true);
    expect(result.warnings[0]).toMatch(/the optimized model is the source/);
  });

  it(
    'compresses every texture to WebP, the normal map lossy with a small angular error; --lossless-normals keeps a JPEG normal map as ' +
      'it is',
    async () => {
      const { source, read } = await load(sharedModels().find((p) => p.endsWith('DamagedHelmet.glb'))!);
      const sourceNormal = (await read()).getRoot().listMaterials()[0]!.getNormalTexture()!.getImage()!;
      const result = await optimizeModel({ source, read });
      const optimized = await readModel(result.glb);
      const textures = optimized.getRoot().listTextures();
      const normal = optimized.getRoot().listMaterials()[0]!.getNormalTexture()!;
      expect(textures.every((t) => t.getMimeType() === 'image/webp')).toBe(true);
      const error = await normalMapAngularError(sourceNormal, normal.getImage()!);
      expect(error.p50).toBeLessThan(1);
      expect(error.p99).toBeLessThan(8);
      const exact = await readModel((await optimizeModel({ source, read, settings: withLosslessNormals(true) })).glb);
      // A JPEG normal map is already lossy: lossless WebP would only add bytes.
      expect(exact.getRoot().listMaterials()[0]!.getNormalTexture()!.getMimeType()).toBe('image/jpeg');
    },
  );
});

describe('optimizer on the sample rooms', () => {
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'museum-opt-'));
    await writeSampleContent(dir);
  });

  it.each(['gallery', 'corridor', 'atelier', 'great-hall', 'pavilion'])(
    '%s: every Slot_NNN node, its material and its attributes survive',
    async (slug) => {
      const { source, read } = await load(join(dir, 'models', `${slug}.glb`));
      const before = slotFacts(await read());
      expect(before.length).toBeGreaterThan(0);
      const result = await optimizeModel({ source, read });
      expect(result.skipped).toEqual([]);
      expect(result.glb.byteLength).toBeLessThan(source.byteLength);
      expect((await validate(result.glb)).errors).toBe(0);
      const after = await readModel(result.glb);
      expect(slotFacts(after)).toEqual(before);
      expect(before.every(([, material, semantics]) => material === SLOT_MATERIAL_NAME && semantics === 'NORMAL,POSITION,TEXCOORD_0')).toBe(
        true,
      );
      // Everything that is not a slot was joined: one mesh node per material left.
      const nonSlotMeshes = after
        .getRoot()
        .listNodes()
        .filter((n) => n.getMesh() && !/^Slot_/.test(n.getName()));
      const materials = new Set(
        nonSlotMeshes.flatMap((n) =>
          n
            .getMesh()!
            .listPrimitives()
            .map((p) => p.getMaterial()),
        ),
      );
      expect(nonSlotMeshes.length).toBe(materials.size);
      expect(nonSlotMeshes.length).toBeLessThan((await read()).getRoot().listNodes().length - before.length);
    },
  );

  it('atelier: WebP textures; the normal map lossy by default (bounded angular error), exact with --lossless-normals', async () => {
    const { source, read } = await load(join(dir, 'models', 'atelier.glb'));
    const sourceNormal = (await read())
      .getRoot()
      .listMaterials()
      .find((m) => m.getName() === 'Brick')!
      .getNormalTexture()!
      .getImage()!;
    const brick = async (settings?: OptimizerSettings) => {
      const result = await optimizeModel({ source, read, settings });
      return (await readModel(result.glb))
        .getRoot()
        .listMaterials()
        .find((m) => m.getName() === 'Brick')!;
    };
    const chunk = (image: Uint8Array) => Buffer.from(image.subarray(12, 16)).toString('latin1');
    const lossy = await brick();
    expect(lossy.getBaseColorTexture()!.getMimeType()).toBe('image/webp');
    expect(lossy.getNormalTexture()!.getMimeType()).toBe('image/webp');
    expect(chunk(lossy.getBaseColorTexture()!.getImage()!)).toBe('VP8 ');
    expect(chunk(lossy.getNormalTexture()!.getImage()!)).toBe('VP8 ');
    // The sample's normal map is per-pixel noise, the worst case for lossy encoding: bounded, not small.
    const error = await normalMapAngularError(sourceNormal, lossy.getNormalTexture()!.getImage()!);
    expect(error.p50).toBeGreaterThan(0);
    expect(error.p99).toBeLessThan(45);

    const exact = (await brick(withLosslessNormals(true))).getNormalTexture()!;
    expect(chunk(exact.getImage()!)).toBe('VP8L');
    // VP8L is also near-lossless' container: compare the decoded pixels.
    const pixels = (image: Uint8Array) => sharp(image).removeAlpha().raw().toBuffer();
    expect((await pixels(exact.getImage()!)).equals(await pixels(sourceNormal))).toBe(true);
    expect((await normalMapAngularError(sourceNormal, exact.getImage()!)).max).toBeLessThan(1e-3);
    // A setting of the incremental key: the two bakes are told apart.
    expect(optimizerSettingsId(withLosslessNormals(true))).not.toBe(optimizerSettingsId());
  });

  it('is deterministic: the same input gives the same bytes, textures encoded in their step or early (as the room bake does)', async () => {
    const { source, read } = await load(join(dir, 'models', 'atelier.glb'));
    const [a, b] = [await optimizeModel({ source, read }), await optimizeModel({ source, read })];
    expect(Buffer.from(a.glb).equals(Buffer.from(b.glb))).toBe(true);
    const early = await read();
    await startTextureCompression(early);
    expect(
      early
        .getRoot()
        .listTextures()
        .some((t) => t.getMimeType() === 'image/webp'),
    ).toBe(true);
    const c = await optimizeModel({ source, read, first: early });
    expect(Buffer.from(c.glb).equals(Buffer.from(a.glb))).toBe(true);
  });
});

describe('palette', () => {
  it('merges factor-only materials into a palette but never the slot placeholders', async () => {
    const b = new RoomBuilder('Colours');
    const colours: Array<[number, number, number, number]> = [
      [1, 0, 0, 1],
      [0, 1, 0, 1],
      [0, 0, 1, 1],
      [1, 1, 0, 1],
      [0, 1, 1, 1],
      [1, 0.5, 0, 1],
    ];
    colours.forEach((color, i) => b.box(`Block_${i}`, [i * 2, 0, 0], [i * 2 + 1, 1, 1], b.material(`Paint_${i}`, { color })));
    b.slot('Slot_001', { center: [0.5, 0.5, 1.01], normal: [0, 0, 1], up: [0, 1, 0], width: 0.5, height: 0.5 });
    b.slot('Slot_002', { center: [2.5, 0.5, 1.01], normal: [0, 0, 1], up: [0, 1, 0], width: 0.5, height: 0.5 }, 'vertices');
    const source = await writeGlb(b.document);
    const read = () => readModel(source);
    const before = slotFacts(await read());
    const result = await optimizeModel({ source, read });
    const after = await readModel(result.glb);
    expect(slotFacts(after)).toEqual(before);
    const materials = after
      .getRoot()
      .listMaterials()
      .map((m) => m.getName());
    expect(materials.filter((m) => m.startsWith('Paint_'))).toEqual([]);
    expect(materials).toContain(SLOT_MATERIAL_NAME);
    expect(after.getRoot().listTextures().length).toBeGreaterThan(0);
    expect((await validate(result.glb)).errors).toBe(0);
  });
});

describe('texture size limits', () => {
  it('refuses a texture declaring 30000×30000 pixels before decoding it', async () => {
    const document = await readModel(await hugeTextureGlb());
    expect(() => assertTextureSizes(document)).toThrow(ModelError);
    expect(() => assertTextureSizes(document)).toThrow(
      /^texture Mural_basecolor\.png declares 30000×30000 pixels, over the limit of \d+ pixels$/,
    );
  });

  it('sizes an image by what its bytes are, not by the type the model declares', async () => {
    const labelledPng = async (bytes: Uint8Array) => {
      const document = await readModel(await hugeTextureGlb());
      document.getRoot().listTextures()[0]!.setImage(bytes).setMimeType('image/png');
      return document;
    };
    // A JPEG whose frame header declares 15000×15000 pixels (under sharp's own limit, over ours).
    const jpeg = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#123456' } })
      .jpeg()
      .toBuffer();
    const frame = jpeg.indexOf(Buffer.from([0xff, 0xc0]));
    jpeg.writeUInt16BE(15000, frame + 5);
    jpeg.writeUInt16BE(15000, frame + 7);
    const jpegDocument = await labelledPng(jpeg);
    expect(() => assertTextureSizes(jpegDocument)).toThrow(
      /^texture Mural_basecolor\.png declares 15000×15000 pixels, over the limit of \d+ pixels$/,
    );
    // A GIF whose palette bytes, read as a PNG header, say 10×10: refused, whatever they say.
    const gif = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#123456' } })
      .gif()
      .toBuffer();
    gif.writeUInt32BE(10, 16);
    gif.writeUInt32BE(10, 20);
    const gifDocument = await labelledPng(gif);
    expect(() => assertTextureSizes(gifDocument)).toThrow(
      'texture Mural_basecolor.png: declared image/png, but its bytes are not a PNG, JPEG or WebP image',
    );
  });
});

describe('settings', () => {
  it('use the Draco method and quantization of `gltf-transform optimize`, at speed 4', () => {
    expect(OPTIMIZER_SETTINGS.draco).toEqual({ ...DRACO_DEFAULTS, encodeSpeed: 4, decodeSpeed: 4 });
  });

  it('Draco at speed 4 decodes to the same triangles as at speed 5, in fewer bytes', async () => {
    const { source, read } = await load(sharedModels().find((p) => p.endsWith('garage.glb'))!);
    const atSpeed = (speed: number) =>
      optimizeModel({
        source,
        read,
        settings: { ...OPTIMIZER_SETTINGS, draco: { ...OPTIMIZER_SETTINGS.draco, encodeSpeed: speed, decodeSpeed: speed } },
      });
    const [fast, ours] = [await atSpeed(5), await atSpeed(4)];
    expect(ours.glb.byteLength).toBeLessThan(fast.glb.byteLength);
    expect(await decodedTriangles(ours.glb)).toEqual(await decodedTriangles(fast.glb));
  });

  it('have an id that changes with them and is stable otherwise', () => {
    expect(optimizerSettingsId()).toBe(optimizerSettingsId(OPTIMIZER_SETTINGS));
    const other = { ...OPTIMIZER_SETTINGS, textures: { ...OPTIMIZER_SETTINGS.textures, quality: 90 } };
    expect(optimizerSettingsId(other)).not.toBe(optimizerSettingsId());
  });
});
