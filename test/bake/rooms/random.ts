/**
 * Families of rooms and sculptures for the generation property tests, drawn from a seed: sizes,
 * wall styles (single-sided panels or thick walls), doorways, furniture against the walls, a
 * free-standing partition, rotated roots.
 */
import type { Document, Material } from '@gltf-transform/core';
import { RoomBuilder, type Opening, type TRS, type V3 } from '../../../bake/sample/room-builder.ts';
import { axisAngle, prism } from './truth.ts';
import { mulberry32 } from '../../../common/random.ts';

export interface RandomModel {
  name: string;
  document: Document;
  kind: 'room' | 'sculpture';
}

/** A single-sided wall (normal to the left of from→to, into the room) with openings. */
function panelWall(
  b: RoomBuilder,
  name: string,
  from: [number, number],
  to: [number, number],
  height: number,
  material: Material,
  openings: Opening[],
): void {
  const dx = to[0] - from[0];
  const dz = to[1] - from[1];
  const length = Math.hypot(dx, dz);
  const dir: V3 = [dx / length, 0, dz / length];
  const normal: V3 = [dir[2], 0, -dir[0]];
  const piece = (a: number, c: number, y0: number, y1: number, k: number) => {
    const mid = (a + c) / 2;
    b.panel(
      `${name}_${k}`,
      { center: [from[0] + dir[0] * mid, (y0 + y1) / 2, from[1] + dir[2] * mid], normal, up: [0, 1, 0], width: c - a, height: y1 - y0 },
      material,
    );
  };
  let cursor = 0;
  let k = 0;
  for (const o of [...openings].sort((p, q) => p.offset - q.offset)) {
    if (o.offset > cursor) piece(cursor, o.offset, 0, height, k++);
    if (o.sill + o.height < height) piece(o.offset, o.offset + o.width, o.sill + o.height, height, k++);
    if (o.sill > 0) piece(o.offset, o.offset + o.width, 0, o.sill, k++);
    cursor = o.offset + o.width;
  }
  if (cursor < length) piece(cursor, length, 0, height, k++);
}

export function randomRoom(seed: number): RandomModel {
  const r = mulberry32(seed);
  const between = (lo: number, hi: number) => lo + r() * (hi - lo);
  const w = between(5, 14);
  const d = between(5, 14);
  const h = between(2.8, 5);
  const style = r() < 0.5 ? 'panels' : 'thick';
  const root: TRS = r() < 0.35 ? { rotation: axisAngle([0, 1, 0], between(0, 360)), translation: [between(-5, 5), 0, between(-5, 5)] } : {};
  const b = new RoomBuilder(`Random${seed}`, root);
  const wall = b.material('Wall');
  b.floorAndCeiling('Room', [0, 0], [w, d], h, b.material('Floor'), b.material('Ceiling'));
  // Walls counter-clockwise seen from above so the left-hand normal points inside.
  const walls: Array<[string, [number, number], [number, number]]> = [
    ['North', [w, 0], [0, 0]],
    ['West', [0, 0], [0, d]],
    ['South', [0, d], [w, d]],
    ['East', [w, d], [w, 0]],
  ];
  for (const [name, from, to] of walls) {
    const length = Math.hypot(to[0] - from[0], to[1] - from[1]);
    const openings: Opening[] =
      r() < 0.4 ? [{ offset: between(0.5, length - 1.6), width: 1.0, sill: 0, height: Math.min(2.2, h - 0.3) }] : [];
    if (style === 'panels') panelWall(b, name, from, to, h, wall, openings);
    else {
      // Thick walls sit outside the footprint so the interior stays [0,w]×[0,d].
      const n: [number, number] = [(to[1] - from[1]) / length, -(to[0] - from[0]) / length];
      b.wall(name, [from[0] - n[0] * 0.1, from[1] - n[1] * 0.1], [to[0] - n[0] * 0.1, to[1] - n[1] * 0.1], h, 0.2, wall, openings);
    }
  }
  const furniture = Math.floor(r() * 5);
  const wood = b.material('Wood');
  for (let i = 0; i < furniture; i++) {
    const width = between(0.8, 2.2);
    const height = between(0.6, 2.2);
    const depth = between(0.3, 0.7);
    const side = Math.floor(r() * 4);
    const along = between(0.2, (side % 2 === 0 ? w : d) - width - 0.2);
    const [min, max]: [V3, V3] =
      side === 0
        ? [
            [along, 0, 0],
            [along + width, height, depth],
          ]
        : side === 1
          ? [
              [0, 0, along],
              [depth, height, along + width],
            ]
          : side === 2
            ? [
                [along, 0, d - depth],
                [along + width, height, d],
              ]
            : [
                [w - depth, 0, along],
                [w, height, along + width],
              ];
    b.box(`Furniture${i}`, min, max, wood);
  }
  if (r() < 0.3 && w > 7) {
    b.wall('Partition', [w * 0.35, d / 2], [w * 0.65, d / 2], Math.min(2.6, h), 0, b.material('Partition'));
  }
  return {
    name: `room ${seed} (${style}, ${w.toFixed(1)}×${d.toFixed(1)}×${h.toFixed(1)}, ${furniture} furniture)`,
    document: b.document,
    kind: 'room',
  };
}

export function randomSculpture(seed: number): RandomModel {
  const r = mulberry32(seed * 7919);
  const between = (lo: number, hi: number) => lo + r() * (hi - lo);
  const b = new RoomBuilder(`Sculpture${seed}`, r() < 0.5 ? { rotation: axisAngle([0, 1, 0], between(0, 360)) } : {});
  const stone = b.material('Stone');
  const radius = between(0.7, 1.6);
  const sides = 4 + Math.floor(r() * 7);
  b.box('Pedestal', [-radius - 0.3, 0, -radius - 0.3], [radius + 0.3, 0.4, radius + 0.3], stone);
  const column = prism(sides, radius, 0.4, 0.4 + between(2, 4));
  b.mesh('Column', column.positions, column.indices, stone);
  if (r() < 0.6) {
    const s = between(0.6, 1.2);
    b.box('Block', [radius * 0.5, 1.2, radius * 0.5], [radius * 0.5 + s, 1.2 + s, radius * 0.5 + s], stone);
  }
  return { name: `sculpture ${seed} (${sides} sides, r ${radius.toFixed(2)})`, document: b.document, kind: 'sculpture' };
}
