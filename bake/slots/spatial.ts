/**
 * Spatial helpers shared by probing and generation: a uniform hash grid over points (neighbour
 * queries without all-pairs loops) and the frame-overlap test (oriented boxes, separating axes).
 */
import { add, cross, dot, scale, type V3 } from '../../common/vec.ts';
import type { Frame } from './orient.ts';

/** Uniform grid of point ids: neighbour queries visit the cells around the query point only. */
export class SpatialHash {
  private readonly cells = new Map<string, number[]>();
  private readonly points: V3[] = [];

  constructor(readonly cell: number) {}

  private key(ix: number, iy: number, iz: number): string {
    return `${ix},${iy},${iz}`;
  }

  insert(id: number, p: V3): void {
    this.points[id] = p;
    const k = this.key(Math.floor(p[0] / this.cell), Math.floor(p[1] / this.cell), Math.floor(p[2] / this.cell));
    const bucket = this.cells.get(k);
    if (bucket) bucket.push(id);
    else this.cells.set(k, [id]);
  }

  /** Ids whose point is within `radius` of p (exact distance check), ascending. */
  near(p: V3, radius: number): number[] {
    const out: number[] = [];
    const r2 = radius * radius;
    const lo = p.map((c) => Math.floor((c - radius) / this.cell));
    const hi = p.map((c) => Math.floor((c + radius) / this.cell));
    const within = (id: number) => {
      const q = this.points[id]!;
      const dx = q[0] - p[0],
        dy = q[1] - p[1],
        dz = q[2] - p[2];
      return dx * dx + dy * dy + dz * dz <= r2;
    };
    // A query wider than the occupied cells: visiting the buckets is cheaper than the cells.
    if ((hi[0]! - lo[0]! + 1) * (hi[1]! - lo[1]! + 1) * (hi[2]! - lo[2]! + 1) > this.cells.size) {
      for (const bucket of this.cells.values()) for (const id of bucket) if (within(id)) out.push(id);
      return out.sort((a, b) => a - b);
    }
    for (let ix = lo[0]!; ix <= hi[0]!; ix++) {
      for (let iy = lo[1]!; iy <= hi[1]!; iy++) {
        for (let iz = lo[2]!; iz <= hi[2]!; iz++) {
          const bucket = this.cells.get(this.key(ix, iy, iz));
          if (!bucket) continue;
          for (const id of bucket) if (within(id)) out.push(id);
        }
      }
    }
    return out.sort((a, b) => a - b);
  }
}

/** An oriented box: centre, three unit axes, half extents along them. */
export interface OrientedBox {
  center: V3;
  axes: [V3, V3, V3];
  half: V3;
}

/** Depth a frame occupies in front of its wall (the box spans [0, FRAME_DEPTH] along facing). */
const FRAME_DEPTH = 0.04;

/**
 * The space a frame claims: its rectangle grown by half the gap on every in-plane side, extruded
 * FRAME_DEPTH in front of the anchor. Frames back to back on a thin wall therefore do not clash;
 * frames side by side on one wall must be `gap` apart.
 */
export function frameBox(position: V3, frame: Frame, width: number, height: number, gap: number): OrientedBox {
  return {
    center: add(position, scale(frame.z, FRAME_DEPTH / 2)),
    axes: [frame.x, frame.y, frame.z],
    half: [width / 2 + gap / 2, height / 2 + gap / 2, FRAME_DEPTH / 2],
  };
}

/** Separating-axis test for two oriented boxes (touching counts as separate). */
export function boxesOverlap(a: OrientedBox, b: OrientedBox): boolean {
  const t: V3 = [b.center[0] - a.center[0], b.center[1] - a.center[1], b.center[2] - a.center[2]];
  const axes: V3[] = [...a.axes, ...b.axes];
  for (const u of a.axes)
    for (const v of b.axes) {
      const c = cross(u, v);
      if (dot(c, c) > 1e-10) axes.push(c);
    }
  for (const axis of axes) {
    const len = Math.sqrt(dot(axis, axis));
    const n = scale(axis, 1 / len);
    const ra = a.half[0] * Math.abs(dot(a.axes[0], n)) + a.half[1] * Math.abs(dot(a.axes[1], n)) + a.half[2] * Math.abs(dot(a.axes[2], n));
    const rb = b.half[0] * Math.abs(dot(b.axes[0], n)) + b.half[1] * Math.abs(dot(b.axes[1], n)) + b.half[2] * Math.abs(dot(b.axes[2], n));
    if (Math.abs(dot(t, n)) >= ra + rb - 1e-9) return false;
  }
  return true;
}
