/**
 * The slot engine on ground-truth rooms built with RoomBuilder: every authored slot's position,
 * facing, size, flipped and ambiguous flags against where it really is.
 */
import { mergeDocuments } from '@gltf-transform/functions';
import { describe, expect, it } from 'vitest';
import { RoomSlot } from '../../artifacts/format.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { computeSlots, embedAnchors, SLOT_ALGORITHM } from '../../bake/slots/index.ts';
import { angleBetween, orientationProblems, rotate } from './rooms/geometry.ts';
import { mulberry32 } from '../../common/random.ts';
import { randomRoom } from './rooms/random.ts';
import {
  corridor,
  gallery,
  numberingFaults,
  partition,
  pillar,
  rotatedScaledGallery,
  sandwiched,
  sculpture,
  type TruthRoom,
} from './rooms/truth.ts';

const SHA = 'e'.repeat(64);
const distance = (a: readonly number[], b: readonly number[]) => Math.hypot(a[0]! - b[0]!, a[1]! - b[1]!, a[2]! - b[2]!);

function expectTruth(room: TruthRoom, slots: RoomSlot[]): void {
  expect(slots.map((s) => s.id)).toEqual(room.slots.map((t) => t.id));
  for (const truth of room.slots) {
    const slot = slots.find((s) => s.id === truth.id)!;
    const where = `${room.name} ${truth.id}`;
    expect(RoomSlot.safeParse(slot).success, where).toBe(true);
    expect(slot.source, where).toBe('authored');
    expect(distance(slot.position, truth.position), `${where} position`).toBeLessThan(1e-3);
    expect(angleBetween(slot.facing, truth.facing), `${where} facing`).toBeLessThan(0.5);
    expect(Math.abs(slot.width - truth.width), `${where} width`).toBeLessThan(1e-3);
    expect(Math.abs(slot.height - truth.height), `${where} height`).toBeLessThan(1e-3);
    expect(slot.flipped, `${where} flipped`).toBe(truth.flipped);
    expect(slot.ambiguous, `${where} ambiguous`).toBe(truth.ambiguous ?? false);
    expect(orientationProblems(slot), where).toEqual([]);
    // Mounted on a surface: next to nothing behind; open space in front unless boxed in.
    expect(slot.clearance!.back, `${where} back clearance`).toBeLessThanOrEqual(0.02);
    if (truth.ambiguous) expect(slot.clearance!.front, `${where} front clearance`).toBeLessThan(0.05);
    else expect(slot.clearance!.front, `${where} front clearance`).toBeGreaterThan(0.4);
    expect(slot.evidence, where).toBeTruthy();
  }
}

describe('slot engine: authored slots against ground truth', () => {
  const rooms: Array<[string, () => TruthRoom]> = [
    ['normals authored into single-sided and thick walls, both placement styles', gallery],
    ['slots on both faces of a zero-thickness partition', partition],
    ['slots on every face of a pillar, and sunk 3 mm into a wall', pillar],
    ['a corridor with a doorway behind and in front of slots, and an open end', corridor],
    ['a rotated, non-uniformly scaled and translated root', rotatedScaledGallery],
    ['a sculpture (detected from the geometry), facing outward', sculpture],
  ];
  it.each(rooms)('%s', (_label, make) => {
    const room = make();
    const result = computeSlots(room.document, { roomId: 1, onchainSlots: room.slots.length, modelSha256: SHA });
    expect(result.kind).toBe(room.kind);
    expect(result.shortfall).toBeNull();
    expect(result.warnings).toEqual([]);
    expectTruth(room, result.slots);
  });

  it('decides without the authored normal: every slot of the gallery authored the wrong way round', () => {
    const room = gallery();
    for (const node of room.document.getRoot().listNodes()) {
      if (!node.getName().startsWith('Slot_')) continue;
      // Reverse the winding of the quad: the authored normal now points the other way.
      for (const prim of node.getMesh()!.listPrimitives()) {
        const indices = prim.getIndices()!;
        const a = indices.getArray()!;
        for (let i = 0; i < a.length; i += 3) [a[i + 1], a[i + 2]] = [a[i + 2]!, a[i + 1]!];
        indices.setArray(a);
      }
    }
    const result = computeSlots(room.document, { roomId: 1, onchainSlots: 8, modelSha256: SHA });
    expectTruth({ ...room, slots: room.slots.map((t) => ({ ...t, flipped: !t.flipped })) }, result.slots);
  });

  it('flags slots only the tie-break can decide as ambiguous, and faces them into the room', () => {
    const room = sandwiched();
    const result = computeSlots(room.document, { roomId: 1, onchainSlots: 2, modelSha256: SHA });
    expectTruth(room, result.slots);
    expect(result.warnings).toEqual([
      'Slot_001: ambiguous (both sides closed): tie-break into the room interior',
      'Slot_002: ambiguous (both sides closed): tie-break into the room interior',
    ]);
  });

  it('levels horizontal slots by the documented rule: +Y = world −Z', () => {
    const plaque = computeSlots(gallery().document, { roomId: 1, onchainSlots: 8, modelSha256: SHA }).slots.find(
      (s) => s.id === 'Slot_008',
    )!;
    expect(angleBetween(plaque.facing, [0, 1, 0])).toBeLessThan(0.01);
    expect(angleBetween(rotate(plaque.quaternion, [0, 1, 0]), [0, 0, -1])).toBeLessThan(0.01);
    expect(angleBetween(rotate(plaque.quaternion, [1, 0, 0]), [1, 0, 0])).toBeLessThan(0.01);
  });

  it('uses the given kind over the detected one', () => {
    const room = sculpture();
    const result = computeSlots(room.document, { roomId: 1, onchainSlots: 4, modelSha256: SHA, kind: 'room' });
    expect(result.kind).toBe('room');
    expect(result.kindEvidence).toContain('given as room');
  });
});

describe('slot engine: authored slots anywhere on the walls of random rooms', () => {
  /**
   * Hang authored quads where generated anchors are (their facing is known good): random sizes,
   * both placement styles, half authored into the wall, from sunk 4 mm into the wall to 16 mm in
   * front of it — except on zero-thickness partitions, where "sunk" is the other face.
   */
  it.each([2, 3, 5, 8, 9, 13, 17, 21])('random room %i: every facing and flip right, none ambiguous', (seed) => {
    const anchors = computeSlots(randomRoom(seed).document, { roomId: 1, onchainSlots: 20, modelSha256: SHA }).slots;
    const model = randomRoom(seed);
    const partitioned = model.document
      .getRoot()
      .listNodes()
      .some((n) => n.getName() === 'Partition');
    const random = mulberry32(seed * 31);
    const slots = new RoomBuilder('Slots');
    const truths = anchors.map((anchor, i) => {
      const f = anchor.facing;
      const wallOffset = (partitioned ? 0.002 : -0.004) + random() * 0.014; // from the wall surface
      const center = [0, 1, 2].map((k) => anchor.position[k]! + f[k]! * (wallOffset - 0.005)) as [number, number, number];
      const intoWall = random() < 0.5;
      const id = `Slot_${String(i + 1).padStart(3, '0')}`;
      const normal: [number, number, number] = intoWall ? [-f[0], -f[1], -f[2]] : [...f];
      slots.slot(
        id,
        { center, normal, up: rotate(anchor.quaternion, [0, 1, 0]), width: anchor.width * 0.9, height: anchor.height * 0.7 },
        random() < 0.5 ? 'node' : 'vertices',
      );
      return { id, facing: f, flipped: intoWall };
    });
    mergeDocuments(model.document, slots.document);
    const [main, ...merged] = model.document.getRoot().listScenes();
    for (const scene of merged) {
      for (const node of scene.listChildren()) main!.addChild(node);
      scene.dispose();
    }
    const result = computeSlots(model.document, { roomId: 1, onchainSlots: truths.length, modelSha256: SHA });
    for (const truth of truths) {
      const slot = result.slots.find((s) => s.id === truth.id)!;
      expect(angleBetween(slot.facing, truth.facing), `${model.name} ${truth.id}: ${slot.evidence}`).toBeLessThan(0.5);
      expect(slot.flipped, `${model.name} ${truth.id}`).toBe(truth.flipped);
      expect(slot.ambiguous, `${model.name} ${truth.id}`).toBe(false);
    }
  });
});

describe('slot engine: ids and numbering', () => {
  it('normalises ids, renumbers duplicates and material-only quads after the highest, and warns', () => {
    const result = computeSlots(numberingFaults().document, { roomId: 1, onchainSlots: 6, modelSha256: SHA });
    expect(result.slots.map((s) => [s.id, s.index])).toEqual([
      ['Slot_001', 1],
      ['Slot_002', 2],
      ['Slot_005', 5],
      ['Slot_007', 7],
      ['Slot_008', 8],
      ['Slot_009', 9],
    ]);
    expect(result.warnings).toEqual([
      'Slot_NNN numbering has gaps: 3-4, 6 missing',
      'duplicate id Slot_002 (node "Slot_002"); numbered Slot_008',
      'node "Picture" uses the Slot Placeholder material but is not named Slot_NNN; numbered Slot_009',
    ]);
    // The duplicate that keeps Slot_002 is the first by position; the other becomes Slot_008.
    expect(result.slots.find((s) => s.id === 'Slot_002')!.position[0]).toBeCloseTo(-1.5, 3);
    expect(result.slots.find((s) => s.id === 'Slot_008')!.position[0]).toBeCloseTo(0, 3);
    expect(result.slots.every((s) => !s.flipped && !s.ambiguous)).toBe(true);
  });

  it('reports fewer placeholders than the onchain count as a shortfall, more as a warning', () => {
    const few = computeSlots(pillar().document, { roomId: 1, onchainSlots: 8, modelSha256: SHA });
    expect(few.slots).toHaveLength(6);
    expect(few.shortfall).toEqual({ expected: 8, placed: 6, reason: 'the model has 6 slot placeholders for 8 onchain slots' });
    const many = computeSlots(pillar().document, { roomId: 1, onchainSlots: 3, modelSha256: SHA });
    expect(many.shortfall).toBeNull();
    expect(many.warnings).toEqual(['the model has 6 slot placeholders but the onchain count is 3']);
  });

  it('extracts embedded Auto_NNN placeholders as generated anchors, keeping their ids', () => {
    const room = pillar();
    const doc = room.document;
    for (const node of doc.getRoot().listNodes()) if (node.getName().startsWith('Slot_')) node.dispose();
    const generated = computeSlots(doc, { roomId: 3, onchainSlots: 5, modelSha256: SHA });
    expect(generated.slots.map((s) => s.id)).toEqual(['Auto_001', 'Auto_002', 'Auto_003', 'Auto_004', 'Auto_005']);
    embedAnchors(doc, generated.slots);
    const names = doc
      .getRoot()
      .listNodes()
      .map((n) => n.getName())
      .filter((n) => n.startsWith('Auto_'));
    expect(names.sort()).toEqual(['Auto_001', 'Auto_002', 'Auto_003', 'Auto_004', 'Auto_005']);
    // Embedding again replaces, never duplicates.
    embedAnchors(doc, generated.slots);
    expect(
      doc
        .getRoot()
        .listNodes()
        .filter((n) => n.getName().startsWith('Auto_')),
    ).toHaveLength(5);
    const again = computeSlots(doc, { roomId: 3, onchainSlots: 5, modelSha256: SHA });
    expect(again.warnings).toEqual([]);
    for (const slot of generated.slots) {
      const found = again.slots.find((s) => s.id === slot.id)!;
      expect(found.source).toBe('generated');
      expect(distance(found.position, slot.position)).toBeLessThan(1e-4);
      expect(angleBetween(found.facing, slot.facing)).toBeLessThan(0.01);
      expect(found.width).toBeCloseTo(slot.width, 4);
      expect(found.flipped).toBe(false);
    }
  });

  it('names its algorithm revision', () => {
    expect(SLOT_ALGORITHM).toMatch(/^slot-engine-\d+$/);
  });
});
