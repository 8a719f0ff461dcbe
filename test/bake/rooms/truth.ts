/**
 * Ground-truth rooms for the slot engine: each is built with RoomBuilder and returns, with the
 * document, where every slot really is and which way it must face (world frame).
 */
import type { Document } from '@gltf-transform/core';
import { RoomBuilder, type Rect, type TRS, type V3 } from '../../../bake/sample/room-builder.ts';

interface SlotTruth {
  id: string;
  position: V3;
  facing: V3;
  width: number;
  height: number;
  /** The authored normal points away from the true facing. */
  flipped: boolean;
  /** Only the tie-break can decide (and it decides this facing). */
  ambiguous?: boolean;
}

export interface TruthRoom {
  name: string;
  document: Document;
  kind: 'room' | 'sculpture';
  slots: SlotTruth[];
}

const neg = (v: V3): V3 => [-v[0], -v[1], -v[2]];

/** A slot whose true front is `rect.normal`; `authoredIntoWall` writes the quad facing the wall. */
function hang(
  b: RoomBuilder,
  truths: SlotTruth[],
  id: string,
  rect: Rect,
  opts: { placement?: 'node' | 'vertices'; authoredIntoWall?: boolean } = {},
): void {
  const authored: Rect = opts.authoredIntoWall ? { ...rect, normal: neg(rect.normal) } : rect;
  b.slot(id, authored, opts.placement ?? 'node');
  truths.push({ id, position: rect.center, facing: rect.normal, width: rect.width, height: rect.height, flipped: !!opts.authoredIntoWall });
}

/**
 * Gallery 10 × 8 × 3.5 m: single-sided walls north and east (normals inward, as many exports),
 * thick walls south and west. Slots coplanar with and 5–10 mm in front of walls, some with the
 * normal authored into the wall, both placement styles, a floor plaque (horizontal rule).
 */
export function gallery(root: TRS = {}): TruthRoom {
  const b = new RoomBuilder('Gallery', root);
  const wall = b.material('Wall');
  const truths: SlotTruth[] = [];
  b.floorAndCeiling('Gallery', [-5, -4], [5, 4], 3.5, b.material('Floor'), b.material('Ceiling'));
  b.panel('North', { center: [0, 1.75, -4], normal: [0, 0, 1], up: [0, 1, 0], width: 10, height: 3.5 }, wall);
  b.panel('East', { center: [5, 1.75, 0], normal: [-1, 0, 0], up: [0, 1, 0], width: 8, height: 3.5 }, wall);
  b.wall('South', [-5, 4], [5, 4], 3.5, 0.2, wall);
  b.wall('West', [-5, -4], [-5, 4], 3.5, 0.3, wall);
  hang(b, truths, 'Slot_001', { center: [-2, 1.6, -4], normal: [0, 0, 1], up: [0, 1, 0], width: 1.2, height: 0.9 });
  hang(
    b,
    truths,
    'Slot_002',
    { center: [2, 1.6, -4], normal: [0, 0, 1], up: [0, 1, 0], width: 1.0, height: 1.4 },
    { placement: 'vertices', authoredIntoWall: true },
  );
  hang(b, truths, 'Slot_003', { center: [-2, 1.5, 3.89], normal: [0, 0, -1], up: [0, 1, 0], width: 1.5, height: 1.0 });
  hang(
    b,
    truths,
    'Slot_004',
    { center: [2, 1.5, 3.89], normal: [0, 0, -1], up: [0, 1, 0], width: 0.8, height: 0.8 },
    { authoredIntoWall: true },
  );
  hang(
    b,
    truths,
    'Slot_005',
    { center: [5, 1.7, 1], normal: [-1, 0, 0], up: [0, 1, 0], width: 1.1, height: 0.7 },
    { placement: 'vertices', authoredIntoWall: true },
  );
  hang(
    b,
    truths,
    'Slot_006',
    { center: [-4.85, 1.6, -1.5], normal: [1, 0, 0], up: [0, 1, 0], width: 1.0, height: 0.75 },
    { authoredIntoWall: true },
  );
  hang(
    b,
    truths,
    'Slot_007',
    { center: [-4.845, 1.5, 1.5], normal: [1, 0, 0], up: [0, 1, 0], width: 0.6, height: 1.1 },
    { placement: 'vertices' },
  );
  hang(b, truths, 'Slot_008', { center: [0, 0.005, 0], normal: [0, 1, 0], up: [0, 0, -1], width: 0.8, height: 0.5 });
  return { name: 'gallery', document: b.document, kind: 'room', slots: truths };
}

/**
 * 12 × 6 m hall with a zero-thickness partition (two faces in one plane) across its middle:
 * slots back to back on both faces, one authored into the partition, one exactly in its plane.
 */
export function partition(): TruthRoom {
  const b = new RoomBuilder('Partition');
  const wall = b.material('Wall');
  const truths: SlotTruth[] = [];
  b.floorAndCeiling('Hall', [-6, -3], [6, 3], 3.2, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [6, -3], [-6, -3], 3.2, 0.2, wall);
  b.wall('South', [-6, 3], [6, 3], 3.2, 0.2, wall);
  b.wall('East', [6, 3], [6, -3], 3.2, 0.2, wall);
  b.wall('West', [-6, -3], [-6, 3], 3.2, 0.2, wall);
  b.wall('Partition', [-3.5, 0], [3.5, 0], 2.6, 0, b.material('Partition', { doubleSided: false }));
  hang(b, truths, 'Slot_001', { center: [-1.5, 1.5, 0.005], normal: [0, 0, 1], up: [0, 1, 0], width: 1.2, height: 0.9 });
  hang(
    b,
    truths,
    'Slot_002',
    { center: [-1.5, 1.5, -0.005], normal: [0, 0, -1], up: [0, 1, 0], width: 1.2, height: 0.9 },
    { placement: 'vertices' },
  );
  hang(
    b,
    truths,
    'Slot_003',
    { center: [1.5, 1.5, 0.005], normal: [0, 0, 1], up: [0, 1, 0], width: 1.0, height: 1.0 },
    { authoredIntoWall: true },
  );
  hang(
    b,
    truths,
    'Slot_004',
    { center: [1.5, 1.5, -0.005], normal: [0, 0, -1], up: [0, 1, 0], width: 1.0, height: 1.0 },
    { placement: 'vertices', authoredIntoWall: true },
  );
  hang(b, truths, 'Slot_005', { center: [0, 1.6, 0], normal: [0, 0, 1], up: [0, 1, 0], width: 0.6, height: 0.6 });
  return { name: 'partition', document: b.document, kind: 'room', slots: truths };
}

/** 10 × 10 m room with a 1 × 1 m pillar in the middle; slots on every pillar face, two sunk into a wall. */
export function pillar(): TruthRoom {
  const b = new RoomBuilder('Pillar');
  const wall = b.material('Wall');
  const truths: SlotTruth[] = [];
  b.floorAndCeiling('Room', [-5, -5], [5, 5], 3, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [5, -5], [-5, -5], 3, 0.2, wall);
  b.wall('South', [-5, 5], [5, 5], 3, 0.2, wall);
  b.wall('East', [5, 5], [5, -5], 3, 0.2, wall);
  b.wall('West', [-5, -5], [-5, 5], 3, 0.2, wall);
  b.box('Pillar', [-0.5, 0, -0.5], [0.5, 3, 0.5], b.material('Stone'));
  hang(b, truths, 'Slot_001', { center: [0, 1.5, -0.505], normal: [0, 0, -1], up: [0, 1, 0], width: 0.8, height: 0.6 });
  hang(
    b,
    truths,
    'Slot_002',
    { center: [0.505, 1.5, 0], normal: [1, 0, 0], up: [0, 1, 0], width: 0.8, height: 0.6 },
    { authoredIntoWall: true },
  );
  hang(
    b,
    truths,
    'Slot_003',
    { center: [0, 1.5, 0.505], normal: [0, 0, 1], up: [0, 1, 0], width: 0.7, height: 0.9 },
    { placement: 'vertices' },
  );
  hang(
    b,
    truths,
    'Slot_004',
    { center: [-0.5, 1.5, 0], normal: [-1, 0, 0], up: [0, 1, 0], width: 0.8, height: 0.6 },
    { placement: 'vertices', authoredIntoWall: true },
  );
  // Sunk 3 mm into the north wall (authoring or export offsets go both ways).
  hang(b, truths, 'Slot_005', { center: [-2, 1.6, -4.903], normal: [0, 0, 1], up: [0, 1, 0], width: 1.0, height: 0.8 });
  hang(
    b,
    truths,
    'Slot_006',
    { center: [2, 1.6, -4.903], normal: [0, 0, 1], up: [0, 1, 0], width: 1.0, height: 0.8 },
    { authoredIntoWall: true },
  );
  return { name: 'pillar', document: b.document, kind: 'room', slots: truths };
}

/**
 * A 12 m corridor (thick walls) with a doorway in its south wall into a side room and an open
 * east end: a slot in the wall's plane whose frame overhangs the doorway (authored into the
 * wall), one opposite the doorway (its front looks through it), one over the doorway, one near
 * the open end.
 */
export function corridor(): TruthRoom {
  const b = new RoomBuilder('Corridor');
  const wall = b.material('Wall');
  const truths: SlotTruth[] = [];
  b.floorAndCeiling('Corridor', [0, -1], [12, 1], 3, b.material('Floor'), b.material('Ceiling'));
  b.floorAndCeiling('Side', [2.5, 1.1], [7.5, 5.5], 3, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [12, -1.1], [0, -1.1], 3, 0.2, wall);
  b.wall('South', [0, 1.1], [12, 1.1], 3, 0.2, wall, [{ offset: 4, width: 1, sill: 0, height: 2.2 }]);
  b.wall('WestEnd', [-0.1, -1.2], [-0.1, 1.2], 3, 0.2, wall);
  b.wall('SideEast', [7.5, 1.2], [7.5, 5.5], 3, 0.2, wall);
  b.wall('SideSouth', [7.5, 5.5], [2.5, 5.5], 3, 0.2, wall);
  b.wall('SideWest', [2.5, 5.5], [2.5, 1.2], 3, 0.2, wall);
  // In the wall's plane, overhanging the doorway by 5 cm: part of its back is the opening.
  hang(
    b,
    truths,
    'Slot_001',
    { center: [5.45, 1.5, 1.0], normal: [0, 0, -1], up: [0, 1, 0], width: 1.0, height: 0.8 },
    { authoredIntoWall: true },
  );
  hang(b, truths, 'Slot_002', { center: [4.5, 1.5, -0.995], normal: [0, 0, 1], up: [0, 1, 0], width: 1.2, height: 0.9 });
  hang(
    b,
    truths,
    'Slot_003',
    { center: [4.5, 2.6, 0.995], normal: [0, 0, -1], up: [0, 1, 0], width: 0.9, height: 0.5 },
    { placement: 'vertices', authoredIntoWall: true },
  );
  hang(
    b,
    truths,
    'Slot_004',
    { center: [11.2, 1.5, -0.99], normal: [0, 0, 1], up: [0, 1, 0], width: 1.0, height: 1.0 },
    { authoredIntoWall: true },
  );
  return { name: 'corridor', document: b.document, kind: 'room', slots: truths };
}

/** Regular n-gon prism (outward faces, with caps) as positions + CCW indices. */
export function prism(
  sides: number,
  radius: number,
  y0: number,
  y1: number,
  centre: [number, number] = [0, 0],
): { positions: number[]; indices: number[] } {
  const positions: number[] = [];
  const indices: number[] = [];
  const ring = (y: number) => {
    for (let i = 0; i < sides; i++) {
      const a = (i / sides) * Math.PI * 2;
      positions.push(centre[0] + Math.cos(a) * radius, y, centre[1] - Math.sin(a) * radius);
    }
  };
  ring(y0);
  ring(y1);
  for (let i = 0; i < sides; i++) {
    const j = (i + 1) % sides;
    // bottom i, j; top i+s, j+s — counter-clockwise seen from outside
    indices.push(i, j, j + sides, i, j + sides, i + sides);
  }
  const top = positions.length / 3;
  positions.push(centre[0], y1, centre[1]);
  const bottom = top + 1;
  positions.push(centre[0], y0, centre[1]);
  for (let i = 0; i < sides; i++) {
    const j = (i + 1) % sides;
    indices.push(top, i + sides, j + sides);
    indices.push(bottom, j, i);
  }
  return { positions, indices };
}

/** Face k of a regular prism as a rect (centre on the face, outward normal). */
function prismFace(
  sides: number,
  radius: number,
  k: number,
  y: number,
  width: number,
  height: number,
  offset = 0.005,
  centre: [number, number] = [0, 0],
): Rect {
  const mid = ((k + 0.5) / sides) * Math.PI * 2;
  const apothem = radius * Math.cos(Math.PI / sides);
  const normal: V3 = [Math.cos(mid), 0, -Math.sin(mid)];
  return {
    center: [centre[0] + normal[0] * (apothem + offset), y, centre[1] + normal[2] * (apothem + offset)],
    normal,
    up: [0, 1, 0],
    width,
    height,
  };
}

/** A sculpture: pedestal, octagonal column, an offset cube; slots on column faces and the cube. */
export function sculpture(): TruthRoom {
  const b = new RoomBuilder('Sculpture');
  const stone = b.material('Stone');
  const truths: SlotTruth[] = [];
  b.box('Pedestal', [-1.2, 0, -1.2], [1.2, 0.4, 1.2], stone);
  const column = prism(8, 0.9, 0.4, 3.4);
  b.mesh('Column', column.positions, column.indices, stone);
  b.box('Cube', [0.6, 2.0, 0.6], [1.6, 3.0, 1.6], stone);
  hang(b, truths, 'Slot_001', prismFace(8, 0.9, 1, 1.4, 0.5, 0.6));
  hang(b, truths, 'Slot_002', prismFace(8, 0.9, 3, 1.4, 0.5, 0.6), { authoredIntoWall: true });
  hang(b, truths, 'Slot_003', prismFace(8, 0.9, 5, 1.2, 0.45, 0.45, 0), { placement: 'vertices', authoredIntoWall: true });
  hang(b, truths, 'Slot_004', { center: [1.605, 2.5, 1.1], normal: [1, 0, 0], up: [0, 1, 0], width: 0.6, height: 0.6 });
  return { name: 'sculpture', document: b.document, kind: 'sculpture', slots: truths };
}

/**
 * 6 × 6 m room where two slots are sandwiched 1 cm between the north wall and a cabinet: both
 * sides closed, nothing to tell them apart, so the tie-break (into the room) decides and says so.
 */
export function sandwiched(): TruthRoom {
  const b = new RoomBuilder('Sandwiched');
  const wall = b.material('Wall');
  const truths: SlotTruth[] = [];
  b.floorAndCeiling('Room', [-3, -3], [3, 3], 3, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [3, -3.1], [-3, -3.1], 3, 0.2, wall);
  b.wall('South', [-3, 3.1], [3, 3.1], 3, 0.2, wall);
  b.wall('East', [3.1, 3], [3.1, -3], 3, 0.2, wall);
  b.wall('West', [-3.1, -3], [-3.1, 3], 3, 0.2, wall);
  b.box('Cabinet', [-2, 0, -2.98], [2, 2.2, -2.4], b.material('Wood'));
  hang(b, truths, 'Slot_001', { center: [-1, 1.2, -2.99], normal: [0, 0, 1], up: [0, 1, 0], width: 0.6, height: 0.5 });
  hang(
    b,
    truths,
    'Slot_002',
    { center: [1, 1.2, -2.99], normal: [0, 0, 1], up: [0, 1, 0], width: 0.6, height: 0.5 },
    { authoredIntoWall: true },
  );
  for (const t of truths) t.ambiguous = true;
  return { name: 'sandwiched', document: b.document, kind: 'room', slots: truths };
}

/** Quaternion about an axis (unit) by an angle in degrees. */
export function axisAngle(axis: V3, degrees: number): [number, number, number, number] {
  const h = (degrees * Math.PI) / 360;
  const s = Math.sin(h);
  return [axis[0] * s, axis[1] * s, axis[2] * s, Math.cos(h)];
}

/** Apply a root TRS to a point (scale, then rotate, then translate). */
function applyTRS(t: TRS, p: V3): V3 {
  const s = t.scale ?? [1, 1, 1];
  const v: V3 = [p[0] * s[0], p[1] * s[1], p[2] * s[2]];
  const [qx, qy, qz, qw] = t.rotation ?? [0, 0, 0, 1];
  const tx = 2 * (qy * v[2] - qz * v[1]);
  const ty = 2 * (qz * v[0] - qx * v[2]);
  const tz = 2 * (qx * v[1] - qy * v[0]);
  const r: V3 = [v[0] + qw * tx + (qy * tz - qz * ty), v[1] + qw * ty + (qz * tx - qx * tz), v[2] + qw * tz + (qx * ty - qy * tx)];
  const tr = t.translation ?? [0, 0, 0];
  return [r[0] + tr[0], r[1] + tr[1], r[2] + tr[2]];
}

/** Levelled in-plane axes of a facing (the spec's rule, written independently of the engine). */
export function levelledAxes(facing: V3): { right: V3; up: V3 } {
  const ref: V3 = Math.abs(facing[1]) > 0.9998 ? [0, 0, -1] : [0, 1, 0];
  const d = ref[0] * facing[0] + ref[1] * facing[1] + ref[2] * facing[2];
  const u: V3 = [ref[0] - d * facing[0], ref[1] - d * facing[1], ref[2] - d * facing[2]];
  const lu = Math.hypot(...u);
  const up: V3 = [u[0] / lu, u[1] / lu, u[2] / lu];
  const right: V3 = [up[1] * facing[2] - up[2] * facing[1], up[2] * facing[0] - up[0] * facing[2], up[0] * facing[1] - up[1] * facing[0]];
  return { right, up };
}

/**
 * The gallery under a rotated (about Y), non-uniformly scaled and translated root: every truth
 * transformed to the world frame — corners through the root, the facing with the
 * inverse-transpose, the size as the extents along the world slot's levelled axes.
 */
export function rotatedScaledGallery(): TruthRoom {
  const root: TRS = { translation: [3, 0.5, -2], rotation: axisAngle([0, 1, 0], 37), scale: [1.25, 0.8, 1.5] };
  const local = gallery(root);
  const s = root.scale!;
  const slots = local.slots.map((t): SlotTruth => {
    const n: V3 = [t.facing[0] / s[0], t.facing[1] / s[1], t.facing[2] / s[2]];
    const l = Math.hypot(...n);
    const facing = applyTRS({ rotation: root.rotation }, [n[0] / l, n[1] / l, n[2] / l]);
    const localAxes = levelledAxes(t.facing);
    const corners = [-1, 1].flatMap((a) =>
      [-1, 1].map((b) => {
        const c: V3 = [0, 1, 2].map(
          (k) => t.position[k]! + (a * t.width * localAxes.right[k]!) / 2 + (b * t.height * localAxes.up[k]!) / 2,
        ) as V3;
        return applyTRS(root, c);
      }),
    );
    const world = levelledAxes(facing);
    const extent = (axis: V3) => {
      const values = corners.map((c) => c[0] * axis[0] + c[1] * axis[1] + c[2] * axis[2]);
      return Math.max(...values) - Math.min(...values);
    };
    return { ...t, position: applyTRS(root, t.position), facing, width: extent(world.right), height: extent(world.up) };
  });
  return { ...local, name: 'rotated-scaled gallery', slots };
}

/**
 * Numbering faults: Slot_001, Slot_002 twice, Slot_005, lower-case slot_7, and a quad found only
 * by its material ("Picture").
 */
export function numberingFaults(): TruthRoom {
  const b = new RoomBuilder('Numbering');
  const wall = b.material('Wall');
  b.floorAndCeiling('Room', [-4, -4], [4, 4], 3, b.material('Floor'), b.material('Ceiling'));
  b.wall('North', [4, -4], [-4, -4], 3, 0.2, wall);
  b.wall('South', [-4, 4], [4, 4], 3, 0.2, wall);
  b.wall('East', [4, 4], [4, -4], 3, 0.2, wall);
  b.wall('West', [-4, -4], [-4, 4], 3, 0.2, wall);
  const north = (x: number): Rect => ({ center: [x, 1.5, -3.89], normal: [0, 0, 1], up: [0, 1, 0], width: 0.8, height: 0.6 });
  b.slot('Slot_001', north(-3));
  b.slot('Slot_002', north(-1.5));
  b.slot('Slot_002', north(0));
  b.slot('Slot_005', north(1.5));
  b.slot('slot_7', north(3), 'vertices');
  b.slot('Picture', { center: [0, 1.5, 3.89], normal: [0, 0, -1], up: [0, 1, 0], width: 0.8, height: 0.6 });
  return { name: 'numbering', document: b.document, kind: 'room', slots: [] };
}
