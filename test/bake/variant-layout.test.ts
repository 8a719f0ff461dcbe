/**
 * The plain variant's vertex layout (bake/variants.ts PLAIN_VERTEX_LAYOUT): each vertex attribute's
 * values are contiguous, not interleaved with the others, which brotli compresses better; writing
 * it leaves the shared NodeIO's default (interleaved) for every other write.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, constants as zlibConstants } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { filePath } from '../../artifacts/format.ts';
import { PRECOMPRESS_LEVELS } from '../../artifacts/store.ts';
import { readModel, writeGlb } from '../../bake/gltf-io.ts';
import { bakeRoom } from '../../bake/room.ts';
import { SHARED_ASSETS, splitGlb } from './fixtures.ts';

const GARAGE = join(SHARED_ASSETS, 'rooms', 'garage', 'garage.gltf');
const ARRAY_BUFFER = 34962;
const COMPONENT_BYTES: Record<number, number> = { 5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4 };
const COMPONENTS: Record<string, number> = { SCALAR: 1, VEC2: 2, VEC3: 3, VEC4: 4 };

interface Json {
  accessors: Array<{ bufferView?: number; componentType: number; type: string }>;
  bufferViews: Array<{ byteStride?: number; target?: number }>;
}

/** Vertex attribute accessors whose elements are spaced wider than their own size (interleaved with others). */
function interleavedAttributes(glb: Uint8Array): number {
  const json = splitGlb(glb).json as unknown as Json;
  return json.accessors.filter((accessor) => {
    const view = accessor.bufferView === undefined ? undefined : json.bufferViews[accessor.bufferView];
    if (view?.target !== ARRAY_BUFFER || view.byteStride === undefined) return false;
    return view.byteStride > COMPONENT_BYTES[accessor.componentType]! * COMPONENTS[accessor.type]!;
  }).length;
}

const brotliBytes = (data: Uint8Array) =>
  brotliCompressSync(data, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: PRECOMPRESS_LEVELS.brotliQuality } }).byteLength;

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('the plain variant of a real room (garage)', () => {
  it('has no interleaved vertex attribute, is smaller after brotli for it, and leaves other writes interleaved', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'museum-variant-layout-'));
    dirs.push(dataDir);
    const job = { roomId: 1, onchainSlots: 8, model: { path: GARAGE, resources: { 'garage.bin': GARAGE.replace(/gltf$/, 'bin') } } };
    const result = await bakeRoom({ ...job, image: null, planPicture: false, dataDir });
    const plain = result.model_variants.find((v) => v.name === 'plain')!;
    const glb = await readFile(filePath(dataDir, plain.file));
    expect(interleavedAttributes(glb)).toBe(0);

    // The same model written with the default layout: interleaved, and larger once compressed.
    const interleaved = await writeGlb(await readModel(glb), { compact: true });
    expect(interleavedAttributes(interleaved)).toBeGreaterThan(0);
    const [separateBr, interleavedBr] = [brotliBytes(glb), brotliBytes(interleaved)];
    expect(separateBr).toBeLessThan(0.95 * interleavedBr);
    // What /files serves for br is that sibling.
    expect((await readFile(`${filePath(dataDir, plain.file)}.br`)).byteLength).toBe(separateBr);
  }, 120_000);
});
