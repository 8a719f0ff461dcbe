/**
 * The slot engine against hostile models, built with RoomBuilder: slot numbers far beyond any
 * room, non-finite vertices in placeholders and in the room, one mesh reused until the model draws
 * over a million triangles. Each bakes with a warning (and a shortfall) or fails its room alone
 * with one clear line, and the rest of the batch publishes.
 */
import { mkdtempSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Node } from '@gltf-transform/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { filePath, Manifest, RoomSlot, RoomSlotData, artifactPaths } from '../../artifacts/format.ts';
import { writeGlb } from '../../bake/gltf-io.ts';
import { bakeRooms, type BakeSummary } from '../../bake/pipeline.ts';
import { slotDataJson } from '../../bake/room.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { BAKE_LIMITS } from '../../bake/settings.ts';
import { computeSlots } from '../../bake/slots/index.ts';

const SHA = '7'.repeat(64);
const OVER_CAP =
  /^model draws more than 1,000,000 triangles \(points and line segments count as triangles; meshes counted once per node and instance using them\): over the bake's limit$/;

/** A closed 6 × 6 × 3 m room with a placeholder per name along the north wall. */
function room(slotNames: string[] = []): { b: RoomBuilder; slots: Node[] } {
  const b = new RoomBuilder('Hostile');
  const wall = b.material('Wall');
  b.floorAndCeiling('Hostile', [-3, -3], [3, 3], 3, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [3, -3], [-3, -3], 3, 0.2, wall);
  b.wall('South', [-3, 3], [3, 3], 3, 0.2, wall);
  b.wall('East', [3, 3], [3, -3], 3, 0.2, wall);
  b.wall('West', [-3, -3], [-3, 3], 3, 0.2, wall);
  const slots = slotNames.map((name, i) =>
    b.slot(name, { center: [i - 1.5, 1.5, -2.89], normal: [0, 0, 1], up: [0, 1, 0], width: 0.8, height: 0.6 }),
  );
  return { b, slots };
}

/** Overwrite the x of a node's first vertex (shared by both triangles of a builder quad). */
function poisonFirstVertex(node: Node, value: number): void {
  const position = node.getMesh()!.listPrimitives()[0]!.getAttribute('POSITION')!;
  const array = position.getArray()!.slice();
  array[0] = value;
  position.setArray(array);
}

/** Non-finite in three ways: NaN and Infinity in the vertices, and a float32 overflow by the node. */
const POISONS: Array<[string, (node: Node) => void]> = [
  ['a NaN vertex', (node) => poisonFirstVertex(node, NaN)],
  ['an Infinity vertex', (node) => poisonFirstVertex(node, Infinity)],
  ['a node translated to 1e39', (node) => node.setTranslation([1e39, 1.5, -2.89])],
];

/** One 1,800-triangle grid drawn by enough nodes to pass the cap (a 60 KB file). */
function overCapRoom(): RoomBuilder {
  const { b } = room(['Slot_001']);
  const grid = b.panel('Grid', { center: [0, 1, 0], normal: [0, 0, 1], up: [0, 1, 0], width: 1, height: 1 }, b.material('Grid'), [30, 30]);
  const copies = Math.ceil(BAKE_LIMITS.maxDrawnTriangles / 1800);
  for (let k = 0; k < copies; k++) b.root.addChild(b.document.createNode(`Copy ${k}`).setMesh(grid.getMesh()));
  return b;
}

describe('slot engine: hostile models', () => {
  it('renumbers slot numbers above the cap like duplicates and describes gaps from the numbers used', () => {
    const { b } = room(['Slot_001', 'Slot_003', 'Slot_4000000000', `Slot_1${'0'.repeat(21)}`]);
    const result = computeSlots(b.document, { roomId: 1, onchainSlots: 4, modelSha256: SHA, plan: false });
    expect(result.slots.map((s) => s.id)).toEqual(['Slot_001', 'Slot_003', 'Slot_004', 'Slot_005']);
    for (const slot of result.slots) expect(RoomSlot.safeParse(slot).success, slot.id).toBe(true);
    expect(result.warnings).toEqual([
      'Slot_NNN numbering has gaps: 2 missing',
      '"Slot_4000000000" is above the highest slot number, 9999; numbered Slot_004',
      `"Slot_1${'0'.repeat(21)}" is above the highest slot number, 9999; numbered Slot_005`,
    ]);
    expect(result.shortfall).toBeNull();
  });

  it.each(POISONS)('ignores a placeholder with %s: warning, shortfall, valid slots', (_label, poison) => {
    const { b, slots } = room(['Slot_001', 'Slot_002']);
    poison(slots[1]!);
    const result = computeSlots(b.document, { roomId: 1, onchainSlots: 2, modelSha256: SHA, plan: false });
    expect(result.slots.map((s) => s.id)).toEqual(['Slot_001']);
    expect(RoomSlot.safeParse(result.slots[0]).success).toBe(true);
    expect(result.warnings).toEqual(['slot node "Slot_002" has no area (2 triangle(s) with non-finite vertex positions); it was ignored']);
    expect(result.shortfall).toMatchObject({ expected: 2, placed: 1 });
  });

  it('fails slot data the server would refuse with the schema path, before it is written', () => {
    const { b } = room(['Slot_001']);
    const slots = computeSlots(b.document, { roomId: 1, onchainSlots: 1, modelSha256: SHA, plan: false }).slots;
    const ids = { model: SHA, source_model: SHA, models: [SHA] };
    const data: RoomSlotData = { version: 1, room: 1, ...ids, generated_at: '', algorithm: 'x', slots: [{ ...slots[0]!, width: NaN }] };
    expect(() => slotDataJson(data)).toThrow(/^slot data fails the RoomSlotData schema: slots\.0\.width: /);
    expect(RoomSlotData.parse(JSON.parse(slotDataJson({ ...data, slots })))).toBeTruthy();
  });

  it.each(POISONS)('leaves out a room triangle with %s: same kind and anchors as without it, and a warning', (_label, poison) => {
    const options = { roomId: 3, onchainSlots: 6, modelSha256: SHA, plan: false };
    const clean = computeSlots(room().b.document, options);
    const { b } = room();
    poison(b.mesh('Junk', [0, 0, 0, 0.01, 0, 0, 0, 0.01, 0], [0, 1, 2], b.material('Junk')));
    const result = computeSlots(b.document, options);
    expect(result.kind).toBe(clean.kind);
    expect(result.kindEvidence).toBe(clean.kindEvidence);
    expect(result.slots).toEqual(clean.slots);
    expect(result.warnings).toEqual(['1 room triangle(s) with non-finite vertex positions were ignored', ...clean.warnings]);
  });

  it('fails a model that draws more triangles than the cap, before expanding them', () => {
    expect(() => computeSlots(overCapRoom().document, { roomId: 1, onchainSlots: 1, modelSha256: SHA, plan: false })).toThrow(OVER_CAP);
  });
});

describe('a batch with hostile rooms', () => {
  let data: string;
  let summary: BakeSummary;
  const outcome = (id: number) => summary.rooms.find((r) => r.id === id)!;
  const slotData = async (id: number) => {
    const manifest = Manifest.parse(JSON.parse(await readFile(artifactPaths(data).manifest, 'utf8')));
    return RoomSlotData.parse(JSON.parse(await readFile(filePath(data, manifest.rooms.find((r) => r.id === id)!.slot_data!), 'utf8')));
  };

  beforeAll(async () => {
    const content = mkdtempSync(join(tmpdir(), 'museum-slots-hostile-'));
    data = mkdtempSync(join(tmpdir(), 'museum-slots-hostile-data-'));
    const huge = room(['Slot_001', 'Slot_4000000000']).b;
    const far = room(['Slot_001', 'Slot_002']);
    far.slots[1]!.setTranslation([1e39, 1.5, -2.89]);
    const models: Array<[string, RoomBuilder]> = [
      ['good', room(['Slot_001', 'Slot_002']).b],
      ['huge-number', huge],
      ['far-slot', far.b],
      ['over-cap', overCapRoom()],
    ];
    for (const [name, b] of models) await writeFile(join(content, `${name}.glb`), await writeGlb(b.document));
    const entry = (id: number, name: string) => ({
      id,
      title: name,
      architect: '',
      description: '',
      series: '',
      slots: 2,
      token_id: null,
      model: `${name}.glb`,
      image: null,
    });
    await writeFile(join(content, 'rooms.json'), JSON.stringify(models.map(([name], i) => entry(i + 1, name))));
    summary = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
  }, 120_000);

  it('bakes a room with Slot_4000000000 (renumbered) next to the good room', async () => {
    expect(outcome(1).status).toBe('baked');
    expect(outcome(2).status).toBe('baked');
    const slots = await slotData(2);
    expect(slots.slots.map((s) => s.id)).toEqual(['Slot_001', 'Slot_002']);
    expect(slots.warnings).toEqual(['"Slot_4000000000" is above the highest slot number, 9999; numbered Slot_002']);
  });

  it('publishes schema-valid slot data with a shortfall for a placeholder at 1e39', async () => {
    expect(outcome(3).status).toBe('baked');
    const slots = await slotData(3);
    expect(slots.slots.map((s) => s.id)).toEqual(['Slot_001']);
    expect(slots.shortfall).toMatchObject({ expected: 2, placed: 1 });
  });

  it('fails the over-cap room alone with the limit in one line', async () => {
    expect(outcome(4)).toMatchObject({ status: 'failed', reason: expect.stringMatching(OVER_CAP) });
    expect(summary).toMatchObject({ published: true, baked: 3, failed: 1 });
    const manifest = Manifest.parse(JSON.parse(await readFile(artifactPaths(data).manifest, 'utf8')));
    expect(manifest.rooms.map((r) => r.id)).toEqual([1, 2, 3]);
  });
});
