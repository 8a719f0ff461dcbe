/**
 * The room as the engine sees it: every triangle of the default scene in world space (root
 * transforms, instancing and mirroring applied), minus slot placeholders, in ONE three-mesh-bvh
 * BVH. All probing and generation ray casts go through `WorldScene`.
 *
 * Winding is normalised so that a triangle's geometric normal (counter-clockwise) is the side a
 * renderer shows: mirrored transforms (negative determinant) swap two vertices.
 */
import { type Document, MathUtils, type Node, type Primitive, type Scene } from '@gltf-transform/core';
// three's types only to talk to three-mesh-bvh; the engine's maths is common/vec.ts (see there why).
import { Box3, BufferAttribute, BufferGeometry, DoubleSide, Matrix4, Ray, Vector3 } from 'three';
import { MeshBVH } from 'three-mesh-bvh';
import { isSlotMaterialName, SLOT_NAME_PATTERN } from '../../artifacts/format.ts';
import { determinant3, multiplyMat4 as multiply, type Mat4, type V3 } from '../../common/vec.ts';
import { BAKE_LIMITS } from '../settings.ts';

export { SLOT_NAME_PATTERN };

export const isSlotPrimitive = (primitive: Primitive): boolean => isSlotMaterialName(primitive.getMaterial()?.getName());

/** A slot placeholder node: named Slot_NNN / Auto_NNN, or drawing with the `Slot Placeholder` material. */
export function isSlotNode(node: Node): boolean {
  if (SLOT_NAME_PATTERN.test(node.getName().trim())) return node.getMesh() !== null;
  return node.getMesh()?.listPrimitives().some(isSlotPrimitive) ?? false;
}

/** The scene anchors are computed in: the default scene, else the first one. */
export function sceneOf(document: Document): Scene | null {
  const root = document.getRoot();
  return root.getDefaultScene() ?? root.listScenes()[0] ?? null;
}

interface InstancedMeshLike {
  getAttribute(name: string): { getCount(): number; getElement(i: number, t: number[]): number[] } | null;
}

/**
 * Visit every (node, primitive, world matrix) drawn by the scene, expanding
 * EXT_mesh_gpu_instancing into one matrix per instance.
 */
export function forEachDrawnPrimitive(document: Document, visit: (node: Node, primitive: Primitive, matrix: Mat4) => void): void {
  const scene = sceneOf(document);
  if (!scene) return;
  scene.traverse((node) => {
    const mesh = node.getMesh();
    if (!mesh) return;
    const world = node.getWorldMatrix() as unknown as Mat4;
    const instancing = node.getExtension('EXT_mesh_gpu_instancing') as unknown as InstancedMeshLike | null;
    const matrices: Mat4[] = [];
    if (instancing) {
      const t = instancing.getAttribute('TRANSLATION');
      const r = instancing.getAttribute('ROTATION');
      const s = instancing.getAttribute('SCALE');
      const count = t?.getCount() ?? r?.getCount() ?? s?.getCount() ?? 0;
      for (let i = 0; i < count; i++) {
        const local = MathUtils.compose(
          (t ? t.getElement(i, [0, 0, 0]) : [0, 0, 0]) as [number, number, number],
          (r ? r.getElement(i, [0, 0, 0, 1]) : [0, 0, 0, 1]) as [number, number, number, number],
          (s ? s.getElement(i, [1, 1, 1]) : [1, 1, 1]) as [number, number, number],
          new Array<number>(16) as never,
        ) as unknown as Mat4;
        matrices.push(multiply(world, local));
      }
    } else {
      matrices.push(world);
    }
    for (const primitive of mesh.listPrimitives()) for (const m of matrices) visit(node, primitive, m);
  });
}

const POINTS = 0;
const LINES = 1;
const LINE_LOOP = 2;
const LINE_STRIP = 3;
const TRIANGLES = 4;
const TRIANGLE_STRIP = 5;
const TRIANGLE_FAN = 6;

/** Growable Float32 storage for triangle soups (9 floats per triangle). */
export class TriangleSoup {
  data = new Float32Array(9 * 1024);
  count = 0;
  /** Triangles refused because a vertex is not finite in float32 (NaN, ±Infinity, overflow). */
  dropped = 0;

  /** Make room for `more` triangles. */
  reserve(more: number): void {
    const needed = (this.count + more) * 9;
    if (needed <= this.data.length) return;
    let size = this.data.length;
    while (size < needed) size *= 2;
    const grown = new Float32Array(size);
    grown.set(this.data.subarray(0, this.count * 9));
    this.data = grown;
  }

  /** Append the triangle (a, b, c) whose vertices are at indices of `xyz` (3 floats each). */
  pushIndexed(xyz: Float64Array, a: number, b: number, c: number): void {
    this.reserve(1);
    const d = this.data;
    const o = this.count * 9;
    d[o] = xyz[a * 3]!;
    d[o + 1] = xyz[a * 3 + 1]!;
    d[o + 2] = xyz[a * 3 + 2]!;
    d[o + 3] = xyz[b * 3]!;
    d[o + 4] = xyz[b * 3 + 1]!;
    d[o + 5] = xyz[b * 3 + 2]!;
    d[o + 6] = xyz[c * 3]!;
    d[o + 7] = xyz[c * 3 + 1]!;
    d[o + 8] = xyz[c * 3 + 2]!;
    this.count++;
  }

  get positions(): Float32Array {
    return this.data.subarray(0, this.count * 9);
  }
}

/** Triangles a primitive draws (what appendWorldTriangles visits), from its counts alone. */
function drawnTriangleCount(primitive: Primitive): number {
  const mode = primitive.getMode();
  const n = primitive.getIndices()?.getCount() ?? primitive.getAttribute('POSITION')?.getCount() ?? 0;
  if (mode === TRIANGLES) return Math.floor(n / 3);
  return mode === TRIANGLE_STRIP || mode === TRIANGLE_FAN ? Math.max(0, n - 2) : 0;
}

/**
 * Points and line segments a primitive draws: they count against the drawn-primitive cap like
 * triangles (a 2.3 MB source of 6 M points baked into a 96 MB plain GLB without it).
 */
function drawnPointAndLineCount(primitive: Primitive): number {
  const mode = primitive.getMode();
  const n = primitive.getIndices()?.getCount() ?? primitive.getAttribute('POSITION')?.getCount() ?? 0;
  if (mode === POINTS || mode === LINE_LOOP) return n;
  if (mode === LINES) return Math.floor(n / 2);
  return mode === LINE_STRIP ? Math.max(0, n - 1) : 0;
}

/**
 * Append a primitive's triangles to `soup` in world space. Returns the number of triangles added
 * (0 for points and lines). Normalized / quantized attributes are decoded by the accessor.
 * Triangles with a vertex that is not finite once stored as float32 are counted in `soup.dropped`
 * instead: one would poison bounds, measures and the BVH.
 */
export function appendWorldTriangles(primitive: Primitive, matrix: Mat4, soup: TriangleSoup): number {
  const mode = primitive.getMode();
  if (mode !== TRIANGLES && mode !== TRIANGLE_STRIP && mode !== TRIANGLE_FAN) return 0;
  const position = primitive.getAttribute('POSITION');
  if (!position) return 0;
  const vertexCount = position.getCount();
  const world = new Float64Array(vertexCount * 3);
  const bad = new Uint8Array(vertexCount);
  const m = matrix;
  const el = [0, 0, 0];
  const array = position.getArray();
  const direct = array instanceof Float32Array && !position.getNormalized() && position.getElementSize() === 3;
  for (let i = 0; i < vertexCount; i++) {
    let x: number, y: number, z: number;
    if (direct) {
      x = array[i * 3]!;
      y = array[i * 3 + 1]!;
      z = array[i * 3 + 2]!;
    } else {
      position.getElement(i, el);
      x = el[0]!;
      y = el[1]!;
      z = el[2]!;
    }
    world[i * 3] = m[0]! * x + m[4]! * y + m[8]! * z + m[12]!;
    world[i * 3 + 1] = m[1]! * x + m[5]! * y + m[9]! * z + m[13]!;
    world[i * 3 + 2] = m[2]! * x + m[6]! * y + m[10]! * z + m[14]!;
    bad[i] = isFloat32Finite(world, i) ? 0 : 1;
  }
  const indexArray = primitive.getIndices()?.getArray() ?? null;
  const n = indexArray ? indexArray.length : vertexCount;
  const idx = (k: number): number => (indexArray ? indexArray[k]! : k);
  const mirrored = determinant3(m) < 0;
  let added = 0;
  const emit = (a: number, b: number, c: number) => {
    if (a >= vertexCount || b >= vertexCount || c >= vertexCount) return;
    if (bad[a] || bad[b] || bad[c]) {
      soup.dropped++;
      return;
    }
    if (mirrored) soup.pushIndexed(world, a, c, b);
    else soup.pushIndexed(world, a, b, c);
    added++;
  };
  if (mode === TRIANGLES) {
    soup.reserve(Math.floor(n / 3));
    for (let k = 0; k + 2 < n; k += 3) emit(idx(k), idx(k + 1), idx(k + 2));
  } else if (mode === TRIANGLE_STRIP) {
    for (let k = 0; k + 2 < n; k++) {
      if (k % 2 === 0) emit(idx(k), idx(k + 1), idx(k + 2));
      else emit(idx(k + 1), idx(k), idx(k + 2));
    }
  } else {
    for (let k = 1; k + 1 < n; k++) emit(idx(0), idx(k), idx(k + 1));
  }
  return added;
}

/** Vertex i of `xyz` survives the float32 soup (a finite float64 beyond ±3.4e38 would not). */
function isFloat32Finite(xyz: Float64Array, i: number): boolean {
  return (
    Number.isFinite(Math.fround(xyz[i * 3]!)) &&
    Number.isFinite(Math.fround(xyz[i * 3 + 1]!)) &&
    Number.isFinite(Math.fround(xyz[i * 3 + 2]!))
  );
}

/** Faces closer together than this along a ray are one surface (coincident faces). */
const COINCIDENT = 1e-4;

export interface Hit {
  distance: number;
  /** Unit geometric (winding) normal of the triangle hit. */
  normal: V3;
  /** The ray arrived at the side the renderer shows (front face, or a double-sided material). */
  visible: boolean;
  triangle: number;
}

export interface Bounds {
  min: V3;
  max: V3;
}

/**
 * World-space room geometry (slot placeholders excluded) with its BVH and ray queries.
 */
export class WorldScene {
  readonly positions: Float32Array;
  readonly triangleCount: number;
  /** 1 when the triangle's material is double-sided (visible from both sides). */
  readonly doubleSided: Uint8Array;
  readonly bounds: Bounds;
  readonly diagonal: number;
  /** Triangles left out for a non-finite vertex (the engine warns about them). */
  readonly dropped: number;
  private readonly bvh: MeshBVH | null;
  private readonly ray = new Ray();
  private readonly origin = new Vector3();
  private readonly direction = new Vector3();

  constructor(positions: Float32Array, doubleSided: Uint8Array, dropped = 0) {
    this.positions = positions;
    this.dropped = dropped;
    this.triangleCount = positions.length / 9;
    this.doubleSided = doubleSided;
    const min: V3 = [Infinity, Infinity, Infinity];
    const max: V3 = [-Infinity, -Infinity, -Infinity];
    for (let i = 0; i < positions.length; i += 3) {
      for (let k = 0; k < 3; k++) {
        const c = positions[i + k]!;
        if (c < min[k]!) min[k] = c;
        if (c > max[k]!) max[k] = c;
      }
    }
    if (this.triangleCount === 0) {
      this.bounds = { min: [0, 0, 0], max: [0, 0, 0] };
      this.diagonal = 0;
      this.bvh = null;
      return;
    }
    this.bounds = { min, max };
    this.diagonal = Math.hypot(max[0] - min[0], max[1] - min[1], max[2] - min[2]);
    const geometry = new BufferGeometry();
    geometry.setAttribute('position', new BufferAttribute(positions, 3));
    this.bvh = new MeshBVH(geometry, { targetLeafSize: 8 });
  }

  /** Longest distance a ray can travel inside the model and still hit something. */
  get reach(): number {
    return this.diagonal * 2 + 1;
  }

  private setRay(origin: V3, dir: V3): Ray {
    this.origin.set(origin[0], origin[1], origin[2]);
    this.direction.set(dir[0], dir[1], dir[2]);
    this.ray.set(this.origin, this.direction);
    return this.ray;
  }

  private toHit(hit: { distance: number; face?: { a: number; normal: Vector3 } | null }, dir: V3): Hit {
    const n = hit.face!.normal;
    const triangle = Math.floor(hit.face!.a / 3);
    const normal: V3 = [n.x, n.y, n.z];
    const visible = this.doubleSided[triangle] === 1 || normal[0] * dir[0] + normal[1] * dir[1] + normal[2] * dir[2] < 0;
    return { distance: hit.distance, normal, visible, triangle };
  }

  /** First hit along a unit direction within `far`, either side of the triangles. */
  castFirst(origin: V3, dir: V3, far = this.reach): Hit | null {
    if (!this.bvh) return null;
    const ray = this.setRay(origin, dir);
    const hit = this.bvh.raycastFirst(ray, DoubleSide, 0, far);
    if (!hit) return null;
    const first = this.toHit(hit as never, dir);
    if (first.visible) return first;
    // Zero-thickness partitions have two faces in one plane: the first hit is a tie, and the
    // face seen from the ray's side is the one that counts.
    const tied = this.bvh.raycast(ray, DoubleSide, Math.max(0, hit.distance - COINCIDENT), hit.distance + COINCIDENT);
    return tied.map((h) => this.toHit(h as never, dir)).find((h) => h.visible) ?? first;
  }

  /**
   * True when no triangle meets the oriented box (centre, orthonormal axes, half extents): the
   * exact "nothing in this volume" test, which rays between grid points cannot give.
   */
  isBoxEmpty(center: V3, axes: readonly [V3, V3, V3], half: V3): boolean {
    if (!this.bvh) return true;
    const box = new Box3(new Vector3(-half[0], -half[1], -half[2]), new Vector3(half[0], half[1], half[2]));
    const [x, y, z] = axes;
    const toMesh = new Matrix4()
      .makeBasis(new Vector3(...x), new Vector3(...y), new Vector3(...z))
      .setPosition(center[0], center[1], center[2]);
    return !this.bvh.intersectsBox(box, toMesh);
  }

  /** Every hit along a unit direction within `far`, nearest first. */
  castAll(origin: V3, dir: V3, far: number): Hit[] {
    if (!this.bvh) return [];
    const hits = this.bvh.raycast(this.setRay(origin, dir), DoubleSide, 0, far);
    return hits.map((h) => this.toHit(h as never, dir)).sort((a, b) => a.distance - b.distance);
  }

  /** Unit geometric normal and area of triangle t. */
  triangleNormal(t: number): { normal: V3; area: number } {
    const p = this.positions;
    const o = t * 9;
    const ax = p[o + 3]! - p[o]!,
      ay = p[o + 4]! - p[o + 1]!,
      az = p[o + 5]! - p[o + 2]!;
    const bx = p[o + 6]! - p[o]!,
      by = p[o + 7]! - p[o + 1]!,
      bz = p[o + 8]! - p[o + 2]!;
    const cx = ay * bz - az * by,
      cy = az * bx - ax * bz,
      cz = ax * by - ay * bx;
    const l = Math.hypot(cx, cy, cz);
    return { normal: l > 0 ? [cx / l, cy / l, cz / l] : [0, 0, 0], area: l / 2 };
  }
}

/**
 * Build the world scene of a document: all drawn triangles except slot placeholders. Fails when
 * the model draws more than BAKE_LIMITS.maxDrawnTriangles (placeholders included, so the extract
 * after it is bounded too): node reuse and instancing multiply a small file's triangles.
 */
export function buildWorldScene(document: Document, maxTriangles = BAKE_LIMITS.maxDrawnTriangles): WorldScene {
  const soup = new TriangleSoup();
  const doubleSided = new Set<number>();
  let drawn = 0;
  forEachDrawnPrimitive(document, (node, primitive, matrix) => {
    drawn += drawnTriangleCount(primitive) + drawnPointAndLineCount(primitive);
    if (drawn > maxTriangles) {
      const limit = maxTriangles.toLocaleString('en-US');
      const counted = 'points and line segments count as triangles; meshes counted once per node and instance using them';
      throw new Error(`model draws more than ${limit} triangles (${counted}): over the bake's limit`);
    }
    if (isSlotPrimitive(primitive) || SLOT_NAME_PATTERN.test(node.getName().trim())) return;
    const added = appendWorldTriangles(primitive, matrix, soup);
    if (primitive.getMaterial()?.getDoubleSided()) for (let i = soup.count - added; i < soup.count; i++) doubleSided.add(i);
  });
  const flags = new Uint8Array(soup.count);
  for (const t of doubleSided) flags[t] = 1;
  return new WorldScene(soup.positions.slice(), flags, soup.dropped);
}
