import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { imageFormatOf, ModelError, readModel, readModelFile, shortestFloat32, writeGlb } from '../../bake/gltf-io.ts';
import {
  bufferPastEndGlb,
  garbageJsonGlb,
  joinGlb,
  sharedModels,
  smallRoomGlb,
  splitGlb,
  truncatedGlb,
  validate,
  wrongMagicGlb,
} from './fixtures.ts';

describe('reading models', () => {
  it.each(sharedModels().map((p) => [basename(p), p]))(
    'reads %s (GLB, .gltf with external files, data URIs, Draco, meshopt)',
    async (_name, path) => {
      const document = await readModelFile(path);
      const root = document.getRoot();
      expect(root.listMeshes().length).toBeGreaterThan(0);
      expect(root.listAccessors().every((a) => a.getCount() > 0)).toBe(true);
      // Packing into one GLB keeps it valid: this is how a .gltf source becomes model_url.
      const glb = await writeGlb(document);
      expect((await validate(glb)).errors).toBe(0);
    },
  );

  it('keeps the default scene of a multi-scene file', async () => {
    const document = await readModelFile(sharedModels().find((p) => p.endsWith('MultipleScenes.gltf'))!);
    const root = document.getRoot();
    expect(root.listScenes()).toHaveLength(2);
    expect(root.getDefaultScene()).toBe(root.listScenes()[1]);
  });
});

describe('writing optimized models compactly', () => {
  it.each(sharedModels().map((p) => [basename(p), p]))('%s: same data, valid, never larger', async (_name, path) => {
    const plain = await writeGlb(await readModelFile(path));
    const compact = await writeGlb(await readModelFile(path), { compact: true });
    expect(compact.byteLength).toBeLessThanOrEqual(plain.byteLength);
    const report = await validate(compact);
    expect(report.errors).toBe(0);
    expect(report.warnings).toBeLessThanOrEqual((await validate(plain)).warnings);
    const [a, b] = [await readModel(plain), await readModel(compact)];
    const accessors = (d: typeof a) =>
      d
        .getRoot()
        .listAccessors()
        .map((x) => [x.getType(), x.getNormalized(), Array.from(x.getArray()!)]);
    expect(accessors(b)).toEqual(accessors(a));
    const meshes = (d: typeof a) =>
      d
        .getRoot()
        .listMeshes()
        .map((m) => m.listPrimitives().map((p) => [p.getMode(), p.listSemantics()]));
    expect(meshes(b)).toEqual(meshes(a));
  });

  it('writes accessor bounds as the shortest decimal of the same float32', () => {
    expect(shortestFloat32(Math.fround(0.425))).toBe(0.425);
    expect(shortestFloat32(Math.fround(-1.0416280031204224))).toBe(-1.041628);
    expect(shortestFloat32(32767)).toBe(32767);
    for (const x of [Math.fround(Math.PI), Math.fround(1e-7), Math.fround(-123456.789), Math.fround(3.4e38)])
      expect(Math.fround(shortestFloat32(x))).toBe(x);
  });
});

describe('broken models fail with one clear line', () => {
  const cases: Array<[string, (glb: Uint8Array) => Uint8Array, RegExp]> = [
    ['a truncated GLB', truncatedGlb, /^truncated GLB: header declares \d+ bytes but the file has \d+$/],
    ['a wrong magic', wrongMagicGlb, /^not a glTF model: wrong magic "gLTX" \(expected "glTF" or a JSON object\)$/],
    ['a garbage JSON chunk', garbageJsonGlb, /^GLB JSON chunk is not valid JSON \(.+\)$/],
    [
      'a buffer past the end of the file',
      bufferPastEndGlb,
      /^buffer 0 declares \d+ bytes but only \d+ exist \(buffer past the end of the file\)$/,
    ],
    ['a header shorter than 12 bytes', (glb) => glb.subarray(0, 10), /^truncated GLB: 10 bytes, shorter than the 12-byte header$/],
    [
      'a PNG instead of a model',
      () => Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]),
      /^not a glTF model: wrong magic "\?PNG" \(expected "glTF" or a JSON object\)$/,
    ],
  ];
  it.each(cases)('%s', async (_name, breakIt, message) => {
    const broken = breakIt(await smallRoomGlb());
    const error = await readModel(broken).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it('names a bufferView that runs past its buffer', async () => {
    const { json, bin } = splitGlb(await smallRoomGlb());
    (json.bufferViews as Array<{ byteLength: number }>)[2]!.byteLength += 1_000_000;
    const error = await readModel(joinGlb(Buffer.from(JSON.stringify(json)), bin)).catch((e: Error) => e);
    expect((error as Error).message).toMatch(/^bufferView 2 ends at byte \d+, past the end of buffer 0 \(\d+ bytes\)$/);
  });

  it('names an accessor that needs more bytes than its bufferView has', async () => {
    const { json, bin } = splitGlb(await smallRoomGlb());
    (json.accessors as Array<{ count: number }>)[0]!.count *= 50;
    const error = await readModel(joinGlb(Buffer.from(JSON.stringify(json)), bin)).catch((e: Error) => e);
    expect((error as Error).message).toMatch(/^accessor 0 needs \d+ bytes but bufferView \d+ has \d+$/);
  });

  it('reports a missing external file of a .gltf', async () => {
    const gltf = await readFile(sharedModels().find((p) => p.endsWith('garage.gltf'))!);
    const error = await readModel(gltf, async () => {
      throw Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT' });
    }).catch((e: Error) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toBe('external resource "garage.bin" cannot be read (ENOENT: no such file)');
  });

  it('fails a "texture" whose bytes are not an image, as its declared type allows', async () => {
    const png = await sharp({ create: { width: 4, height: 4, channels: 3, background: '#808080' } })
      .png()
      .toBuffer();
    const jpeg = await sharp(png).jpeg().toBuffer();
    const environ = Buffer.from('HOME=/root\0CONTENT_UPSTREAM_TOKEN=secret\0');
    const model = (image: Record<string, string>) =>
      Buffer.from(JSON.stringify({ asset: { version: '2.0' }, images: [image], textures: [{ source: 0 }] }));
    const read = (image: Record<string, string>, bytes: Buffer) =>
      readModel(model(image), async () => bytes).then(
        () => null,
        (e: Error) => e,
      );
    const failures: Array<[Record<string, string>, Buffer, string]> = [
      [
        { uri: 'environ' },
        environ,
        'texture environ is not an image: its bytes are no known image format, not png/jpeg/webp/avif/gif/ktx2/dds',
      ],
      [
        { uri: 'wall.png' },
        environ,
        'texture wall.png is not an image: its bytes are no known image format, not png/jpeg/webp/avif/gif (declared image/png)',
      ],
      [
        { uri: 'wall.bin', mimeType: 'image/jpeg' },
        environ,
        'texture wall.bin is not an image: its bytes are no known image format, not png/jpeg/webp/avif/gif (declared image/jpeg)',
      ],
      [
        { uri: 'wall.ktx2', mimeType: 'image/ktx2' },
        png,
        'texture wall.ktx2 is not an image: its bytes are png, not ktx2 (declared image/ktx2)',
      ],
    ];
    for (const [image, bytes, message] of failures) {
      const error = await read(image, bytes);
      expect(error, JSON.stringify(image)).toBeInstanceOf(ModelError);
      expect(error!.message).toBe(message);
      expect(error!.message).not.toContain('secret');
    }
    // Real images pass, also a JPEG named .png (common in real models).
    for (const [image, bytes] of [
      [{ uri: 'a.png' }, png],
      [{ uri: 'b.png' }, jpeg],
      [{ uri: 'c' }, jpeg],
    ] as const)
      expect(await read(image, bytes)).toBeNull();
    expect(imageFormatOf(Buffer.from('\xabKTX 20\xbb\r\n\x1a\n', 'latin1'))).toBe('ktx2');
    expect(imageFormatOf(Buffer.from('RIFF\0\0\0\0WEBPVP8 ', 'latin1'))).toBe('webp');
  });
});
