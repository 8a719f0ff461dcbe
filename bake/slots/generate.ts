/**
 * Generate: place exactly N frames (Auto_NNN) on a model without placeholders, or as many as fit
 * plus a shortfall with its reason.
 *
 * 1. Candidates: area-weighted samples (seeded PRNG) on upright triangles — floors, ceilings and
 *    undersides never qualify (rooms: within 10° of vertical; sculptures: within 20°).
 * 2. Facing: the drawn side of the surface (the front of a single-sided face, either side of a
 *    double-sided one). Rooms: its ray must reach a visible room face — escaping or meeting back
 *    faces means outside, so a frame never faces out through a single-sided wall. Sculptures:
 *    its ray escapes or sees the sculpture from outside.
 * 3. Rooms first try every candidate moved to eye height above the floor below it (a row of
 *    frames), then the raw samples (further rows).
 * 4. Fit: in-plane rays bound the frame by neighbouring walls, floor, ceiling and furniture; a
 *    3×3 grid of rays checks the whole frame rests on one flat surface; rays from the frame check
 *    the open space in front is at least the frame size. Frames are square, sized from the
 *    surface per slot and clamped to the ladder below.
 * 5. Selection: candidates in seeded order, dart throwing with a spacing that starts wide (spread
 *    over the walls) and relaxes, then smaller sizes; a hash grid finds the placed frames near a
 *    candidate (no all-pairs loop) and oriented boxes keep frames from overlapping (plus a gap).
 * 6. Numbering: clockwise around the interior (seen from above, starting at −Z), then by height.
 */
import { createHash } from 'node:crypto';
import type { SlotShortfall } from '../../artifacts/format.ts';
import { dot, levelledFrame, madd, scale, type Frame, type V3 } from './orient.ts';
import type { Interior, RoomKind } from './probe.ts';
import type { WorldScene } from './scene.ts';
import { boxesOverlap, frameBox, SpatialHash, type OrientedBox } from './spatial.ts';

/** Frame sizes (square, metres), largest first. */
export const SIZE_LADDER = [1.6, 1.4, 1.2, 1.0, 0.85, 0.7, 0.6, 0.5, 0.4, 0.32, 0.25, 0.2] as const;
export const GENERATION = {
  room: { minSize: 0.32, maxSize: 1.6, wallSin: Math.sin((10 * Math.PI) / 180), gap: 0.1, bottomClearance: 0.3 },
  sculpture: { minSize: 0.2, maxSize: 1.0, wallSin: Math.sin((20 * Math.PI) / 180), gap: 0.1, bottomClearance: 0 },
} as const;
/** Anchors sit this far in front of the surface (no z-fighting, unambiguous back side). */
export const WALL_OFFSET = 0.005;
/** Centre height of the first row above the floor. */
export const EYE_HEIGHT = 1.5;

const EPS = 0.002;
const INPLANE_OFFSET = 0.02;
const SUPPORT_HEIGHT = 0.05;

export interface GeneratedAnchor {
  position: V3;
  frame: Frame;
  width: number;
  height: number;
  clearance: { front: number; back: number };
  evidence: string;
}

export interface GenerateResult {
  anchors: GeneratedAnchor[];
  shortfall: SlotShortfall | null;
  /** Candidates whose geometry was examined (for the shortfall reason and the bench). */
  examined: number;
}

/** sfc32 seeded from a string: small, fast, and the same everywhere. */
export function seededRandom(seed: string): () => number {
  const h = createHash('sha256').update(seed).digest();
  let a = h.readUInt32LE(0), b = h.readUInt32LE(4), c = h.readUInt32LE(8), d = h.readUInt32LE(12);
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    const t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    const r = (t + d) | 0;
    c = (c + r) | 0;
    return (r >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  return next;
}

interface Candidate {
  sample: V3;
  normal: V3;
  twoSided: boolean;
  snapped: boolean;
  /** 0 not located, 1 located, 2 measured, −1 rejected for good. */
  state: 0 | 1 | 2 | -1;
  anchor: V3;
  frame: Frame;
  /** Ladder index of the largest size the surroundings allow. */
  maxSizeIndex: number;
  fits: Map<number, { ok: boolean; front: number }>;
  placed: boolean;
}

interface Placed {
  position: V3;
  frame: Frame;
  size: number;
  box: OrientedBox;
  front: number;
}

export interface GenerateInput {
  count: number;
  seed: string;
  interior: Interior;
}

export function generateAnchors(scene: WorldScene, input: GenerateInput): GenerateResult {
  const { count } = input;
  const kind: RoomKind = input.interior.kind;
  const cfg = GENERATION[kind];
  const minIndex = SIZE_LADDER.findIndex((s) => s <= cfg.maxSize);
  const lastIndex = SIZE_LADDER.findLastIndex((s) => s >= cfg.minSize);
  const minSize = SIZE_LADDER[lastIndex]!;
  if (count <= 0) return { anchors: [], shortfall: null, examined: 0 };
  const fail = (reason: string): GenerateResult => ({ anchors: [], shortfall: { expected: count, placed: 0, reason }, examined: 0 });
  if (scene.triangleCount === 0) return fail('the model has no triangles');

  // 1. Upright triangles, area-weighted.
  const upright: number[] = [];
  const cumulative: number[] = [];
  let total = 0;
  for (let t = 0; t < scene.triangleCount; t++) {
    const { normal, area } = scene.triangleNormal(t);
    if (area <= 1e-9 || Math.abs(normal[1]) > cfg.wallSin) continue;
    total += area;
    upright.push(t);
    cumulative.push(total);
  }
  if (!upright.length) return fail('no upright surfaces: every face is a floor, ceiling or underside');

  const random = seededRandom(input.seed);
  const sampleCount = Math.min(16000, Math.max(2048, count * 16));
  const samples: Array<{ point: V3; normal: V3; twoSided: boolean; order: number }> = [];
  const p = scene.positions;
  for (let i = 0; i < sampleCount; i++) {
    const target = random() * total;
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < target) lo = mid + 1;
      else hi = mid;
    }
    const t = upright[lo]!;
    let u = random();
    let v = random();
    if (u + v > 1) {
      u = 1 - u;
      v = 1 - v;
    }
    const o = t * 9;
    const point: V3 = [0, 1, 2].map((k) => p[o + k]! + u * (p[o + 3 + k]! - p[o + k]!) + v * (p[o + 6 + k]! - p[o + k]!)) as V3;
    samples.push({ point, normal: scene.triangleNormal(t).normal, twoSided: scene.doubleSided[t] === 1, order: random() });
  }

  // 2. Facing: the side of the surface that sees the room (or the outside of a sculpture).
  const opensTowards = (point: V3, dir: V3): boolean => {
    const hit = scene.castFirst(madd(point, dir, EPS), dir);
    if (kind === 'room') return hit !== null && hit.visible && hit.distance >= minSize;
    return hit === null || (hit.visible && hit.distance >= minSize);
  };
  // A frame hangs on the side of a surface that is drawn: the front of a single-sided face,
  // either side of a double-sided one (the back of a single-sided face is see-through).
  const sidesOf = (normal: V3, twoSided: boolean): V3[] => (twoSided ? [normal, scale(normal, -1)] : [normal]);
  const facingAt = (point: V3, normal: V3, twoSided: boolean): V3 | null => sidesOf(normal, twoSided).find((f) => opensTowards(point, f)) ?? null;

  // Usable surface (for the first size and spacing): the facing test on a prefix of the samples.
  const probeCount = Math.min(samples.length, 256);
  let usable = 0;
  for (let i = 0; i < probeCount; i++) if (facingAt(samples[i]!.point, samples[i]!.normal, samples[i]!.twoSided)) usable++;
  const usableArea = (total * Math.max(usable, 1)) / probeCount;
  const perFrame = Math.sqrt(usableArea / count);
  let sizeIndex = SIZE_LADDER.findIndex((s) => s <= Math.min(cfg.maxSize, Math.max(cfg.minSize, 0.45 * perFrame)));
  if (sizeIndex < minIndex) sizeIndex = minIndex;
  if (sizeIndex < 0 || sizeIndex > lastIndex) sizeIndex = lastIndex;

  const makeCandidate = (s: (typeof samples)[number], snapped: boolean): Candidate => ({
    sample: s.point,
    normal: s.normal,
    twoSided: s.twoSided,
    snapped,
    state: 0,
    anchor: s.point,
    frame: levelledFrame(s.normal),
    maxSizeIndex: lastIndex,
    fits: new Map(),
    placed: false,
  });
  const byOrder = [...samples].sort((a, b) => a.order - b.order);
  const rawList = byOrder.map((s) => makeCandidate(s, false));
  // Moved to eye height, samples 10 cm apart along a wall land on the same spot: keep one.
  const snappedList: Candidate[] = [];
  if (kind === 'room') {
    const seen = new Set<string>();
    for (const s of byOrder) {
      const key = `${Math.round(s.point[0] * 10)},${Math.round(s.point[2] * 10)},${Math.round(s.normal[0] * 4)},${Math.round(s.normal[2] * 4)}`;
      if (seen.has(key)) continue;
      seen.add(key);
      snappedList.push(makeCandidate(s, true));
    }
  }
  let examined = 0;

  // 3. Where the frame would hang: facing and anchor (rooms: moved to eye height first).
  const locate = (c: Candidate): boolean => {
    c.state = -1;
    let facing: V3 | null = null;
    let anchor = c.sample;
    if (c.snapped) {
      for (const f of sidesOf(c.normal, c.twoSided)) {
        const floor = scene.castFirst(madd(c.sample, f, 0.15), [0, -1, 0]);
        if (!floor || floor.normal[1] < 0.7) continue;
        const eye: V3 = [c.sample[0], c.sample[1] - floor.distance + EYE_HEIGHT, c.sample[2]];
        const wall = scene.castFirst(madd(eye, f, 0.1), scale(f, -1), 0.25);
        if (!wall || Math.abs(dot(wall.normal, f)) < 0.95) continue;
        const onWall = madd(eye, f, 0.1 - wall.distance);
        if (!opensTowards(onWall, f)) continue;
        facing = f;
        anchor = onWall;
        break;
      }
    } else {
      facing = facingAt(c.sample, c.normal, c.twoSided);
    }
    if (!facing) return false;
    c.anchor = anchor;
    c.frame = levelledFrame(facing);
    c.state = 1;
    return true;
  };

  // 4a. How large a frame the surroundings allow: walls, floor, ceiling, furniture beside it.
  const measure = (c: Candidate): boolean => {
    examined++;
    c.state = -1;
    const { x, y, z } = c.frame;
    const origin = madd(c.anchor, z, INPLANE_OFFSET);
    const reach = cfg.maxSize / 2 + cfg.gap + cfg.bottomClearance;
    const free = (dir: V3) => scene.castFirst(origin, dir, reach)?.distance ?? reach;
    const half = Math.min(free(x), free(scale(x, -1)), free(y), free(scale(y, -1)) - cfg.bottomClearance) - cfg.gap / 2;
    const ahead = scene.castFirst(madd(c.anchor, z, EPS), z);
    const cap = Math.min(2 * half, ahead ? ahead.distance : Infinity);
    const index = SIZE_LADDER.findIndex((s) => s <= cap);
    if (index < 0 || index > lastIndex) return false;
    c.maxSizeIndex = Math.max(index, minIndex);
    c.state = 2;
    return true;
  };

  // 4b. The whole frame rests on one flat surface and looks at open space (cached per size).
  const fits = (c: Candidate, index: number): { ok: boolean; front: number } => {
    const cached = c.fits.get(index);
    if (cached) return cached;
    const size = SIZE_LADDER[index]!;
    const { x, y, z } = c.frame;
    const tolerance = Math.max(0.01, 0.02 * size);
    const back = scale(z, -1);
    let visible = 0;
    let front = Infinity;
    let ok = true;
    for (let k = 0; k < 9 && ok; k++) {
      const q = madd(madd(c.anchor, x, ((k % 3) - 1) * 0.45 * size), y, (Math.floor(k / 3) - 1) * 0.45 * size);
      const support = scene.castFirst(madd(q, z, SUPPORT_HEIGHT), back, SUPPORT_HEIGHT + tolerance + 0.01);
      const flat = support && Math.abs(support.distance - SUPPORT_HEIGHT) <= tolerance && Math.abs(dot(support.normal, z)) >= 0.95;
      if (!support || !flat || !support.visible) {
        ok = false;
        break;
      }
      // Open space is measured from the frame itself (WALL_OFFSET in front of the surface).
      const ahead = scene.castFirst(madd(q, z, WALL_OFFSET), z);
      // A back face ahead means this part of the frame is inside something or outside the room.
      if (ahead && (!ahead.visible || ahead.distance < size)) ok = false;
      else if (ahead) visible++;
      front = Math.min(front, ahead ? ahead.distance : Infinity);
    }
    // A room frame must look at the room: most of its rays land on room faces, not the void.
    if (ok && kind === 'room' && visible < 5) ok = false;
    const result = { ok, front };
    c.fits.set(index, result);
    return result;
  };

  // 5. Selection.
  const placed: Placed[] = [];
  const reachOf = (size: number) => size * Math.SQRT2 + cfg.gap;
  const index = new SpatialHash(cfg.maxSize * 2);
  const tooClose = (position: V3, spacing: number): boolean => spacing > 0 && index.near(position, spacing).length > 0;
  const overlapsPlaced = (position: V3, box: OrientedBox, size: number): boolean => {
    for (const id of index.near(position, (reachOf(size) + reachOf(cfg.maxSize)) / 2 + 0.05)) {
      if (boxesOverlap(box, placed[id]!.box)) return true;
    }
    return false;
  };

  const tryPlace = (c: Candidate, tier: number, spacing: number): boolean => {
    if (c.placed || c.state === -1) return false;
    if (c.state === 0 && !locate(c)) return false;
    const position = madd(c.anchor, c.frame.z, WALL_OFFSET);
    if (tooClose(position, spacing)) return false;
    if (c.state === 1 && !measure(c)) return false;
    const first = Math.max(tier, c.maxSizeIndex);
    let tries = 0;
    for (let i = first; i <= lastIndex && tries < 3; i++) {
      const size = SIZE_LADDER[i]!;
      const box = frameBox(position, c.frame, size, size, cfg.gap);
      if (overlapsPlaced(position, box, size)) continue;
      tries++;
      const fit = fits(c, i);
      if (!fit.ok) continue;
      c.placed = true;
      index.insert(placed.length, position);
      placed.push({ position, frame: c.frame, size, box, front: fit.front });
      return true;
    }
    // Every size this candidate may still take has failed its fit: never look at it again.
    let exhausted = true;
    for (let i = first; i <= lastIndex && exhausted; i++) exhausted = c.fits.get(i)?.ok === false;
    if (exhausted) c.state = -1;
    return false;
  };

  const phases = kind === 'room' ? [snappedList, rawList] : [rawList];
  outer: for (let tier = sizeIndex; tier <= lastIndex; tier++) {
    const size = SIZE_LADDER[tier]!;
    for (const list of phases) {
      let spacing = Math.max(size + cfg.gap, 0.6 * perFrame);
      for (;;) {
        for (const c of list) {
          if (tryPlace(c, tier, spacing) && placed.length >= count) break outer;
        }
        if (spacing === 0) break;
        spacing *= 0.7;
        if (spacing < size + cfg.gap) spacing = 0;
      }
    }
  }

  // 6. Numbering: clockwise around the centre seen from above (from −Z), then bottom to top.
  const centre = input.interior.centre;
  const angle = (q: V3) => {
    const a = Math.atan2(q[0] - centre[0], -(q[2] - centre[2]));
    return a < 0 ? a + 2 * Math.PI : a;
  };
  const ordered = placed
    .map((pl) => ({ pl, a: angle(pl.position) }))
    .sort((m, n) => m.a - n.a || m.pl.position[1] - n.pl.position[1] || m.pl.position[0] - n.pl.position[0] || m.pl.position[2] - n.pl.position[2])
    .map((m) => m.pl);

  const anchors = ordered.map(
    (pl): GeneratedAnchor => ({
      position: pl.position,
      frame: pl.frame,
      width: pl.size,
      height: pl.size,
      clearance: { front: Number.isFinite(pl.front) ? pl.front : scene.reach, back: WALL_OFFSET },
      evidence: kind === 'room' ? 'generated: upright wall face seen from the room interior' : 'generated: sculpture surface facing outward',
    }),
  );
  const shortfall =
    anchors.length < count
      ? {
          expected: count,
          placed: anchors.length,
          reason: `only ${anchors.length} non-overlapping frames of at least ${minSize} m fit on ${kind === 'room' ? 'upright wall surface facing the interior' : 'upright outward surface'} (${examined} candidate spots examined)`,
        }
      : null;
  return { anchors, shortfall, examined };
}
