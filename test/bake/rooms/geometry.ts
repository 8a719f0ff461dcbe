/**
 * Independent geometry for checking the slot engine: world triangles read straight from the
 * glTF-Transform document and a brute-force ray caster (Möller–Trumbore). Deliberately shares no
 * code with bake/slots, so the engine's BVH, traversal and maths are checked, not reused.
 */
import type { Document } from '@gltf-transform/core';
import type { RoomSlot } from '../../../artifacts/format.ts';
import { levelledAxes } from './truth.ts';

type V3 = [number, number, number];

export interface BruteWorld {
  triangles: Float64Array;
  doubleSided: boolean[];
  count: number;
}

const isSlot = (name: string, material: string | undefined) =>
  /^(slot|auto)_\d+/i.test(name.trim()) || /^slot[ _]placeholder/i.test(material ?? '');

/** Triangles (mode TRIANGLES) of the default scene in world space, slot placeholders excluded. */
export function bruteWorld(document: Document): BruteWorld {
  const out: number[] = [];
  const doubleSided: boolean[] = [];
  const scene = document.getRoot().getDefaultScene() ?? document.getRoot().listScenes()[0]!;
  scene.traverse((node) => {
    const mesh = node.getMesh();
    if (!mesh) return;
    const m = node.getWorldMatrix();
    for (const prim of mesh.listPrimitives()) {
      if (prim.getMode() !== 4 || isSlot(node.getName(), prim.getMaterial()?.getName())) continue;
      const pos = prim.getAttribute('POSITION')!;
      const world = (i: number): V3 => {
        const [x, y, z] = pos.getElement(i, [0, 0, 0]) as V3;
        return [m[0] * x + m[4] * y + m[8] * z + m[12], m[1] * x + m[5] * y + m[9] * z + m[13], m[2] * x + m[6] * y + m[10] * z + m[14]];
      };
      const idx = prim.getIndices()?.getArray() ?? Array.from({ length: pos.getCount() }, (_, i) => i);
      for (let k = 0; k + 2 < idx.length; k += 3) {
        out.push(...world(idx[k]!), ...world(idx[k + 1]!), ...world(idx[k + 2]!));
        doubleSided.push(prim.getMaterial()?.getDoubleSided() ?? false);
      }
    }
  });
  return { triangles: Float64Array.from(out), doubleSided, count: doubleSided.length };
}

export interface BruteHit {
  distance: number;
  normal: V3;
  /** Seen from the ray's side (front face or double-sided). */
  visible: boolean;
}

export function castRay(world: BruteWorld, origin: V3, dir: V3, far = Infinity): BruteHit | null {
  let best: BruteHit | null = null;
  const t = world.triangles;
  for (let i = 0; i < world.count; i++) {
    const o = i * 9;
    const e1: V3 = [t[o + 3]! - t[o]!, t[o + 4]! - t[o + 1]!, t[o + 5]! - t[o + 2]!];
    const e2: V3 = [t[o + 6]! - t[o]!, t[o + 7]! - t[o + 1]!, t[o + 8]! - t[o + 2]!];
    const p = cross(dir, e2);
    const det = dot(e1, p);
    if (Math.abs(det) < 1e-12) continue;
    const inv = 1 / det;
    const s: V3 = [origin[0] - t[o]!, origin[1] - t[o + 1]!, origin[2] - t[o + 2]!];
    const u = dot(s, p) * inv;
    if (u < 0 || u > 1) continue;
    const q = cross(s, e1);
    const v = dot(dir, q) * inv;
    if (v < 0 || u + v > 1) continue;
    const d = dot(e2, q) * inv;
    if (d <= 1e-9 || d > far || (best && d > best.distance + 1e-6)) continue;
    const n = normalize(cross(e1, e2));
    const visible = world.doubleSided[i]! || dot(n, dir) < 0;
    // Coincident faces (a zero-thickness partition): the one seen from the ray's side counts.
    if (best && d > best.distance - 1e-6 && (best.visible || !visible)) continue;
    best = { distance: d, normal: n, visible };
  }
  return best;
}

const dot = (a: readonly number[], b: readonly number[]) => a[0]! * b[0]! + a[1]! * b[1]! + a[2]! * b[2]!;
const cross = (a: readonly number[], b: readonly number[]): V3 => [
  a[1]! * b[2]! - a[2]! * b[1]!,
  a[2]! * b[0]! - a[0]! * b[2]!,
  a[0]! * b[1]! - a[1]! * b[0]!,
];
const normalize = (a: readonly number[]): V3 => {
  const l = Math.hypot(a[0]!, a[1]!, a[2]!);
  return [a[0]! / l, a[1]! / l, a[2]! / l];
};
const madd = (a: readonly number[], b: readonly number[], s: number): V3 => [a[0]! + b[0]! * s, a[1]! + b[1]! * s, a[2]! + b[2]! * s];

/** Angle between two directions in degrees, accurate near zero. */
export function angleBetween(a: readonly number[], b: readonly number[]): number {
  return (Math.atan2(Math.hypot(...cross(a, b)), dot(a, b)) * 180) / Math.PI;
}

/** Rotate v by quaternion q = [x, y, z, w]. */
export function rotate(q: readonly number[], v: V3): V3 {
  const [x, y, z, w] = q as [number, number, number, number];
  const m = [
    [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
    [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
    [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
  ];
  return [dot(m[0]!, v), dot(m[1]!, v), dot(m[2]!, v)];
}

/** The slot's frame from its quaternion, and the violations of the orientation contract. */
export function orientationProblems(slot: RoomSlot): string[] {
  const problems: string[] = [];
  const z = rotate(slot.quaternion, [0, 0, 1]);
  const y = rotate(slot.quaternion, [0, 1, 0]);
  if (Math.abs(Math.hypot(...slot.facing) - 1) > 1e-5) problems.push(`${slot.id}: facing is not a unit vector`);
  if (angleBetween(z, slot.facing) > 0.01) problems.push(`${slot.id}: facing differs from the quaternion's +Z`);
  const expected = levelledAxes(normalize(slot.facing)).up;
  if (angleBetween(y, expected) > 0.01) problems.push(`${slot.id}: +Y is not levelled`);
  return problems;
}

const corners = (s: RoomSlot): V3[] => {
  const x = rotate(s.quaternion, [1, 0, 0]);
  const y = rotate(s.quaternion, [0, 1, 0]);
  return [
    [-1, -1],
    [1, -1],
    [1, 1],
    [-1, 1],
  ].map(([a, b]) => madd(madd(s.position, x, (a! * s.width) / 2), y, (b! * s.height) / 2));
};

/** Does segment p→q cross the rectangle of slot s? */
function segmentCrossesRect(p: V3, q: V3, s: RoomSlot): boolean {
  const n = s.facing;
  const dp = dot(n, [p[0] - s.position[0], p[1] - s.position[1], p[2] - s.position[2]]);
  const dq = dot(n, [q[0] - s.position[0], q[1] - s.position[1], q[2] - s.position[2]]);
  if (dp * dq > 0 || dp === dq) return false;
  const t = dp / (dp - dq);
  const hit = madd(p, [q[0] - p[0], q[1] - p[1], q[2] - p[2]], t);
  const rel: V3 = [hit[0] - s.position[0], hit[1] - s.position[1], hit[2] - s.position[2]];
  return (
    Math.abs(dot(rel, rotate(s.quaternion, [1, 0, 0]))) < s.width / 2 && Math.abs(dot(rel, rotate(s.quaternion, [0, 1, 0]))) < s.height / 2
  );
}

/**
 * Frames that overlap: on one plane facing the same way, rectangles closer than `gap`;
 * otherwise rectangles that intersect in space. All pairs — fine for a test.
 */
function overlaps(slots: RoomSlot[], gap: number): string[] {
  const problems: string[] = [];
  for (let i = 0; i < slots.length; i++) {
    for (let j = i + 1; j < slots.length; j++) {
      const a = slots[i]!;
      const b = slots[j]!;
      const d: V3 = [b.position[0] - a.position[0], b.position[1] - a.position[1], b.position[2] - a.position[2]];
      if (dot(a.facing, b.facing) > 0.999 && Math.abs(dot(d, a.facing)) < 0.02) {
        const x = rotate(a.quaternion, [1, 0, 0]);
        const y = rotate(a.quaternion, [0, 1, 0]);
        const gx = Math.abs(dot(d, x)) - (a.width + b.width) / 2;
        const gy = Math.abs(dot(d, y)) - (a.height + b.height) / 2;
        if (gx < gap - 1e-3 && gy < gap - 1e-3)
          problems.push(`${a.id} and ${b.id} overlap on one wall (gaps ${gx.toFixed(3)}, ${gy.toFixed(3)})`);
        continue;
      }
      const ca = corners(a);
      const cb = corners(b);
      const crosses =
        ca.some((p, k) => segmentCrossesRect(p, ca[(k + 1) % 4]!, b)) || cb.some((p, k) => segmentCrossesRect(p, cb[(k + 1) % 4]!, a));
      if (crosses) problems.push(`${a.id} and ${b.id} intersect`);
    }
  }
  return problems;
}

/**
 * Violations of the generated-anchor properties: on a flat surface (centre and corners), facing
 * open space at least the frame size deep, looking at the room (rooms) or not into the solid
 * (sculptures), upright in rooms, orientation contract, no overlaps.
 */
export function anchorProblems(world: BruteWorld, slots: RoomSlot[], kind: 'room' | 'sculpture', gap = 0.1): string[] {
  const problems: string[] = [];
  for (const s of slots) {
    problems.push(...orientationProblems(s));
    const f = s.facing;
    if (kind === 'room') {
      if (Math.abs(f[1]) > Math.sin((10 * Math.PI) / 180) + 1e-6) problems.push(`${s.id}: not upright (facing ${f})`);
    } else if (Math.abs(f[1]) > Math.sin((20 * Math.PI) / 180) + 1e-6)
      problems.push(`${s.id}: on a floor, ceiling or underside (facing ${f})`);
    const x = rotate(s.quaternion, [1, 0, 0]);
    const y = rotate(s.quaternion, [0, 1, 0]);
    const points: V3[] = [
      [0, 0],
      [-0.45, -0.45],
      [0.45, -0.45],
      [0.45, 0.45],
      [-0.45, 0.45],
    ].map(([a, b]) => madd(madd(s.position, x, a! * s.width), y, b! * s.height));
    for (const p of points) {
      const back = castRay(world, madd(p, f, 0.05), [-f[0], -f[1], -f[2]], 0.2);
      if (!back || Math.abs(back.distance - 0.055) > 0.015 || Math.abs(dot(back.normal, f)) < 0.94) {
        problems.push(
          `${s.id}: not resting on a surface at ${p.map((v) => v.toFixed(2))} (${back ? back.distance.toFixed(3) : 'nothing'} behind)`,
        );
        break;
      }
      const ahead = castRay(world, madd(p, f, 0.001), f);
      const size = Math.max(s.width, s.height);
      if (ahead && ahead.distance < size - 1e-3)
        problems.push(`${s.id}: only ${ahead.distance.toFixed(2)} m open in front, frame ${size} m`);
      if (kind === 'room' && p === points[0] && !ahead?.visible)
        problems.push(`${s.id}: faces out of the room (${ahead ? 'a back face' : 'nothing'} in front)`);
      if (kind === 'sculpture' && ahead && !ahead.visible) problems.push(`${s.id}: faces into the solid`);
    }
  }
  problems.push(...overlaps(slots, gap));
  return problems;
}
