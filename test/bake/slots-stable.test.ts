/**
 * Stable generated anchors (issue: curators hang artworks by slot id) and the whole frame clear in
 * front. N → N+4 → N keeps the first N exactly, with and without the previous bake's data; a model
 * edit that moves one wall keeps the anchors on the other walls (re-seats the ones on a wall moved
 * slightly, regenerates the ones it invalidated, same ids); the change report says exactly that.
 * Furniture in front of a wall is never within a frame's larger side in front of any part of it
 * (checked with the independent brute-force ray caster over a dense grid).
 */
import { describe, expect, it } from 'vitest';
import { readRoomSlotData, type RoomSlot, type RoomSlotData, SLOT_DATA_VERSION } from '../../artifacts/format.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { compareSlots, computeSlots, SLOT_ALGORITHM } from '../../bake/slots/index.ts';
import { bruteWorld, castRay, rotate } from './rooms/geometry.ts';
import { randomRoom } from './rooms/random.ts';

const SHA_A = 'a'.repeat(64);
const SHA_B = 'b'.repeat(64);

/** The optimized model's file id: what `model` names, while the carry-over follows `source_model`. */
const OPTIMIZED = 'c'.repeat(64);

const published = (slots: RoomSlot[], sourceModel: string): RoomSlotData => ({
  version: SLOT_DATA_VERSION,
  room: 7,
  model: OPTIMIZED,
  source_model: sourceModel,
  models: [sourceModel, OPTIMIZED],
  generated_at: '2026-01-01T00:00:00.000Z',
  algorithm: SLOT_ALGORITHM,
  slots,
});
const pose = (s: RoomSlot) => ({ id: s.id, position: s.position, quaternion: s.quaternion, width: s.width, height: s.height });

/** A hall with single-sided walls; the east wall stands at x = `east`. */
function hall(east: number) {
  const b = new RoomBuilder('Hall');
  const wall = b.material('Wall');
  const depth = 8;
  const height = 4;
  b.floorAndCeiling('Hall', [0, 0], [east, depth], height, b.material('Floor'), b.material('Ceiling'));
  b.innerWalls(east, depth, height, wall);
  return b.document;
}

/** A furnished room: cabinets just under frame height, benches and a tall cupboard against the walls. */
function furnished() {
  const b = new RoomBuilder('Salon');
  const wall = b.material('Wall');
  const wood = b.material('Wood');
  b.floorAndCeiling('Salon', [0, 0], [9, 7], 3.6, b.material('Floor'), b.material('Ceiling'));
  b.innerWalls(9, 7, 3.6, wall);
  b.box('Cabinet_N1', [0.5, 0, 0], [2.5, 0.95, 0.4], wood);
  b.box('Cabinet_N2', [5.5, 0, 0], [8.0, 1.05, 0.45], wood);
  b.box('Bench_S', [1.0, 0, 6.4], [4.0, 0.45, 7.0], wood);
  b.box('Cupboard_E', [8.4, 0, 2.0], [9.0, 2.2, 4.0], wood);
  b.box('Seat_W', [0.35, 0, 2.5], [0.75, 1.1, 3.1], wood);
  return b.document;
}

describe('slot engine: stable generated anchors', () => {
  it('keeps the first N picks whatever the total, without any history', () => {
    const model = randomRoom(3);
    for (const n of [5, 12]) {
      const few = computeSlots(model.document, { roomId: 7, onchainSlots: n, modelSha256: SHA_A });
      const more = computeSlots(model.document, { roomId: 7, onchainSlots: n + 4, modelSha256: SHA_A });
      expect(more.slots).toHaveLength(n + 4);
      expect(more.slots.slice(0, n)).toEqual(few.slots);
    }
  });

  it('N → N+4 → N through the published data keeps the first N, and the report says so', () => {
    const document = randomRoom(5).document;
    const n = 10;
    const first = computeSlots(document, { roomId: 7, onchainSlots: n, modelSha256: SHA_A });
    const raised = computeSlots(document, { roomId: 7, onchainSlots: n + 4, modelSha256: SHA_A, previous: published(first.slots, SHA_A) });
    expect(raised.slots.slice(0, n)).toEqual(first.slots);
    // The same as a bake without history: the history only ever re-states what the sequence gives.
    const fresh = computeSlots(document, { roomId: 7, onchainSlots: n + 4, modelSha256: SHA_A });
    expect(raised.slots.map(pose)).toEqual(fresh.slots.map(pose));
    expect(compareSlots(first.slots, raised.slots)).toEqual({
      kept: n,
      moved: 0,
      largest_move: 0,
      added: 4,
      removed: 0,
      had_previous: true,
    });

    const lowered = computeSlots(document, { roomId: 7, onchainSlots: n, modelSha256: SHA_A, previous: published(raised.slots, SHA_A) });
    expect(lowered.slots).toEqual(first.slots);
    expect(compareSlots(raised.slots, lowered.slots)).toEqual({
      kept: n,
      moved: 0,
      largest_move: 0,
      added: 0,
      removed: 4,
      had_previous: true,
    });
  });

  it('a model edit that moves one wall keeps the anchors on the other walls', () => {
    const n = 14;
    const before = computeSlots(hall(10), { roomId: 7, onchainSlots: n, modelSha256: SHA_A });
    expect(before.shortfall).toBeNull();
    const onEast = (s: RoomSlot) => s.facing[0] < -0.99;
    const east = before.slots.filter(onEast);
    const others = before.slots.filter((s) => !onEast(s));
    expect(east.length).toBeGreaterThan(0);
    expect(others.length).toBeGreaterThan(0);

    // Moved 3 cm outwards: the east anchors are re-seated onto it, same ids and orientations.
    const nudged = computeSlots(hall(10.03), { roomId: 7, onchainSlots: n, modelSha256: SHA_B, previous: published(before.slots, SHA_A) });
    for (const s of others) expect(pose(nudged.slots.find((o) => o.id === s.id)!)).toEqual(pose(s));
    for (const s of east) {
      const now = nudged.slots.find((o) => o.id === s.id)!;
      expect(now.quaternion).toEqual(s.quaternion);
      expect(now.position[0] - s.position[0]).toBeCloseTo(0.03, 4);
      expect([now.position[1], now.position[2]]).toEqual([s.position[1], s.position[2]]);
    }
    expect(compareSlots(before.slots, nudged.slots)).toEqual({
      kept: others.length,
      moved: east.length,
      largest_move: 0.03,
      added: 0,
      removed: 0,
      had_previous: true,
    });

    // Moved 1.5 m outwards: beyond re-seating. Those ids get new anchors (on any wall); the rest stay.
    const moved = computeSlots(hall(11.5), { roomId: 7, onchainSlots: n, modelSha256: SHA_B, previous: published(before.slots, SHA_A) });
    expect(moved.slots.map((s) => s.id)).toEqual(before.slots.map((s) => s.id));
    for (const s of others) expect(pose(moved.slots.find((o) => o.id === s.id)!)).toEqual(pose(s));
    const changes = compareSlots(before.slots, moved.slots);
    expect(changes).toMatchObject({ kept: others.length, moved: east.length, added: 0, removed: 0 });
    expect(changes.largest_move).toBeGreaterThan(0.1);
  });

  it('same inputs, same anchors: with a previous bake, on an updated model', () => {
    const previous = published(computeSlots(hall(10), { roomId: 7, onchainSlots: 9, modelSha256: SHA_A }).slots, SHA_A);
    const once = computeSlots(hall(9.2), { roomId: 7, onchainSlots: 12, modelSha256: SHA_B, previous });
    const twice = computeSlots(hall(9.2), { roomId: 7, onchainSlots: 12, modelSha256: SHA_B, previous });
    expect(JSON.stringify(twice.slots)).toBe(JSON.stringify(once.slots));
  });
});

describe('slot engine: anchors of another algorithm revision', () => {
  it("are re-validated against today's rules on the same model: valid ones keep their ids and poses, the rest are replaced", () => {
    const document = furnished();
    const fresh = computeSlots(document, { roomId: 3, onchainSlots: 6, modelSha256: SHA_A });
    // Slot 2 as an older engine might have left it: over the cabinet on the north wall.
    const blocked: RoomSlot = {
      ...fresh.slots[1]!,
      position: [1.5, 1.3, 0.005],
      quaternion: [0, 0, 0, 1],
      facing: [0, 0, 1],
      width: 0.85,
      height: 0.85,
    };
    const old = { ...published([fresh.slots[0]!, blocked, ...fresh.slots.slice(2)], SHA_A), algorithm: 'slot-engine-1' };
    const again = computeSlots(document, { roomId: 3, onchainSlots: 6, modelSha256: SHA_A, previous: old });
    expect(again.slots.map((s) => s.id)).toEqual(fresh.slots.map((s) => s.id));
    expect(pose(again.slots[1]!)).not.toEqual(pose(blocked));
    for (const i of [0, 2, 3, 4, 5]) expect(pose(again.slots[i]!)).toEqual(pose(fresh.slots[i]!));
    // This revision's own data on the same source model is trusted as published (whatever file `model` names).
    const trusted = computeSlots(document, {
      roomId: 3,
      onchainSlots: 6,
      modelSha256: SHA_A,
      previous: { ...old, algorithm: SLOT_ALGORITHM },
    });
    expect(trusted.slots[1]).toEqual(blocked);
  });
});

describe('slot engine: slot data written before source_model existed', () => {
  it('is read as computed from its `model` (then the source file): its anchors stand as published on that model', () => {
    const document = furnished();
    const fresh = computeSlots(document, { roomId: 3, onchainSlots: 6, modelSha256: SHA_A });
    const moved: RoomSlot = { ...fresh.slots[1]!, position: [1.5, 1.3, 0.005] };
    const { source_model: _, models: __, ...current } = { ...published([fresh.slots[0]!, moved, ...fresh.slots.slice(2)], SHA_A) };
    const legacy = { ...current, model: SHA_A };
    const previous = readRoomSlotData(legacy, null);
    expect(previous).toMatchObject({ model: SHA_A, source_model: SHA_A, models: [SHA_A] });
    // Trusted as published on the same source model (no re-check moved slot 2)…
    expect(computeSlots(document, { roomId: 3, onchainSlots: 6, modelSha256: SHA_A, previous }).slots[1]).toEqual(moved);
    // …and re-validated on another one.
    expect(computeSlots(document, { roomId: 3, onchainSlots: 6, modelSha256: SHA_B, previous }).slots[1]).not.toEqual(moved);
  });
});

describe('slot engine: the whole frame has open space in front', () => {
  it.each([8, 24, 60])('furnished room, N = %i: nothing within the larger side in front of any part of a frame', (n) => {
    const document = furnished();
    const { slots } = computeSlots(document, { roomId: 3, onchainSlots: n, modelSha256: SHA_A });
    expect(slots.length).toBeGreaterThan(Math.min(n, 8) - 1);
    const world = bruteWorld(document);
    const steps = 8;
    for (const s of slots) {
      const size = Math.max(s.width, s.height);
      const right = rotate(s.quaternion, [1, 0, 0]);
      const up = rotate(s.quaternion, [0, 1, 0]);
      let nearest = Infinity;
      for (let i = 0; i <= steps; i++) {
        for (let j = 0; j <= steps; j++) {
          const u = (i / steps - 0.5) * 0.99 * s.width;
          const v = (j / steps - 0.5) * 0.99 * s.height;
          const origin = [0, 1, 2].map((k) => s.position[k]! + right[k]! * u + up[k]! * v) as [number, number, number];
          const hit = castRay(world, origin, s.facing as [number, number, number], size + 0.01);
          if (hit) nearest = Math.min(nearest, hit.distance);
        }
      }
      expect(nearest, `${s.id} (${size} m frame) has something ${nearest.toFixed(2)} m in front`).toBeGreaterThanOrEqual(size);
      expect(s.clearance!.front, `${s.id} reported clearance`).toBeGreaterThanOrEqual(size);
    }
  });
});
