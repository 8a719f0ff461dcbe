/**
 * Navigation queries on a baked room's walkable floor, for Node (bake, tour route) and the browser
 * (walk mode). The published navmesh GLB holds triangles only; they are rebuilt here into a Detour
 * NavMesh with a zero agent radius (the bake already kept the radius from the walls).
 * The wasm is @recast-navigation/wasm's "compat" build (wasm inlined in JS), so bundlers need no
 * separate .wasm file.
 */

export type Vec3 = [number, number, number];

/*
 * recast-navigation 0.43's .d.ts files import each other without extensions, which NodeNext cannot
 * resolve (its types come out empty); the few parts used here are typed by hand.
 */
type Vector3 = { x: number; y: number; z: number };
type Status = { success: boolean; status: number };
export interface NavMesh {
  destroy(): void;
}
interface NavMeshQuery {
  findClosestPoint(p: Vector3, o: { halfExtents: Vector3 }): Status & { polyRef: number; point: Vector3; isPointOverPoly: boolean };
  computePath(
    a: Vector3,
    b: Vector3,
    o: { halfExtents: Vector3; maxPathPolys: number; maxStraightPathPoints: number },
  ): { success: boolean; path: Vector3[] };
  moveAlongSurface(ref: number, from: Vector3, to: Vector3): Status & { resultPosition: Vector3; visited: number[] };
  getPolyHeight(ref: number, p: Vector3): Status & { height: number };
  destroy(): void;
}
type SoloResult = { success: true; navMesh: NavMesh } | { success: false; error: string };
interface Recast {
  init(): Promise<void>;
  NavMeshQuery: new (navMesh: NavMesh, params: { maxNodes: number }) => NavMeshQuery;
  getNavMeshPositionsAndIndices(navMesh: NavMesh): [number[], number[]];
  generateSoloNavMesh(positions: ArrayLike<number>, indices: ArrayLike<number>, config: Record<string, number>): SoloResult;
}
/** Set by initNavigation: every query and build below runs after it. */
let loaded: Recast | null = null;
const recastModule = (): Recast => {
  if (!loaded) throw new Error('navigation used before initNavigation() resolved');
  return loaded;
};

export const generateSoloNavMesh: Recast['generateSoloNavMesh'] = (positions, indices, config) =>
  recastModule().generateSoloNavMesh(positions, indices, config);

/** Agent and cell settings of walkable rooms (decisions.md "Walkable rooms"). */
export const NAVMESH_AGENT = {
  radius: 0.25,
  height: 1.8,
  stepHeight: 0.3,
  maxSlopeDegrees: 40,
  cellSize: 0.1,
  cellHeight: 0.1,
  // The wasm crashed at 0.6 / 0.9 with 0.1 m cells; 1.0 works.
  detailSampleDist: 1.0,
} as const;

/**
 * Recast's solo-navmesh settings for `agent`, in cells: what the bake, the page's fallback build and
 * the loading of baked triangles share. `radius` 0 for triangles already cut to the walkable floor.
 */
export function recastConfig(
  agent: typeof NAVMESH_AGENT,
  { radius = agent.radius, minRegionArea }: { radius?: number; minRegionArea?: number } = {},
): Record<string, number> {
  return {
    cs: agent.cellSize,
    ch: agent.cellHeight,
    walkableRadius: Math.ceil(radius / agent.cellSize),
    walkableHeight: Math.ceil(agent.height / agent.cellHeight),
    walkableClimb: Math.floor(agent.stepHeight / agent.cellHeight),
    walkableSlopeAngle: agent.maxSlopeDegrees,
    detailSampleDist: agent.detailSampleDist,
    ...(minRegionArea === undefined ? {} : { minRegionArea }),
  };
}

export interface NavQueryOptions {
  /** Half extents (m) of the box searched around a point for the nearest polygon. */
  halfExtents: Vec3;
  /** Bound on polygons per path and points per straight path. */
  maxPathPolys: number;
}

/** The defaults of NavQueryOptions, exported beside them as glTF-Transform's functions do. @public */
export const NAV_QUERY_DEFAULTS: NavQueryOptions = { halfExtents: [2, 4, 2], maxPathPolys: 4096 };

let initialised: Promise<void> | null = null;

/**
 * Loads recast and its wasm once per process/page. Imported on first use, so the viewer's page
 * script does not carry recast's wasm (inlined, ~1 MB) until a room is walked.
 */
export function initNavigation(): Promise<void> {
  initialised ??= (async () => {
    const [core, generators] = await Promise.all([import('recast-navigation'), import('recast-navigation/generators')]);
    const recast = { ...core, ...generators } as unknown as Recast;
    await recast.init();
    loaded = recast;
  })();
  return initialised;
}

const toVec = ([x, y, z]: Vec3): Vector3 => ({ x, y, z });
const fromVec = (v: Vector3): Vec3 => [v.x, v.y, v.z];

/** A navmesh ready for queries; `destroy()` frees its wasm memory. */
export interface Navigation {
  /** The navmesh point nearest `p`, or null when none lies within the search box. */
  closestPoint(p: Vec3): Vec3 | null;
  /** Straight path on the navmesh from `from` to `to` (Detour computePath); empty when unreachable. */
  path(from: Vec3, to: Vec3): Vec3[];
  /** Where a walker at `from` heading for `to` ends, sliding along walls (moveAlongSurface). */
  moveAlong(from: Vec3, to: Vec3): Vec3;
  /** Whether `p` is over the navmesh within `tolerance` m vertically. */
  isOnMesh(p: Vec3, tolerance?: number): boolean;
  /** The navmesh's triangles (positions flat xyz, indices) as Detour holds them. */
  triangles(): { positions: number[]; indices: number[] };
  readonly navMesh: NavMesh;
  destroy(): void;
}

/** Wraps a Detour NavMesh with the queries walk mode, the bake and the tour use. */
export function navigationOf(navMesh: NavMesh, options: Partial<NavQueryOptions> = {}): Navigation {
  const opts = { ...NAV_QUERY_DEFAULTS, ...options };
  const recast = recastModule();
  const query = new recast.NavMeshQuery(navMesh, { maxNodes: 8192 });
  const halfExtents = toVec(opts.halfExtents);
  const nearest = (p: Vec3) => query.findClosestPoint(toVec(p), { halfExtents });
  return {
    navMesh,
    closestPoint(p) {
      const hit = nearest(p);
      return hit.success && hit.polyRef !== 0 ? fromVec(hit.point) : null;
    },
    path(from, to) {
      const result = query.computePath(toVec(from), toVec(to), {
        halfExtents,
        maxPathPolys: opts.maxPathPolys,
        maxStraightPathPoints: opts.maxPathPolys,
      });
      return result.success ? result.path.map(fromVec) : [];
    },
    moveAlong(from, to) {
      const start = nearest(from);
      if (!start.success || start.polyRef === 0) return from;
      const moved = query.moveAlongSurface(start.polyRef, start.point, toVec(to));
      if (!moved.success) return fromVec(start.point);
      const end = moved.resultPosition;
      const ref = moved.visited.at(-1) ?? start.polyRef;
      const height = query.getPolyHeight(ref, end);
      return [end.x, height.success ? height.height : end.y, end.z];
    },
    isOnMesh(p, tolerance = 0.35) {
      const hit = nearest(p);
      if (!hit.success || hit.polyRef === 0 || !hit.isPointOverPoly) return false;
      return Math.abs(hit.point.y - p[1]) <= tolerance;
    },
    triangles() {
      const [positions, indices] = recast.getNavMeshPositionsAndIndices(navMesh);
      return { positions, indices };
    },
    destroy() {
      query.destroy();
      navMesh.destroy();
    },
  };
}

/**
 * Builds a queryable navmesh from published navmesh triangles (the `NavMesh` node's positions and
 * indices, room frame, metres). Zero radius: the triangles are already the walkable floor.
 */
export async function loadNavigation(
  positions: ArrayLike<number>,
  indices: ArrayLike<number>,
  options: Partial<NavQueryOptions> = {},
): Promise<Navigation> {
  await initNavigation();
  const config = recastConfig(NAVMESH_AGENT, { radius: 0, minRegionArea: 0 });
  const result = generateSoloNavMesh(Array.from(positions), Array.from(indices), config);
  if (!result.success) throw new Error(`navmesh: cannot load the walkable floor (${result.error})`);
  return navigationOf(result.navMesh, options);
}

/** Reads the `NavMesh` node's triangles from a navmesh GLB (as the bake writes it: one float32 primitive). */
export async function loadNavigationGlb(glb: Uint8Array, options: Partial<NavQueryOptions> = {}): Promise<Navigation> {
  const { positions, indices } = readNavMeshGlb(glb);
  return loadNavigation(positions, indices, options);
}

/** Minimal GLB reader for the bake's own navmesh files (no dependency, works in the browser). */
export function readNavMeshGlb(glb: Uint8Array): { positions: Float32Array; indices: Uint32Array } {
  const view = new DataView(glb.buffer, glb.byteOffset, glb.byteLength);
  if (glb.byteLength < 20 || view.getUint32(0, true) !== 0x46546c67) throw new Error('navmesh: not a GLB file');
  const jsonLength = view.getUint32(12, true);
  const json = JSON.parse(new TextDecoder().decode(glb.subarray(20, 20 + jsonLength)));
  const binStart = 20 + jsonLength + 8;
  const node = (json.nodes ?? []).find((n: { name?: string }) => n.name === 'NavMesh');
  if (node?.mesh === undefined) throw new Error('navmesh: GLB has no NavMesh node');
  const primitive = json.meshes[node.mesh].primitives[0];
  const accessor = (i: number) => {
    const acc = json.accessors[i];
    const bv = json.bufferViews[acc.bufferView];
    const offset = binStart + (bv.byteOffset ?? 0) + (acc.byteOffset ?? 0);
    return { acc, bytes: Uint8Array.from(glb.subarray(offset, offset + bv.byteLength - (acc.byteOffset ?? 0))) };
  };
  const pos = accessor(primitive.attributes.POSITION);
  const positions = new Float32Array(pos.bytes.buffer, 0, pos.acc.count * 3);
  if (primitive.indices === undefined) return { positions, indices: Uint32Array.from({ length: pos.acc.count }, (_, i) => i) };
  const idx = accessor(primitive.indices);
  const ctor = idx.acc.componentType === 5125 ? Uint32Array : idx.acc.componentType === 5123 ? Uint16Array : Uint8Array;
  const indices = Uint32Array.from(new ctor(idx.bytes.buffer, 0, idx.acc.count));
  return { positions, indices };
}
