/**
 * Generated anchors (Auto_NNN), as properties over many rooms, sculptures and counts: exactly N
 * or a reported shortfall, no overlaps, upright on walls, resting on a surface, facing open space
 * (the room, never out through a wall), same output on every run. Checked with the independent
 * brute-force geometry of ./rooms/geometry.ts.
 */
import { describe, expect, it } from 'vitest';
import { RoomSlot } from '../../artifacts/format.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { computeSlots } from '../../bake/slots/index.ts';
import { SLOT_ENGINE_DEFAULTS } from '../../bake/slots/options.ts';
import { anchorProblems, bruteWorld } from './rooms/geometry.ts';
import { randomRoom, randomSculpture, type RandomModel } from './rooms/random.ts';

const SHA = '5'.repeat(64);

function expectValidGeneration(model: RandomModel, count: number, roomId = 11) {
  const result = computeSlots(model.document, { roomId, onchainSlots: count, modelSha256: SHA });
  const where = `${model.name}, N=${count}`;
  expect(result.kind, where).toBe(model.kind);
  const { slots, shortfall } = result;
  if (shortfall) {
    expect(shortfall.expected, where).toBe(count);
    expect(shortfall.placed, where).toBe(slots.length);
    expect(slots.length, where).toBeLessThan(count);
    expect(shortfall.reason, where).toMatch(/fit/);
  } else {
    expect(slots, where).toHaveLength(count);
  }
  expect(slots.map((s) => s.id)).toEqual(slots.map((_, i) => `Auto_${String(i + 1).padStart(3, '0')}`));
  const cfg = SLOT_ENGINE_DEFAULTS[model.kind];
  for (const s of slots) {
    expect(RoomSlot.safeParse(s).success, `${where} ${s.id}`).toBe(true);
    expect(s.source).toBe('generated');
    expect(s.flipped || s.ambiguous).toBe(false);
    expect(s.width).toBe(s.height);
    expect(s.width, `${where} ${s.id} size`).toBeGreaterThanOrEqual(cfg.minSize);
    expect(s.width, `${where} ${s.id} size`).toBeLessThanOrEqual(cfg.maxSize);
    expect(s.clearance!.front, `${where} ${s.id} clearance`).toBeGreaterThanOrEqual(s.width);
  }
  expect(anchorProblems(bruteWorld(model.document), slots, model.kind, cfg.gap), where).toEqual([]);
  return result;
}

describe('slot engine: generated anchors', () => {
  const rooms = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
  it.each(rooms)('random room %i: properties hold for N = 1, 7, 18 and 45', (seed) => {
    const model = randomRoom(seed);
    for (const count of [1, 7, 18, 45]) expectValidGeneration(model, count);
  });

  it.each([1, 2, 3, 4, 5])('random sculpture %i: properties hold for N = 1, 5 and 12, facing outward', (seed) => {
    const model = randomSculpture(seed);
    for (const count of [1, 5, 12]) expectValidGeneration(model, count);
  });

  it('gives the same anchors for the same model, count and room id, and others for another room id', () => {
    const first = computeSlots(randomRoom(4).document, { roomId: 2, onchainSlots: 12, modelSha256: SHA });
    const second = computeSlots(randomRoom(4).document, { roomId: 2, onchainSlots: 12, modelSha256: SHA });
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
    const other = computeSlots(randomRoom(4).document, { roomId: 3, onchainSlots: 12, modelSha256: SHA });
    expect(other.slots.map((s) => s.position)).not.toEqual(first.slots.map((s) => s.position));
  });

  it('numbers anchors in the order they are picked: Auto_001 first, the ids never depend on the total', () => {
    const twenty = computeSlots(randomRoom(5).document, { roomId: 1, onchainSlots: 20, modelSha256: SHA });
    const five = computeSlots(randomRoom(5).document, { roomId: 1, onchainSlots: 5, modelSha256: SHA });
    expect(twenty.slots.slice(0, 5)).toEqual(five.slots);
  });

  it('places as many as fit in a small room and reports the shortfall with its reason', () => {
    const b = new RoomBuilder('Closet');
    const wall = b.material('Wall');
    b.floorAndCeiling('Closet', [0, 0], [2.5, 2], 2.4, b.material('Floor'), b.material('Ceiling'));
    b.innerWalls(2.5, 2, 2.4, wall);
    const model: RandomModel = { name: 'closet', document: b.document, kind: 'room' };
    const result = expectValidGeneration(model, 60);
    expect(result.shortfall).not.toBeNull();
    expect(result.shortfall!.placed).toBeGreaterThan(4);
    expect(result.shortfall!.reason).toContain('non-overlapping frames of at least 0.32 m');
  });

  it('reports a model without upright surfaces, and places nothing for N = 0', () => {
    const b = new RoomBuilder('Plaza');
    b.panel('Ground', { center: [0, 0, 0], normal: [0, 1, 0], up: [0, 0, -1], width: 20, height: 20 }, b.material('Stone'));
    const flat = computeSlots(b.document, { roomId: 1, onchainSlots: 3, modelSha256: SHA, kind: 'room' });
    expect(flat.slots).toEqual([]);
    expect(flat.shortfall).toEqual({ expected: 3, placed: 0, reason: 'no upright surfaces: every face is a floor, ceiling or underside' });
    const none = computeSlots(randomRoom(1).document, { roomId: 1, onchainSlots: 0, modelSha256: SHA });
    expect(none.slots).toEqual([]);
    expect(none.shortfall).toBeNull();
  });
});
