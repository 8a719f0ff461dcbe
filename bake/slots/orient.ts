/**
 * The levelled slot frame (its vectors: common/vec.ts).
 *
 * Levelling rule (the contract of RoomSlot.quaternion): local +Z = facing; local +Y = world up
 * projected onto the slot plane; local +X = Y × Z (right-handed). When the slot is horizontal
 * (facing within ~1.1° of world ±Y) world up has no projection, and +Y is world −Z projected
 * instead — "the top of a floor or ceiling picture points to −Z (north on the plan)". The
 * threshold is wide enough that quantization (Draco) cannot move a slot across it.
 */
import { cross, dot, madd, normalize, quatFromBasis, rotateByQuaternion, type Quat, type V3 } from '../../common/vec.ts';

/** |facing · world up| above this counts as a horizontal slot (≈ 1.15° from ±Y). */
const HORIZONTAL_COS = 0.9998;

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

export function quaternionOfFrame(frame: Frame): Quat {
  return quatFromBasis(frame.x, frame.y, frame.z);
}

/** The frame (right, up, facing) a published quaternion describes. */
export function frameOfQuaternion(q: readonly number[]): Frame {
  return { x: rotateByQuaternion(q, [1, 0, 0]), y: rotateByQuaternion(q, [0, 1, 0]), z: rotateByQuaternion(q, [0, 0, 1]) };
}

/** Round for stable JSON: positions to 0.1 mm, unit vectors to 1e-6. */
export const round = (v: number, digits: number): number => {
  const f = 10 ** digits;
  const r = Math.round(v * f) / f;
  return Object.is(r, -0) ? 0 : r;
};
export const roundV = (v: readonly number[], digits: number) => v.map((c) => round(c, digits));
