/**
 * Walkable rooms on real rooms: the navmesh keeps the agent radius from the walls, every view is on
 * the navmesh, reachable from the spawn, with a clear line of sight (brute-force ray caster over
 * every triangle, not the bake's BVH); same model → same navmesh bytes and views; a sculpture
 * with no floor gets the reason.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filePath, RoomSlotData } from '../../artifacts/format.ts';
import { readManifest } from '../../artifacts/store.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { contentRoom, smallRoomGlb } from './fixtures.ts';
import { NAVMESH_AGENT, type Vec3 } from '../../artifacts/navmesh.ts';
import { readModelFile, writeGlb } from '../../bake/gltf-io.ts';
import { navMeshGlb } from '../../bake/navigation/glb.ts';
import { bakeWalkableFloor, type WalkableFloor } from '../../bake/navigation/navmesh.ts';
import { type SlotView, viewFor } from '../../bake/navigation/views.ts';
import { computeSlots } from '../../bake/slots/index.ts';
import { buildWorldScene, type WorldScene } from '../../bake/slots/scene.ts';

const ROOMS = ['/work/shared/assets/rooms/cube-room.glb', '/work/shared/assets/rooms/garage.glb'];
const HELMET = '/work/shared/assets/textured/DamagedHelmet.glb';

/** Möller–Trumbore over every triangle: does the open segment a→b cross any of them? */
function segmentBlocked(p: Float32Array, a: Vec3, b: Vec3, clearance: number): boolean {
  const d: Vec3 = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
  const len = Math.hypot(...d);
  const dir = d.map((c) => c / len);
  for (let o = 0; o < p.length; o += 9) {
    const e1 = [p[o + 3]! - p[o]!, p[o + 4]! - p[o + 1]!, p[o + 5]! - p[o + 2]!];
    const e2 = [p[o + 6]! - p[o]!, p[o + 7]! - p[o + 1]!, p[o + 8]! - p[o + 2]!];
    const h = [dir[1]! * e2[2]! - dir[2]! * e2[1]!, dir[2]! * e2[0]! - dir[0]! * e2[2]!, dir[0]! * e2[1]! - dir[1]! * e2[0]!];
    const det = e1[0]! * h[0]! + e1[1]! * h[1]! + e1[2]! * h[2]!;
    if (Math.abs(det) < 1e-12) continue;
    const s = [a[0] - p[o]!, a[1] - p[o + 1]!, a[2] - p[o + 2]!];
    const u = (s[0]! * h[0]! + s[1]! * h[1]! + s[2]! * h[2]!) / det;
    if (u < 0 || u > 1) continue;
    const q = [s[1]! * e1[2]! - s[2]! * e1[1]!, s[2]! * e1[0]! - s[0]! * e1[2]!, s[0]! * e1[1]! - s[1]! * e1[0]!];
    const v = (dir[0]! * q[0]! + dir[1]! * q[1]! + dir[2]! * q[2]!) / det;
    if (v < 0 || u + v > 1) continue;
    const t = (e2[0]! * q[0]! + e2[1]! * q[1]! + e2[2]! * q[2]!) / det;
    if (t > 1e-6 && t < len - clearance) return true;
  }
  return false;
}

/** Brute-force horizontal distance from a point to the nearest wall triangle spanning body height. */
function wallDistance(p: Float32Array, point: Vec3): number {
  let best = Infinity;
  for (let o = 0; o < p.length; o += 9) {
    const ys = [p[o + 1]!, p[o + 4]!, p[o + 7]!];
    const e1 = [p[o + 3]! - p[o]!, p[o + 4]! - p[o + 1]!, p[o + 5]! - p[o + 2]!];
    const e2 = [p[o + 6]! - p[o]!, p[o + 7]! - p[o + 1]!, p[o + 8]! - p[o + 2]!];
    const n = [e1[1]! * e2[2]! - e1[2]! * e2[1]!, e1[2]! * e2[0]! - e1[0]! * e2[2]!, e1[0]! * e2[1]! - e1[1]! * e2[0]!];
    const nl = Math.hypot(n[0]!, n[1]!, n[2]!);
    if (nl === 0 || Math.abs(n[1]! / nl) > 0.5) continue; // floors and ceilings are not walls
    if (Math.max(...ys) < point[1] + 0.5 || Math.min(...ys) > point[1] + 1.5) continue;
    // Sample the triangle densely (brute force): barycentric grid.
    for (let i = 0; i <= 20; i++) {
      for (let j = 0; i + j <= 20; j++) {
        const x = p[o]! + (e1[0]! * i + e2[0]! * j) / 20;
        const y = p[o + 1]! + (e1[1]! * i + e2[1]! * j) / 20;
        const z = p[o + 2]! + (e1[2]! * i + e2[2]! * j) / 20;
        if (y < point[1] + 0.5 || y > point[1] + 1.5) continue;
        best = Math.min(best, Math.hypot(x - point[0], z - point[2]));
      }
    }
  }
  return best;
}

async function bakeRoom(
  path: string,
): Promise<{ scene: WorldScene; floor: WalkableFloor; views: Array<SlotView | null>; slots: ReturnType<typeof computeSlots>['slots'] }> {
  const document = await readModelFile(path);
  const scene = buildWorldScene(document);
  const { slots } = computeSlots(document, { roomId: 1, onchainSlots: 6, modelSha256: '0'.repeat(64), plan: false });
  const floor = await bakeWalkableFloor(scene, null);
  if (!('spawn' in floor)) throw new Error(`no floor: ${floor.warnings.join('; ')}`);
  const views = slots.map((s) => viewFor(s as never, floor.navigation, scene));
  return { scene, floor, views, slots };
}

describe('walkable rooms on real rooms', () => {
  for (const path of ROOMS) {
    it(`${path.split('/').at(-1)}: views on the floor, reachable, in sight; radius kept; deterministic`, async () => {
      const first = await bakeRoom(path);
      const { scene, floor, views, slots } = first;
      try {
        expect(slots.length).toBeGreaterThan(0);
        expect(floor.navigation.isOnMesh(floor.spawn)).toBe(true);
        let withView = 0;
        views.forEach((view, i) => {
          if (!view) return;
          withView++;
          const slot = slots[i]!;
          expect(floor.navigation.isOnMesh(view.position)).toBe(true);
          const route = floor.navigation.path(floor.spawn, view.position);
          expect(route.length).toBeGreaterThan(0);
          const end = route.at(-1)!;
          expect(Math.hypot(end[0] - view.position[0], end[2] - view.position[2])).toBeLessThan(0.15);
          const eye: Vec3 = [view.position[0], view.position[1] + 1.6, view.position[2]];
          expect(segmentBlocked(scene.positions, eye, slot.position as Vec3, 0.05)).toBe(false);
          expect(view.distance).toBeGreaterThanOrEqual(0.8);
        });
        expect(withView).toBe(slots.length);
        const p = floor.positions;
        for (let v = 0; v < p.length / 3; v += Math.max(1, Math.floor(p.length / 3 / 40))) {
          const at: Vec3 = [p[v * 3]!, p[v * 3 + 1]!, p[v * 3 + 2]!];
          expect(wallDistance(scene.positions, at)).toBeGreaterThanOrEqual(NAVMESH_AGENT.radius - NAVMESH_AGENT.cellSize);
        }
        const again = await bakeRoom(path);
        try {
          expect(Buffer.from(await navMeshGlb(again.floor.positions, again.floor.indices))).toEqual(
            Buffer.from(await navMeshGlb(floor.positions, floor.indices)),
          );
          expect(again.views).toEqual(views);
          expect(again.floor.spawn).toEqual(floor.spawn);
        } finally {
          again.floor.navigation.destroy();
        }
      } finally {
        floor.navigation.destroy();
      }
    }, 120_000);
  }

  it('a sculpture with no floor: no navmesh, the reason in the warnings', async () => {
    const scene = buildWorldScene(await readModelFile(HELMET));
    const result = await bakeWalkableFloor(scene, null);
    expect('spawn' in result).toBe(false);
    expect(result.warnings.join('\n')).toMatch(/nothing in the model is walkable/);
  }, 60_000);
});

describe('a room whose navmesh cannot be built', () => {
  it('publishes everything else with no navmesh, the reason in its warnings, views null; the batch goes on', async () => {
    // A gallery on a 1 km field: recast's grid would be 10,000² cells (it took 11.9 s and 1.6 GB).
    const b = new RoomBuilder('Field');
    const wall = b.material('Wall');
    b.floorAndCeiling('Field', [-500, -500], [500, 500], 3, b.material('Floor'), b.material('Ceiling'));
    b.wall('North', [3, -3], [-3, -3], 3, 0.2, wall);
    b.slot('Slot_001', { center: [0, 1.5, -2.89], normal: [0, 0, 1], up: [0, 1, 0], width: 1, height: 0.8 });
    const content = mkdtempSync(join(tmpdir(), 'museum-nav-fail-'));
    const data = mkdtempSync(join(tmpdir(), 'museum-nav-fail-data-'));
    await writeFile(join(content, 'good.glb'), await smallRoomGlb());
    await writeFile(join(content, 'field.glb'), await writeGlb(b.document));
    await writeFile(join(content, 'rooms.json'), JSON.stringify([contentRoom(1, 'good.glb'), contentRoom(2, 'field.glb')]));
    try {
      const summary = await bakeRooms({ contentDir: content, dataDir: data, concurrency: 2 });
      expect(summary.rooms.map((r) => [r.id, r.status])).toEqual([
        [1, 'baked'],
        [2, 'baked'],
      ]);
      const rooms = (await readManifest(data))!.rooms;
      const [good, field] = [rooms.find((r) => r.id === 1)!, rooms.find((r) => r.id === 2)!];
      expect(good.navmesh).toBeTruthy();
      expect(field.navmesh ?? null).toBeNull();
      expect(field.spawn ?? null).toBeNull();
      expect(field.model_optimized).toBeTruthy();
      const warnings = summary.rooms.find((r) => r.id === 2)!.warnings;
      expect(warnings).toContain(
        "navmesh: not built (the room's plan is 10,000 × 10,000 cells of 0.1 m, over the 4,000,000-cell limit of a navmesh)",
      );
      const slots = RoomSlotData.parse(JSON.parse(await readFile(filePath(data, field.slot_data!), 'utf8'))).slots;
      expect(slots.length).toBeGreaterThan(0);
      expect(slots.every((s) => s.view === null)).toBe(true);
    } finally {
      rmSync(content, { recursive: true, force: true });
      rmSync(data, { recursive: true, force: true });
    }
  }, 120_000);
});
