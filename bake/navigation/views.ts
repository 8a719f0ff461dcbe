/**
 * Where a visitor stands to see each slot (decisions.md "Walkable rooms", RoomSlot.view): aim
 * clamp(1.5 × max(w, h), 1.2, 6) m in front of the frame along `facing`; when that point is off
 * the navmesh or blocked, the nearest navmesh point (to the aim) that qualifies: eye (1.6 m above
 * it) to frame centre crosses no room geometry, horizontal distance ≥ 0.8 m. Null only when no
 * point within 8 m qualifies. Candidates come from a fixed grid, so the answer is deterministic.
 */
import type { Navigation, Vec3 } from '../../artifacts/navmesh.ts';
import type { WorldScene } from '../slots/scene.ts';

export interface ViewOptions {
  eyeHeight: number;
  minDistance: number;
  searchRadius: number;
  /** Spacing (m) of the candidate grid searched when the aimed point does not qualify. */
  gridStep: number;
  /** Candidates farther than this (m, horizontally) from their grid point are off the navmesh. */
  onMeshTolerance: number;
  /** Ray end kept this far (m) short of the frame centre, so the wall it hangs on never blocks. */
  frameClearance: number;
}

/** The defaults of ViewOptions, exported beside them as glTF-Transform's functions do. @public */
export const VIEW_DEFAULTS: ViewOptions = {
  eyeHeight: 1.6,
  minDistance: 0.8,
  searchRadius: 8,
  gridStep: 0.25,
  onMeshTolerance: 0.05,
  frameClearance: 0.05,
};

export interface SlotPose {
  id: string;
  position: Vec3;
  facing: Vec3;
  width: number;
  height: number;
}

export interface SlotView {
  position: Vec3;
  distance: number;
}

const round3 = (v: number) => Math.round(v * 1000) / 1000;
const horizontal = (a: Vec3, b: Vec3) => Math.hypot(a[0] - b[0], a[2] - b[2]);

/** Whether a visitor standing at `feet` sees the frame centre and is far enough from it. */
function qualifies(feet: Vec3, centre: Vec3, scene: WorldScene, options: ViewOptions = VIEW_DEFAULTS): boolean {
  if (horizontal(feet, centre) < options.minDistance) return false;
  const eye: Vec3 = [feet[0], feet[1] + options.eyeHeight, feet[2]];
  const d: Vec3 = [centre[0] - eye[0], centre[1] - eye[1], centre[2] - eye[2]];
  const length = Math.hypot(d[0], d[1], d[2]);
  const dir: Vec3 = [d[0] / length, d[1] / length, d[2] / length];
  return scene.castFirst(eye, dir, Math.max(0, length - options.frameClearance)) === null;
}

/** The navmesh point under (x, z) near height y, when the navmesh lies there. */
function onMeshAt(nav: Navigation, x: number, y: number, z: number, tolerance: number): Vec3 | null {
  const p = nav.closestPoint([x, y, z]);
  return p && Math.hypot(p[0] - x, p[2] - z) <= tolerance ? p : null;
}

/** Grid candidates within the search radius of `aim`, nearest first (ties by x, then z). */
function gridCandidates(aim: Vec3, options: ViewOptions): Array<[number, number]> {
  const n = Math.ceil(options.searchRadius / options.gridStep);
  const cells: Array<[number, number, number]> = [];
  for (let i = -n; i <= n; i++) {
    for (let j = -n; j <= n; j++) {
      const d = Math.hypot(i, j) * options.gridStep;
      if (d <= options.searchRadius) cells.push([d, i, j]);
    }
  }
  cells.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  // Grid anchored at whole multiples of the step, so an unchanged model gives the same points.
  const x0 = Math.round(aim[0] / options.gridStep) * options.gridStep;
  const z0 = Math.round(aim[2] / options.gridStep) * options.gridStep;
  return cells.map(([, i, j]): [number, number] => [x0 + i * options.gridStep, z0 + j * options.gridStep]);
}

/** The slot's view, or null when no navmesh point within the search radius qualifies. */
export function viewFor(slot: SlotPose, nav: Navigation, scene: WorldScene, options: Partial<ViewOptions> = {}): SlotView | null {
  const opts = { ...VIEW_DEFAULTS, ...options };
  const aimDistance = Math.min(6, Math.max(1.2, 1.5 * Math.max(slot.width, slot.height)));
  const flat = Math.hypot(slot.facing[0], slot.facing[2]) || 1;
  const aim: Vec3 = [
    slot.position[0] + (slot.facing[0] / flat) * aimDistance,
    slot.position[1],
    slot.position[2] + (slot.facing[2] / flat) * aimDistance,
  ];
  const floorY = slot.position[1] - opts.eyeHeight;
  const accept = (p: Vec3 | null): SlotView | null => {
    if (!p || !qualifies(p, slot.position, scene, opts)) return null;
    const position: Vec3 = [round3(p[0]), round3(p[1]), round3(p[2])];
    // Points Detour clamped to an edge can round to just outside it: a published view is over the mesh.
    if (!nav.isOnMesh(position)) return null;
    return { position, distance: round3(horizontal(position, slot.position)) };
  };
  const direct = accept(onMeshAt(nav, aim[0], floorY, aim[2], opts.onMeshTolerance * 4));
  if (direct) return direct;
  for (const [x, z] of gridCandidates(aim, opts)) {
    const found = accept(onMeshAt(nav, x, floorY, z, opts.onMeshTolerance));
    if (found) return found;
  }
  return null;
}
