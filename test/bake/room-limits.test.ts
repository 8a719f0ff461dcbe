// A room over one of the bake's bounds (accessor elements, time, worker heap) fails alone, with one
// clear line, while the other rooms of the batch publish.
import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readManifest } from '../../artifacts/store.ts';
import { bakeRooms, type BakeRunOptions, type BakeSummary } from '../../bake/pipeline.ts';
import { contentRoom, joinGlb, smallRoomGlb, splitGlb } from './fixtures.ts';

const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));
const room = contentRoom;

/** Bake a good room (1) and `bad` (2) together; the summary and the published room ids. */
async function bakeWithGood(bad: { name: string; bytes: Uint8Array }, options: Partial<BakeRunOptions> = {}) {
  const content = tmp('museum-limits-');
  await writeFile(join(content, 'good.glb'), await smallRoomGlb());
  await writeFile(join(content, bad.name), bad.bytes);
  await writeFile(join(content, 'rooms.json'), JSON.stringify([room(1, 'good.glb'), room(2, bad.name)]));
  const data = tmp('museum-limits-data-');
  const summary: BakeSummary = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2, ...options });
  const published = (await readManifest(data))?.rooms.map((r) => r.id);
  return { summary, published, reason: summary.rooms.find((r) => r.id === 2)!.reason };
}

/**
 * A valid room carrying `count` empty nodes: within every model limit, but reading, analysing and
 * writing that many nodes takes seconds and hundreds of MB of heap (a good room: ~0.3 s, < 96 MB).
 * Written into the GLB's JSON directly: building them through glTF-Transform cost the test seconds.
 */
async function manyNodesGlb(count: number): Promise<Uint8Array> {
  const { json, bin } = splitGlb(await smallRoomGlb('Crowded'));
  const nodes = json.nodes as object[];
  const scene = (json.scenes as Array<{ nodes: number[] }>)[0]!;
  for (let i = 0; i < count; i++) scene.nodes.push(nodes.push({ name: `Empty_${i}` }) - 1);
  return joinGlb(Buffer.from(JSON.stringify(json)), bin);
}

describe('room limits', () => {
  let crowded: Uint8Array;
  beforeAll(async () => {
    crowded = await manyNodesGlb(600_000);
  }, 120_000);

  it('a tiny .gltf declaring a huge zero-filled accessor fails its room at once; the good room publishes', async () => {
    // 20 M VEC3 positions with no bufferView: 250 bytes that glTF-Transform would expand to 240 MB.
    const gltf = {
      asset: { version: '2.0' },
      scene: 0,
      scenes: [{ nodes: [0] }],
      nodes: [{ mesh: 0 }],
      meshes: [{ primitives: [{ attributes: { POSITION: 0 } }] }],
      accessors: [{ componentType: 5126, type: 'VEC3', count: 20_000_000 }],
    };
    const { summary, published, reason } = await bakeWithGood({ name: 'zeros.gltf', bytes: Buffer.from(JSON.stringify(gltf)) });
    expect(reason).toBe('model declares 60,000,000 accessor elements (count × components), over the limit of 50,000,000');
    expect(summary.rooms.find((r) => r.id === 1)!.status).toBe('baked');
    expect(published).toEqual([1]);
  }, 30_000);

  it('a room over the time limit is stopped and fails alone; the batch goes on', async () => {
    // One lane: the crowded room (biggest first; 14–29 s on Node 24–20) runs alone, is stopped, the good room runs after
    // it on a fresh worker (its first room loads the codecs: the limit leaves room for a loaded machine).
    const { summary, published, reason } = await bakeWithGood(
      { name: 'crowded.glb', bytes: crowded },
      { concurrency: 1, roomTimeoutMs: 5_000 },
    );
    expect(reason).toBe('took longer than 5 s (stopped)');
    expect(summary.rooms.find((r) => r.id === 1)!.status).toBe('baked');
    expect(published).toEqual([1]);
  }, 120_000);

  it('a room over the worker heap limit fails alone; the room that shared its worker is retried and publishes', async () => {
    // Two rooms in flight on one worker: when it dies both are retried alone, and only the crowded one dies again.
    const { summary, published, reason } = await bakeWithGood({ name: 'crowded.glb', bytes: crowded }, { workerHeapMb: 128 });
    expect(reason).toBe('bake worker stopped: out of memory (over the 128 MB heap limit)');
    expect(summary.rooms.find((r) => r.id === 1)!.status).toBe('baked');
    expect(published).toEqual([1]);
  }, 120_000);
});
