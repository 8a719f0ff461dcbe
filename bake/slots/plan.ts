/**
 * Plan view of a model for the QA report: the steep faces (walls, furniture sides) projected
 * onto the floor plane as line segments in world X/Z, snapped to a fine grid and deduplicated
 * so that a 200k-triangle room stays a small picture.
 */
import type { WorldScene } from './scene.ts';

export interface RoomPlan {
  /** World X/Z bounds of the model. */
  min: [number, number];
  max: [number, number];
  /** Flat list x1, z1, x2, z2, … (world metres). */
  segments: number[];
}

const GRID_STEPS = 1200;
const MAX_PLAN_SEGMENTS = 12000;

export function planFromScene(scene: WorldScene): RoomPlan {
  const { min, max } = scene.bounds;
  const plan: RoomPlan = { min: [min[0], min[2]], max: [max[0], max[2]], segments: [] };
  if (scene.triangleCount === 0) return plan;
  const step = Math.max(max[0] - min[0], max[2] - min[2], 1e-6) / GRID_STEPS;
  // Grid coordinates in [0, GRID_STEPS]: a segment packs into one exact integer key.
  const gx = (v: number) => Math.round((v - min[0]) / step);
  const gz = (v: number) => Math.round((v - min[2]) / step);
  const base = GRID_STEPS + 1;
  const seen = new Map<number, number>();
  const p = scene.positions;
  for (let t = 0; t < scene.triangleCount; t++) {
    const { normal, area } = scene.triangleNormal(t);
    if (area <= 0 || Math.abs(normal[1]) > 0.7) continue;
    const o = t * 9;
    const xs = [gx(p[o]!), gx(p[o + 3]!), gx(p[o + 6]!)];
    const zs = [gz(p[o + 2]!), gz(p[o + 5]!), gz(p[o + 8]!)];
    let best = -1;
    let bestLength = 0;
    for (const [i, j] of EDGES) {
      const l = Math.hypot(xs[i]! - xs[j]!, zs[i]! - zs[j]!);
      if (l <= bestLength) continue;
      bestLength = l;
      const [a, b] = xs[i]! < xs[j]! || (xs[i] === xs[j] && zs[i]! <= zs[j]!) ? [i, j] : [j, i];
      best = ((xs[a]! * base + zs[a]!) * base + xs[b]!) * base + zs[b]!;
    }
    if (best >= 0) seen.set(best, bestLength);
  }
  let keys = [...seen.keys()];
  if (keys.length > MAX_PLAN_SEGMENTS) keys = keys.sort((a, b) => seen.get(b)! - seen.get(a)! || a - b).slice(0, MAX_PLAN_SEGMENTS);
  keys.sort((a, b) => a - b);
  const r = (v: number) => Math.round(v * 1000) / 1000;
  for (let key of keys) {
    const parts: number[] = [];
    for (let k = 0; k < 4; k++) {
      parts.unshift(key % base);
      key = Math.floor(key / base);
    }
    plan.segments.push(
      r(min[0] + parts[0]! * step),
      r(min[2] + parts[1]! * step),
      r(min[0] + parts[2]! * step),
      r(min[2] + parts[3]! * step),
    );
  }
  return plan;
}

const EDGES = [
  [0, 1],
  [1, 2],
  [0, 2],
] as const;
