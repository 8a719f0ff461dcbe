/**
 * Vector helpers and the levelled slot frame.
 *
 * Levelling rule (the contract of RoomSlot.quaternion): local +Z = facing; local +Y = world up
 * projected onto the slot plane; local +X = Y × Z (right-handed). When the slot is horizontal
 * (facing within ~1.1° of world ±Y) world up has no projection, and +Y is world −Z projected
 * instead — "the top of a floor or ceiling picture points to −Z (north on the plan)". The
 * threshold is wide enough that quantization (Draco) cannot move a slot across it.
 */
import { quatFromBasis, type V3 } from '../sample/room-builder.ts';

export type { V3 };

export const add = (a: V3, b: V3): V3 => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
export const sub = (a: V3, b: V3): V3 => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
export const scale = (a: V3, s: number): V3 => [a[0] * s, a[1] * s, a[2] * s];
export const dot = (a: V3, b: V3): number => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
export const cross = (a: V3, b: V3): V3 => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
export const length = (a: V3): number => Math.hypot(a[0], a[1], a[2]);
export const madd = (a: V3, b: V3, s: number): V3 => [a[0] + b[0] * s, a[1] + b[1] * s, a[2] + b[2] * s];
export const normalize = (a: V3): V3 => {
  const l = length(a);
  return l > 0 ? [a[0] / l, a[1] / l, a[2] / l] : [0, 0, 0];
};

/** |facing · world up| above this counts as a horizontal slot (≈ 1.15° from ±Y). */
export const HORIZONTAL_COS = 0.9998;

export interface Frame {
  /** right */
  x: V3;
  /** up */
  y: V3;
  /** facing */
  z: V3;
}

/** The levelled frame of a facing direction (see the rule above). */
export function levelledFrame(facing: V3): Frame {
  const z = normalize(facing);
  const reference: V3 = Math.abs(z[1]) > HORIZONTAL_COS ? [0, 0, -1] : [0, 1, 0];
  const y = normalize(madd(reference, z, -dot(reference, z)));
  const x = normalize(cross(y, z));
  return { x, y, z };
}

export function quaternionOfFrame(frame: Frame): [number, number, number, number] {
  return quatFromBasis(frame.x, frame.y, frame.z);
}

/** Rotate v by the unit quaternion q = [x, y, z, w]. */
export function rotateByQuaternion(q: readonly number[], v: V3): V3 {
  const [qx, qy, qz, qw] = q as [number, number, number, number];
  // t = 2 q.xyz × v; v' = v + w t + q.xyz × t
  const tx = 2 * (qy * v[2] - qz * v[1]);
  const ty = 2 * (qz * v[0] - qx * v[2]);
  const tz = 2 * (qx * v[1] - qy * v[0]);
  return [v[0] + qw * tx + (qy * tz - qz * ty), v[1] + qw * ty + (qz * tx - qx * tz), v[2] + qw * tz + (qx * ty - qy * tx)];
}

/** Angle in degrees between two directions. */
export function angleDeg(a: V3, b: V3): number {
  const c = dot(normalize(a), normalize(b));
  return (Math.acos(Math.min(1, Math.max(-1, c))) * 180) / Math.PI;
}

/** Round for stable JSON: positions to 0.1 mm, unit vectors to 1e-6. */
export const round = (v: number, digits: number): number => {
  const f = 10 ** digits;
  const r = Math.round(v * f) / f;
  return Object.is(r, -0) ? 0 : r;
};
export const roundV = (v: readonly number[], digits: number) => v.map((c) => round(c, digits));
