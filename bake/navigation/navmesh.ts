/**
 * Bake the walkable floor of a room (decisions.md "Walkable rooms"): a recast solo navmesh of the
 * room's own geometry (world frame, metres, placeholders excluded), cut down to the part reachable
 * from the spawn, as flat triangles the GLB export and the query module use.
 */
import {
  generateSoloNavMesh,
  initNavigation,
  loadNavigation,
  NAVMESH_AGENT,
  navigationOf,
  type Navigation,
  recastConfig,
  type Vec3,
} from '../../artifacts/navmesh.ts';
import type { WorldScene } from '../slots/scene.ts';

export interface NavMeshBakeOptions {
  agent: typeof NAVMESH_AGENT;
  /** Smallest region kept by recast, in cells (small pockets under furniture go). */
  minRegionArea: number;
  /** A room taller than this (m) is warned about as odd units. */
  maxPlausibleHeight: number;
  /** A room whose largest horizontal extent is under this (m) is warned about as odd units. */
  minPlausibleExtent: number;
  /**
   * Most cells of recast's grid (plan extent ÷ cell size, squared): its work grows with them — a 3 KB
   * model with a 300 m floor (9 M cells) spent 137 s and 500 MB in this step; 4 M is a 200 m square at 0.1 m.
   */
  maxGridCells: number;
}

/** The defaults of NavMeshBakeOptions, exported beside them as glTF-Transform's functions do. @public */
export const NAVMESH_BAKE_DEFAULTS: NavMeshBakeOptions = {
  agent: NAVMESH_AGENT,
  minRegionArea: 8,
  maxPlausibleHeight: 60,
  minPlausibleExtent: 0.5,
  maxGridCells: 4_000_000,
};

export interface WalkableFloor {
  /** Flat xyz of the kept triangles (room frame, metres). */
  positions: Float32Array;
  indices: Uint32Array;
  spawn: Vec3;
  /** Queries on the kept floor; the caller destroys it. */
  navigation: Navigation;
  warnings: string[];
}

/** The navmesh's triangles in connected pieces (by shared vertex positions), largest area first. */
interface Piece {
  triangles: number[];
  area: number;
  centroid: Vec3;
}

/** Recast's solo navmesh for the scene's triangles with the walkable-room agent. */
function generateRaw(scene: WorldScene, options: NavMeshBakeOptions): Navigation {
  const a = options.agent;
  const { min, max } = scene.bounds;
  const [columns, rows] = [max[0] - min[0], max[2] - min[2]].map((m) => Math.ceil(m / a.cellSize));
  if (columns! * rows! > options.maxGridCells)
    throw new Error(
      `the room's plan is ${columns!.toLocaleString('en-US')} × ${rows!.toLocaleString('en-US')} cells of ${a.cellSize} m, ` +
        `over the ${options.maxGridCells.toLocaleString('en-US')}-cell limit of a navmesh`,
    );
  const positions = scene.positions;
  const indices = new Uint32Array(positions.length / 3);
  for (let i = 0; i < indices.length; i++) indices[i] = i;
  const result = generateSoloNavMesh(positions, indices, recastConfig(a, { minRegionArea: options.minRegionArea }));
  if (!result.success) throw new Error(`recast could not build a navmesh: ${result.error}`);
  return navigationOf(result.navMesh);
}

function triangleArea(p: ArrayLike<number>, a: number, b: number, c: number): number {
  const ux = p[b * 3]! - p[a * 3]!;
  const uy = p[b * 3 + 1]! - p[a * 3 + 1]!;
  const uz = p[b * 3 + 2]! - p[a * 3 + 2]!;
  const vx = p[c * 3]! - p[a * 3]!;
  const vy = p[c * 3 + 1]! - p[a * 3 + 1]!;
  const vz = p[c * 3 + 2]! - p[a * 3 + 2]!;
  const cx = uy * vz - uz * vy;
  const cy = uz * vx - ux * vz;
  const cz = ux * vy - uy * vx;
  return Math.sqrt(cx * cx + cy * cy + cz * cz) / 2;
}

/** Union-find over triangles that share a vertex position (Detour repeats vertices per polygon). */
function connectedPieces(positions: number[], indices: number[]): Piece[] {
  const triCount = indices.length / 3;
  const parent = Array.from({ length: triCount }, (_, i) => i);
  const find = (i: number): number => {
    while (parent[i] !== i) i = parent[i] = parent[parent[i]!]!;
    return i;
  };
  const firstAt = new Map<string, number>();
  // A vertex's position in whole millimetres: the key that joins triangles sharing it.
  const mm = (v: number, axis: number) => Math.round(positions[v * 3 + axis]! * 1000);
  for (let t = 0; t < triCount; t++) {
    for (let k = 0; k < 3; k++) {
      const v = indices[t * 3 + k]!;
      const key = `${mm(v, 0)},${mm(v, 1)},${mm(v, 2)}`;
      const other = firstAt.get(key);
      if (other === undefined) firstAt.set(key, t);
      else parent[find(t)] = find(other);
    }
  }
  const pieces = new Map<number, Piece>();
  for (let t = 0; t < triCount; t++) {
    const root = find(t);
    const piece = pieces.get(root) ?? { triangles: [], area: 0, centroid: [0, 0, 0] as Vec3 };
    pieces.set(root, piece);
    const [a, b, c] = [indices[t * 3]!, indices[t * 3 + 1]!, indices[t * 3 + 2]!];
    const area = triangleArea(positions, a, b, c);
    piece.triangles.push(t);
    piece.area += area;
    for (let k = 0; k < 3; k++) piece.centroid[k]! += (area * (positions[a * 3 + k]! + positions[b * 3 + k]! + positions[c * 3 + k]!)) / 3;
  }
  const list = [...pieces.values()];
  for (const p of list) for (let k = 0; k < 3; k++) p.centroid[k] = p.area > 0 ? p.centroid[k]! / p.area : 0;
  // Largest first; ties by centroid so the choice never depends on recast's polygon order.
  return list.sort((x, y) => y.area - x.area || x.centroid[0] - y.centroid[0] || x.centroid[2] - y.centroid[2]);
}

/** A piece is indoors when most of a few points on it have room geometry straight above. */
function isIndoors(piece: Piece, positions: number[], indices: number[], scene: WorldScene): boolean {
  const step = Math.max(1, Math.floor(piece.triangles.length / 16));
  let covered = 0;
  let probed = 0;
  for (let i = 0; i < piece.triangles.length; i += step) {
    const t = piece.triangles[i]!;
    const c: Vec3 = [0, 0, 0];
    for (let k = 0; k < 3; k++) for (let d = 0; d < 3; d++) c[d]! += positions[indices[t * 3 + k]! * 3 + d]! / 3;
    probed++;
    if (scene.castFirst([c[0], c[1] + 0.5, c[2]], [0, 1, 0])) covered++;
  }
  return covered * 2 > probed;
}

/** The decision's spawn piece: the one holding the authored spawn, else largest indoor, else largest. */
function choosePiece(pieces: Piece[], positions: number[], indices: number[], scene: WorldScene, authored: Vec3 | null): Piece {
  if (authored) {
    let best = pieces[0]!;
    let bestD = Infinity;
    for (const piece of pieces) {
      for (const t of piece.triangles) {
        const v = indices[t * 3]!;
        const d = Math.hypot(positions[v * 3]! - authored[0], positions[v * 3 + 1]! - authored[1], positions[v * 3 + 2]! - authored[2]);
        if (d < bestD) [best, bestD] = [piece, d];
      }
    }
    return best;
  }
  return pieces.find((p) => isIndoors(p, positions, indices, scene)) ?? pieces[0]!;
}

/** Kept triangles re-indexed with shared vertices, in the raw navmesh's order (deterministic). */
function keepPiece(piece: Piece, positions: number[], indices: number[]): { positions: Float32Array; indices: Uint32Array } {
  const remap = new Map<number, number>();
  const outPos: number[] = [];
  const outIdx: number[] = [];
  for (const t of [...piece.triangles].sort((a, b) => a - b)) {
    for (let k = 0; k < 3; k++) {
      const v = indices[t * 3 + k]!;
      let n = remap.get(v);
      if (n === undefined) {
        n = outPos.length / 3;
        remap.set(v, n);
        outPos.push(positions[v * 3]!, positions[v * 3 + 1]!, positions[v * 3 + 2]!);
      }
      outIdx.push(n);
    }
  }
  return { positions: Float32Array.from(outPos), indices: Uint32Array.from(outIdx) };
}

/** Warnings for a model whose size says it is not in metres (never rescaled). */
function oddUnitWarnings(scene: WorldScene, options: NavMeshBakeOptions = NAVMESH_BAKE_DEFAULTS): string[] {
  const { min, max } = scene.bounds;
  const height = max[1] - min[1];
  const extent = Math.max(max[0] - min[0], max[2] - min[2]);
  const warnings: string[] = [];
  if (height > options.maxPlausibleHeight)
    warnings.push(`navmesh: the room is ${height.toFixed(1)} m tall: odd units? (baked as metres, not rescaled)`);
  if (extent < options.minPlausibleExtent)
    warnings.push(`navmesh: the room is ${extent.toFixed(3)} m across: odd units? (baked as metres, not rescaled)`);
  return warnings;
}

/**
 * The walkable floor reachable from the spawn, or null with the reason in `warnings` when nothing
 * is walkable. Throws when recast itself fails (the caller publishes null and the reason).
 */
export async function bakeWalkableFloor(
  scene: WorldScene,
  authoredSpawn: Vec3 | null,
  options: Partial<NavMeshBakeOptions> = {},
): Promise<WalkableFloor | { warnings: string[] }> {
  const opts = { ...NAVMESH_BAKE_DEFAULTS, ...options };
  await initNavigation();
  const warnings = oddUnitWarnings(scene, opts);
  const nothing = 'navmesh: nothing in the model is walkable for a 0.5 m wide, 1.8 m tall visitor';
  let raw: Navigation;
  try {
    raw = generateRaw(scene, opts);
  } catch (error) {
    // Recast builds no Detour data when no polygon survives: a sculpture with no floor.
    if (!String(error).includes('Failed to create Detour navmesh data')) throw error;
    warnings.push(nothing);
    return { warnings };
  }
  try {
    const { positions, indices } = raw.triangles();
    const pieces = connectedPieces(positions, indices);
    if (pieces.length === 0 || pieces[0]!.area <= 0) {
      warnings.push(nothing);
      return { warnings };
    }
    const piece = choosePiece(pieces, positions, indices, scene, authoredSpawn);
    const kept = keepPiece(piece, positions, indices);
    const navigation = await loadNavigation(kept.positions, kept.indices);
    const spawn = navigation.closestPoint(authoredSpawn ?? piece.centroid) ?? [kept.positions[0]!, kept.positions[1]!, kept.positions[2]!];
    return {
      positions: kept.positions,
      indices: kept.indices,
      spawn: spawn.map((c) => Math.round(c * 1000) / 1000) as Vec3,
      navigation,
      warnings,
    };
  } finally {
    raw.destroy();
  }
}
