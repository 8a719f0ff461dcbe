/**
 * RoomBuilder: assembles glTF room models from walls, boxes and slot quads, deterministically.
 * The sample content generator and the slot engine's ground-truth tests both build their rooms
 * with it, so "what the room really is" (where each wall and slot is) is known exactly.
 *
 * Conventions: metres, +Y up, triangles wound counter-clockwise seen from the side the face's
 * normal points to. Everything is appended to one scene under a single root node, whose transform
 * can be set to exercise rotated and scaled roots.
 */
import { Document, type Material, type Node, type Texture } from '@gltf-transform/core';

import { SLOT_MATERIAL_NAME } from '../../artifacts/format.ts';
import { add, cross, normalize as norm, quatFromBasis, scale, sub, type V3 } from '../../common/vec.ts';
import { createSlotPlaceholderMaterial } from '../slots/embed.ts';

export { SLOT_MATERIAL_NAME, type V3 };

/** A planar rectangle: centre, outward normal, in-plane up direction, size. */
export interface Rect {
  center: V3;
  normal: V3;
  up: V3;
  width: number;
  height: number;
}

export interface MaterialSpec {
  color?: [number, number, number, number];
  roughness?: number;
  metallic?: number;
  doubleSided?: boolean;
  /** PNG/JPEG bytes for the base colour and normal maps. */
  baseColorImage?: Uint8Array;
  normalImage?: Uint8Array;
  imageMimeType?: 'image/png' | 'image/jpeg';
}

export interface Opening {
  /** distance along the wall from its start to the opening's left edge */
  offset: number;
  width: number;
  /** bottom of the opening above the floor (0 for a doorway) */
  sill: number;
  height: number;
}

export interface TRS {
  translation?: V3;
  rotation?: [number, number, number, number];
  scale?: V3;
}

class MeshAccumulator {
  positions: number[] = [];
  normals: number[] = [];
  uvs: number[] = [];
  indices: number[] = [];

  /** Add a rectangle facing rect.normal (CCW seen from the front); uvs span [0, w/uvScale]. */
  rect(r: Rect, uvScale = 1): void {
    const n = norm(r.normal);
    const up = norm(r.up);
    const right = norm(cross(up, n));
    const hw = r.width / 2;
    const hh = r.height / 2;
    const corners: V3[] = [
      add(add(r.center, scale(right, -hw)), scale(up, -hh)),
      add(add(r.center, scale(right, hw)), scale(up, -hh)),
      add(add(r.center, scale(right, hw)), scale(up, hh)),
      add(add(r.center, scale(right, -hw)), scale(up, hh)),
    ];
    const base = this.positions.length / 3;
    const uv = [0, 0, r.width / uvScale, 0, r.width / uvScale, r.height / uvScale, 0, r.height / uvScale];
    corners.forEach((c, i) => {
      this.positions.push(...c);
      this.normals.push(...n);
      this.uvs.push(uv[i * 2]!, 1 - uv[i * 2 + 1]!);
    });
    this.indices.push(base, base + 1, base + 2, base, base + 2, base + 3);
  }

  /** A rectangle split into a du × dv grid of quads (dense geometry), facing rect.normal. */
  grid(r: Rect, du: number, dv: number): void {
    const n = norm(r.normal);
    const up = norm(r.up);
    const right = norm(cross(up, n));
    const base = this.positions.length / 3;
    for (let j = 0; j <= dv; j++) {
      for (let i = 0; i <= du; i++) {
        const u = i / du - 0.5;
        const v = j / dv - 0.5;
        this.positions.push(...add(add(r.center, scale(right, u * r.width)), scale(up, v * r.height)));
        this.normals.push(...n);
        this.uvs.push(i / du, 1 - j / dv);
      }
    }
    for (let j = 0; j < dv; j++) {
      for (let i = 0; i < du; i++) {
        const a = base + j * (du + 1) + i;
        const b = a + 1;
        const c = a + du + 2;
        const d = a + du + 1;
        this.indices.push(a, b, c, a, c, d);
      }
    }
  }

  /** UV sphere with outward faces: 2 × segments × rings triangles. */
  sphere(center: V3, radius: number, segments: number, rings: number): void {
    const base = this.positions.length / 3;
    for (let j = 0; j <= rings; j++) {
      const theta = (j / rings) * Math.PI;
      for (let i = 0; i <= segments; i++) {
        const phi = (i / segments) * Math.PI * 2;
        const n: V3 = [Math.sin(theta) * Math.cos(phi), Math.cos(theta), -Math.sin(theta) * Math.sin(phi)];
        this.positions.push(...add(center, scale(n, radius)));
        this.normals.push(...n);
        this.uvs.push(i / segments, j / rings);
      }
    }
    for (let j = 0; j < rings; j++) {
      for (let i = 0; i < segments; i++) {
        const a = base + j * (segments + 1) + i;
        const b = a + segments + 1;
        this.indices.push(a, b, a + 1, a + 1, b, b + 1);
      }
    }
  }

  /** Axis-aligned box with outward faces; `skip` omits faces by axis name (e.g. '-y'). */
  box(min: V3, max: V3, skip: string[] = [], uvScale = 1): void {
    const c: V3 = scale(add(min, max), 0.5);
    const s = sub(max, min);
    const faces: Array<[string, Rect]> = [
      ['+x', { center: [max[0], c[1], c[2]], normal: [1, 0, 0], up: [0, 1, 0], width: s[2], height: s[1] }],
      ['-x', { center: [min[0], c[1], c[2]], normal: [-1, 0, 0], up: [0, 1, 0], width: s[2], height: s[1] }],
      ['+z', { center: [c[0], c[1], max[2]], normal: [0, 0, 1], up: [0, 1, 0], width: s[0], height: s[1] }],
      ['-z', { center: [c[0], c[1], min[2]], normal: [0, 0, -1], up: [0, 1, 0], width: s[0], height: s[1] }],
      ['+y', { center: [c[0], max[1], c[2]], normal: [0, 1, 0], up: [0, 0, -1], width: s[0], height: s[2] }],
      ['-y', { center: [c[0], min[1], c[2]], normal: [0, -1, 0], up: [0, 0, 1], width: s[0], height: s[2] }],
    ];
    for (const [name, rect] of faces) if (!skip.includes(name)) this.rect(rect, uvScale);
  }

  get empty(): boolean {
    return this.indices.length === 0;
  }
}

export class RoomBuilder {
  readonly document = new Document();
  private readonly buffer = this.document.createBuffer('data');
  private readonly scene = this.document.createScene('Scene');
  readonly root: Node;
  private readonly materials = new Map<string, Material>();
  private slotMaterial: Material | null = null;

  constructor(name: string, rootTransform: TRS = {}) {
    this.document.getRoot().getAsset().generator = 'museum room-builder';
    this.root = this.document.createNode(name);
    if (rootTransform.translation) this.root.setTranslation(rootTransform.translation);
    if (rootTransform.rotation) this.root.setRotation(rootTransform.rotation);
    if (rootTransform.scale) this.root.setScale(rootTransform.scale);
    this.scene.addChild(this.root);
    this.document.getRoot().setDefaultScene(this.scene);
  }

  material(name: string, spec: MaterialSpec = {}): Material {
    const existing = this.materials.get(name);
    if (existing) return existing;
    const m = this.document
      .createMaterial(name)
      .setBaseColorFactor(spec.color ?? [0.8, 0.8, 0.8, 1])
      .setRoughnessFactor(spec.roughness ?? 0.9)
      .setMetallicFactor(spec.metallic ?? 0)
      .setDoubleSided(spec.doubleSided ?? false);
    const mime = spec.imageMimeType ?? 'image/png';
    const ext = mime === 'image/png' ? 'png' : 'jpg';
    if (spec.baseColorImage) m.setBaseColorTexture(this.texture(`${name}_basecolor.${ext}`, spec.baseColorImage, mime));
    if (spec.normalImage) m.setNormalTexture(this.texture(`${name}_normal.${ext}`, spec.normalImage, mime));
    this.materials.set(name, m);
    return m;
  }

  private texture(uri: string, image: Uint8Array, mimeType: string): Texture {
    return this.document.createTexture(uri).setImage(image).setMimeType(mimeType).setURI(uri);
  }

  /** The material every slot placeholder carries: the museum's convention, a faint blue pane (as generated ones are). */
  get slotPlaceholderMaterial(): Material {
    this.slotMaterial ??= createSlotPlaceholderMaterial(this.document);
    return this.slotMaterial;
  }

  private addMesh(name: string, acc: MeshAccumulator, material: Material, parent: Node = this.root): Node {
    const d = this.document;
    const prim = d
      .createPrimitive()
      .setAttribute('POSITION', d.createAccessor().setType('VEC3').setArray(new Float32Array(acc.positions)).setBuffer(this.buffer))
      .setAttribute('NORMAL', d.createAccessor().setType('VEC3').setArray(new Float32Array(acc.normals)).setBuffer(this.buffer))
      .setAttribute('TEXCOORD_0', d.createAccessor().setType('VEC2').setArray(new Float32Array(acc.uvs)).setBuffer(this.buffer))
      .setIndices(d.createAccessor().setType('SCALAR').setArray(new Uint32Array(acc.indices)).setBuffer(this.buffer))
      .setMaterial(material);
    const mesh = d.createMesh(name).addPrimitive(prim);
    const node = d.createNode(name).setMesh(mesh);
    parent.addChild(node);
    return node;
  }

  /** A solid box (furniture, plinths, pillars, thick wall pieces). */
  box(name: string, min: V3, max: V3, material: Material, skip: string[] = []): Node {
    const acc = new MeshAccumulator();
    acc.box(min, max, skip);
    return this.addMesh(name, acc, material);
  }

  /**
   * A single-sided rectangle, visible from the side rect.normal points to — how many exporters
   * write walls (the back is culled). `divisions` splits it into a grid for dense test rooms.
   */
  panel(name: string, rect: Rect, material: Material, divisions: [number, number] = [1, 1]): Node {
    const acc = new MeshAccumulator();
    if (divisions[0] === 1 && divisions[1] === 1) acc.rect(rect);
    else acc.grid(rect, divisions[0], divisions[1]);
    return this.addMesh(name, acc, material);
  }

  /** A sphere (furniture, ornaments, sculpture parts); `segments` × `rings` sets its density. */
  sphere(name: string, center: V3, radius: number, material: Material, segments = 24, rings = 12): Node {
    const acc = new MeshAccumulator();
    acc.sphere(center, radius, segments, rings);
    return this.addMesh(name, acc, material);
  }

  /** Floor (facing up) and ceiling (facing down) over an axis-aligned footprint. */
  floorAndCeiling(name: string, min: [number, number], max: [number, number], height: number, floor: Material, ceiling: Material): void {
    const cx = (min[0] + max[0]) / 2;
    const cz = (min[1] + max[1]) / 2;
    const w = max[0] - min[0];
    const dz = max[1] - min[1];
    const f = new MeshAccumulator();
    f.rect({ center: [cx, 0, cz], normal: [0, 1, 0], up: [0, 0, -1], width: w, height: dz }, 2);
    this.addMesh(`${name}_Floor`, f, floor);
    const c = new MeshAccumulator();
    c.rect({ center: [cx, height, cz], normal: [0, -1, 0], up: [0, 0, 1], width: w, height: dz }, 2);
    this.addMesh(`${name}_Ceiling`, c, ceiling);
  }

  /**
   * Four single-sided walls N, S, W, E around the footprint [0, width] × [0, depth], facing in: the
   * plainest closed room (`N` lies on z = 0, `W` on x = 0).
   */
  innerWalls(width: number, depth: number, height: number, material: Material): void {
    const y = height / 2;
    this.panel('N', { center: [width / 2, y, 0], normal: [0, 0, 1], up: [0, 1, 0], width, height }, material);
    this.panel('S', { center: [width / 2, y, depth], normal: [0, 0, -1], up: [0, 1, 0], width, height }, material);
    this.panel('W', { center: [0, y, depth / 2], normal: [1, 0, 0], up: [0, 1, 0], width: depth, height }, material);
    this.panel('E', { center: [width, y, depth / 2], normal: [-1, 0, 0], up: [0, 1, 0], width: depth, height }, material);
  }

  /**
   * A straight wall from `from` to `to` (x,z on the floor) of the given height. With thickness > 0
   * it is a solid slab (centred on the line) cut by the openings; with thickness 0 it is a
   * zero-thickness partition: one quad per side, both at the same plane.
   */
  wall(
    name: string,
    from: [number, number],
    to: [number, number],
    height: number,
    thickness: number,
    material: Material,
    openings: Opening[] = [],
  ): Node {
    const dx = to[0] - from[0];
    const dz = to[1] - from[1];
    const length = Math.hypot(dx, dz);
    const dir: V3 = [dx / length, 0, dz / length];
    const normal: V3 = [dir[2], 0, -dir[0]]; // left-hand side of the direction of travel
    // Solid pieces of the wall in (along, bottom, top) coordinates, around each opening.
    const pieces: Array<[number, number, number, number]> = [];
    const sorted = [...openings].sort((a, b) => a.offset - b.offset);
    let cursor = 0;
    for (const o of sorted) {
      if (o.offset > cursor) pieces.push([cursor, o.offset, 0, height]);
      if (o.sill > 0) pieces.push([o.offset, o.offset + o.width, 0, o.sill]);
      if (o.sill + o.height < height) pieces.push([o.offset, o.offset + o.width, o.sill + o.height, height]);
      cursor = o.offset + o.width;
    }
    if (cursor < length) pieces.push([cursor, length, 0, height]);

    const acc = new MeshAccumulator();
    const t = thickness / 2;
    for (const [a, b, y0, y1] of pieces) {
      const mid = (a + b) / 2;
      const center: V3 = [from[0] + dir[0] * mid, (y0 + y1) / 2, from[1] + dir[2] * mid];
      const w = b - a;
      const h = y1 - y0;
      acc.rect({ center: add(center, scale(normal, t)), normal, up: [0, 1, 0], width: w, height: h });
      acc.rect({ center: add(center, scale(normal, -t)), normal: scale(normal, -1), up: [0, 1, 0], width: w, height: h });
      if (thickness > 0) {
        // End caps and top/bottom so the slab is closed.
        const along = (p: number): V3 => [from[0] + dir[0] * p, (y0 + y1) / 2, from[1] + dir[2] * p];
        acc.rect({ center: along(a), normal: scale(dir, -1), up: [0, 1, 0], width: thickness, height: h });
        acc.rect({ center: along(b), normal: dir, up: [0, 1, 0], width: thickness, height: h });
        acc.rect({ center: [center[0], y1, center[2]], normal: [0, 1, 0], up: normal, width: w, height: thickness });
        acc.rect({ center: [center[0], y0, center[2]], normal: [0, -1, 0], up: normal, width: w, height: thickness });
      }
    }
    return this.addMesh(name, acc, material);
  }

  /**
   * A slot placeholder quad (material `Slot Placeholder`). Its front face (winding) points along
   * `rect.normal`. With `placement: 'node'` the quad is authored in its node's local XY plane and
   * placed by the node's TRS; with `placement: 'vertices'` the node is identity and the world
   * position is baked into the vertices. Both styles occur in real exports.
   */
  slot(name: string, rect: Rect, placement: 'node' | 'vertices' = 'node', materialOverride?: Material): Node {
    const material = materialOverride ?? this.slotPlaceholderMaterial;
    const acc = new MeshAccumulator();
    if (placement === 'vertices') {
      acc.rect(rect);
      return this.addMesh(name, acc, material);
    }
    acc.rect({ center: [0, 0, 0], normal: [0, 0, 1], up: [0, 1, 0], width: rect.width, height: rect.height });
    const node = this.addMesh(name, acc, material);
    node.setTranslation(rect.center);
    node.setRotation(quatFromBasis(norm(cross(norm(rect.up), norm(rect.normal))), norm(rect.up), norm(rect.normal)));
    return node;
  }

  /** An arbitrary triangle mesh (sculptures, irregular shapes): positions and CCW indices. */
  mesh(name: string, positions: number[], indices: number[], material: Material, transform: TRS = {}): Node {
    const acc = new MeshAccumulator();
    acc.positions = positions;
    acc.indices = indices;
    acc.normals = vertexNormals(positions, indices);
    acc.uvs = new Array((positions.length / 3) * 2).fill(0);
    const node = this.addMesh(name, acc, material);
    if (transform.translation) node.setTranslation(transform.translation);
    if (transform.rotation) node.setRotation(transform.rotation);
    if (transform.scale) node.setScale(transform.scale);
    return node;
  }
}

function vertexNormals(positions: number[], indices: number[]): number[] {
  const n = new Array(positions.length).fill(0);
  for (let i = 0; i < indices.length; i += 3) {
    const [a, b, c] = [indices[i]!, indices[i + 1]!, indices[i + 2]!];
    const p = (k: number): V3 => [positions[k * 3]!, positions[k * 3 + 1]!, positions[k * 3 + 2]!];
    const f = cross(sub(p(b), p(a)), sub(p(c), p(a)));
    for (const k of [a, b, c]) for (let j = 0; j < 3; j++) n[k * 3 + j] += f[j]!;
  }
  for (let k = 0; k < n.length; k += 3) {
    const l = Math.hypot(n[k], n[k + 1], n[k + 2]) || 1;
    n[k] /= l;
    n[k + 1] /= l;
    n[k + 2] /= l;
  }
  return n;
}
