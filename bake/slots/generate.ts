/**
 * Generate: place N frames (Auto_NNN) on a model without placeholders, or as many as fit plus a
 * shortfall with its reason. Stable by construction:
 *   - the picks are one deterministic sequence (seeded by model and room, never by N) and the
 *     engine takes its first N: raising N to N+k keeps the first N and adds k, lowering drops the
 *     last ones;
 *   - given the previously published anchors, every one still valid on the (updated) model keeps
 *     its id and pose, re-seated onto its surface when that moved slightly; the sequence then
 *     fills only the ids that became invalid and the new ones, around the kept frames.
 *
 * Steps (each a function below):
 * 1. uprightSurface / sampleSurface: area-weighted samples (seeded PRNG, a fixed number) on upright
 *    triangles — floors, ceilings and undersides never qualify (rooms: within 10° of vertical;
 *    sculptures: within 20°).
 * 2. FrameProbe.facingAt: the drawn side of the surface (the front of a single-sided face, either
 *    side of a double-sided one). Rooms: its ray must reach a visible room face — escaping or
 *    meeting back faces means outside. Sculptures: its ray escapes or sees the sculpture from outside.
 * 3. FrameProbe.locate: rooms first try every candidate moved to eye height above the floor below it
 *    (a row of frames), then the raw samples (further rows).
 * 4. FrameProbe.measure / fits: in-plane rays bound the frame by neighbouring walls, floor, ceiling
 *    and furniture; a 3×3 grid of rays checks the whole frame rests on one flat surface; the whole
 *    frame looks at open space: rays from its centre and corners, and the box in front of it as
 *    deep as its larger side is empty (furniture in front of a wall is seen wherever it stands).
 * 5. selectFrames: candidates in seeded order, dart throwing with a spacing that starts wide (spread
 *    over the walls) and relaxes, then smaller sizes; a hash grid finds the placed frames near a
 *    candidate and oriented boxes keep frames from overlapping (plus a gap).
 * 6. Numbering: the order of the picks (Auto_001 is the first), so an id never depends on the total.
 */
import type { RoomSlot, SlotShortfall } from '../../artifacts/format.ts';
import { seededRandom } from '../../common/random.ts';
import type { GenerationKindTunables, SlotEngineTunables } from './options.ts';
import { distance, dot, madd, scale, type V3 } from '../../common/vec.ts';
import { frameOfQuaternion, levelledFrame, type Frame } from './orient.ts';
import type { Interior, RoomKind } from './probe.ts';
import type { WorldScene } from './scene.ts';
import { boxesOverlap, frameBox, SpatialHash, type OrientedBox } from './spatial.ts';

const EPS = 0.002;
const INPLANE_OFFSET = 0.02;
const SUPPORT_HEIGHT = 0.05;
/** Rays from these fractions of the frame's half sides: centre, edge midpoints and (nearly) corners. */
const FRONT_GRID = [-0.98, 0, 0.98];

type AnchorOrigin = 'new' | 'kept' | 'reseated';

interface GeneratedAnchor {
  /** 1-based slot number (Auto_NNN). */
  index: number;
  position: V3;
  frame: Frame;
  width: number;
  height: number;
  clearance: { front: number; back: number };
  evidence: string;
  origin: AnchorOrigin;
  /** The published record, for anchors kept from the previous bake (their pose verbatim). */
  previous?: RoomSlot;
}

export interface GenerateResult {
  anchors: GeneratedAnchor[];
  shortfall: SlotShortfall | null;
  /** Candidates whose geometry was examined (for the shortfall reason and the bench). */
  examined: number;
}

/** The anchors published for this room by the previous bake (generated ones, any order). */
export interface PreviousAnchors {
  slots: RoomSlot[];
  /** The model is the one they were computed on: keep them verbatim, without re-validating. */
  sameModel: boolean;
}

export interface GenerateInput {
  count: number;
  /** Seeds the pick sequence: model and room, never the count. */
  seed: string;
  interior: Interior;
  tunables: Required<SlotEngineTunables>;
  previous?: PreviousAnchors | null;
}

interface Sample {
  point: V3;
  normal: V3;
  twoSided: boolean;
  order: number;
}

interface Candidate {
  sample: V3;
  normal: V3;
  twoSided: boolean;
  snapped: boolean;
  /** 0 not located, 1 located, 2 measured, −1 rejected for good. */
  state: 0 | 1 | 2 | -1;
  /** The point on the surface the frame hangs on. */
  anchor: V3;
  frame: Frame;
  /** Ladder index of the largest size the surroundings allow. */
  maxSizeIndex: number;
  fits: Map<number, Fit>;
  placed: boolean;
}

interface Fit {
  ok: boolean;
  front: number;
}

interface Placed {
  position: V3;
  frame: Frame;
  width: number;
  height: number;
  box: OrientedBox;
  front: number;
}

// ---------------------------------------------------------------------------------------------
// 1. Surface samples

interface UprightSurface {
  triangles: number[];
  cumulative: number[];
  total: number;
}

function uprightSurface(scene: WorldScene, cfg: GenerationKindTunables): UprightSurface | null {
  const triangles: number[] = [];
  const cumulative: number[] = [];
  let total = 0;
  for (let t = 0; t < scene.triangleCount; t++) {
    const { normal, area } = scene.triangleNormal(t);
    if (area <= 1e-9 || Math.abs(normal[1]) > cfg.wallSin) continue;
    total += area;
    triangles.push(t);
    cumulative.push(total);
  }
  return triangles.length ? { triangles, cumulative, total } : null;
}

function sampleSurface(scene: WorldScene, surface: UprightSurface, random: () => number, count: number): Sample[] {
  const samples: Sample[] = [];
  const p = scene.positions;
  const { cumulative } = surface;
  for (let i = 0; i < count; i++) {
    const target = random() * surface.total;
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < target) lo = mid + 1;
      else hi = mid;
    }
    const t = surface.triangles[lo]!;
    let u = random();
    let v = random();
    if (u + v > 1) {
      u = 1 - u;
      v = 1 - v;
    }
    const o = t * 9;
    const point = [0, 1, 2].map((k) => p[o + k]! + u * (p[o + 3 + k]! - p[o + k]!) + v * (p[o + 6 + k]! - p[o + k]!)) as V3;
    samples.push({ point, normal: scene.triangleNormal(t).normal, twoSided: scene.doubleSided[t] === 1, order: random() });
  }
  return samples;
}

// ---------------------------------------------------------------------------------------------
// 2–4. Where a frame may hang, and whether it fits

class FrameProbe {
  examined = 0;
  readonly ladder: readonly number[];
  /** Ladder indices of the largest and smallest sizes this kind may use. */
  readonly firstIndex: number;
  readonly lastIndex: number;

  constructor(
    readonly scene: WorldScene,
    readonly kind: RoomKind,
    readonly cfg: GenerationKindTunables,
    readonly tunables: Required<SlotEngineTunables>,
  ) {
    this.ladder = tunables.sizeLadder;
    this.firstIndex = Math.max(
      0,
      this.ladder.findIndex((s) => s <= cfg.maxSize),
    );
    this.lastIndex = this.ladder.findLastIndex((s) => s >= cfg.minSize);
  }

  get minSize(): number {
    return this.ladder[this.lastIndex]!;
  }

  opensTowards(point: V3, dir: V3): boolean {
    const hit = this.scene.castFirst(madd(point, dir, EPS), dir);
    if (this.kind === 'room') return hit?.visible === true && hit.distance >= this.minSize;
    return hit === null || (hit.visible && hit.distance >= this.minSize);
  }

  /** The drawn sides of a surface: the front of a single-sided face, either side of a double-sided one. */
  sidesOf(normal: V3, twoSided: boolean): V3[] {
    return twoSided ? [normal, scale(normal, -1)] : [normal];
  }

  facingAt(point: V3, normal: V3, twoSided: boolean): V3 | null {
    return this.sidesOf(normal, twoSided).find((f) => this.opensTowards(point, f)) ?? null;
  }

  /** Where the frame would hang: facing and surface point (rooms: moved to eye height first). */
  locate(c: Candidate): boolean {
    c.state = -1;
    let facing: V3 | null = null;
    let anchor = c.sample;
    if (c.snapped) {
      for (const f of this.sidesOf(c.normal, c.twoSided)) {
        const floor = this.scene.castFirst(madd(c.sample, f, 0.15), [0, -1, 0]);
        if (!floor || floor.normal[1] < 0.7) continue;
        const eye: V3 = [c.sample[0], c.sample[1] - floor.distance + this.tunables.eyeHeight, c.sample[2]];
        const wall = this.scene.castFirst(madd(eye, f, 0.1), scale(f, -1), 0.25);
        if (!wall || Math.abs(dot(wall.normal, f)) < 0.95) continue;
        const onWall = madd(eye, f, 0.1 - wall.distance);
        if (!this.opensTowards(onWall, f)) continue;
        facing = f;
        anchor = onWall;
        break;
      }
    } else {
      facing = this.facingAt(c.sample, c.normal, c.twoSided);
    }
    if (!facing) return false;
    c.anchor = anchor;
    c.frame = levelledFrame(facing);
    c.state = 1;
    return true;
  }

  /**
   * How large a frame the surroundings allow: walls, floor, ceiling, furniture beside it. The
   * limits are rays, cast one at a time: as soon as one leaves less room than the smallest size
   * allowed, no size fits and the rest are not cast (same answer, far fewer rays on models where
   * most spots are too small, such as a sculpture smaller than any frame).
   */
  measure(c: Candidate): boolean {
    this.examined++;
    c.state = -1;
    const { cfg } = this;
    const { x, y, z } = c.frame;
    const origin = madd(c.anchor, z, INPLANE_OFFSET);
    const reach = cfg.maxSize / 2 + cfg.gap + cfg.bottomClearance;
    // cap = min(2 × (each free distance − gap / 2), the distance ahead): each term bounds it.
    const smallest = Math.min(...this.ladder.slice(0, this.lastIndex + 1));
    const side = (dir: V3, less = 0) => 2 * ((this.scene.castFirst(origin, dir, reach)?.distance ?? reach) - less - cfg.gap / 2);
    let cap = Infinity;
    for (const term of [() => side(x), () => side(scale(x, -1)), () => side(y), () => side(scale(y, -1), cfg.bottomClearance)]) {
      cap = Math.min(cap, term());
      if (!(cap >= smallest)) return false;
    }
    const ahead = this.scene.castFirst(madd(c.anchor, z, EPS), z);
    cap = Math.min(cap, ahead ? ahead.distance : Infinity);
    const index = this.ladder.findIndex((s) => s <= cap);
    if (index < 0 || index > this.lastIndex) return false;
    c.maxSizeIndex = Math.max(index, this.firstIndex);
    c.state = 2;
    return true;
  }

  /**
   * The whole frame (hung at `surface`, a point of the wall) rests on one flat surface and looks at
   * open space at least its larger side deep: rays from its centre, edge midpoints and corners, and
   * the box in front of it, which must hold no geometry at all.
   */
  fits(surface: V3, frame: Frame, width: number, height: number): Fit {
    const { x, y, z } = frame;
    const size = Math.max(width, height);
    const tolerance = Math.max(0.01, 0.02 * size);
    const back = scale(z, -1);
    const at = (fx: number, fy: number, from: V3) => madd(madd(from, x, (fx * width) / 2), y, (fy * height) / 2);
    for (const fy of [-0.9, 0, 0.9]) {
      for (const fx of [-0.9, 0, 0.9]) {
        const q = at(fx, fy, surface);
        const support = this.scene.castFirst(madd(q, z, SUPPORT_HEIGHT), back, SUPPORT_HEIGHT + tolerance + 0.01);
        const flat = support && Math.abs(support.distance - SUPPORT_HEIGHT) <= tolerance && Math.abs(dot(support.normal, z)) >= 0.95;
        if (!support || !flat || !support.visible) return { ok: false, front: 0 };
      }
    }
    // Open space is measured from the frame itself (wallOffset in front of the surface).
    const position = madd(surface, z, this.tunables.wallOffset);
    let visible = 0;
    let front = Infinity;
    for (const fy of FRONT_GRID) {
      for (const fx of FRONT_GRID) {
        const ahead = this.scene.castFirst(at(fx, fy, position), z);
        // A back face ahead means this part of the frame is inside something or outside the room.
        if (ahead && (!ahead.visible || ahead.distance < size)) return { ok: false, front: ahead.distance };
        if (ahead) visible++;
        front = Math.min(front, ahead ? ahead.distance : Infinity);
      }
    }
    // A room frame must look at the room: most of its rays land on room faces, not the void.
    if (this.kind === 'room' && visible < 5) return { ok: false, front };
    const depth = size - tolerance;
    const clear = this.scene.isBoxEmpty(madd(position, z, tolerance + depth / 2), [x, y, z], [width / 2, height / 2, depth / 2]);
    return { ok: clear, front };
  }

  /** fits() at a candidate's ladder size, cached. */
  fitsCandidate(c: Candidate, index: number): Fit {
    let fit = c.fits.get(index);
    if (!fit) {
      const size = this.ladder[index]!;
      fit = this.fits(c.anchor, c.frame, size, size);
      c.fits.set(index, fit);
    }
    return fit;
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Placement

class Placement {
  readonly placed: Placed[] = [];
  private readonly index: SpatialHash;

  constructor(
    private readonly cfg: GenerationKindTunables,
    private readonly maxSize: number,
  ) {
    this.index = new SpatialHash(cfg.maxSize * 2);
  }

  private reachOf(size: number): number {
    return size * Math.SQRT2 + this.cfg.gap;
  }

  tooClose(position: V3, spacing: number): boolean {
    return spacing > 0 && this.index.near(position, spacing).length > 0;
  }

  box(position: V3, frame: Frame, width: number, height: number): OrientedBox {
    return frameBox(position, frame, width, height, this.cfg.gap);
  }

  overlaps(position: V3, box: OrientedBox, size: number): boolean {
    const reach = (this.reachOf(size) + this.reachOf(Math.max(this.maxSize, size))) / 2 + 0.05;
    return this.index.near(position, reach).some((id) => boxesOverlap(box, this.placed[id]!.box));
  }

  add(entry: Placed): void {
    this.index.insert(this.placed.length, entry.position);
    this.placed.push(entry);
  }
}

/** Usable surface (for the first size and spacing): the facing test on a prefix of the samples. */
function initialSizing(probe: FrameProbe, samples: Sample[], surface: UprightSurface, referenceCount: number) {
  const probeCount = Math.min(samples.length, 256);
  let usable = 0;
  for (let i = 0; i < probeCount; i++) if (probe.facingAt(samples[i]!.point, samples[i]!.normal, samples[i]!.twoSided)) usable++;
  const usableArea = (surface.total * Math.max(usable, 1)) / probeCount;
  const perFrame = Math.sqrt(usableArea / referenceCount);
  const { cfg, ladder } = probe;
  let tier = ladder.findIndex((s) => s <= Math.min(cfg.maxSize, Math.max(cfg.minSize, 0.45 * perFrame)));
  if (tier < probe.firstIndex) tier = probe.firstIndex;
  if (tier < 0 || tier > probe.lastIndex) tier = probe.lastIndex;
  return { tier, perFrame };
}

/** Candidate lists in seeded order: rooms try eye-height rows first, then the raw samples. */
function candidateLists(samples: Sample[], kind: RoomKind): Candidate[][] {
  const make = (s: Sample, snapped: boolean): Candidate => ({
    sample: s.point,
    normal: s.normal,
    twoSided: s.twoSided,
    snapped,
    state: 0,
    anchor: s.point,
    frame: levelledFrame(s.normal),
    maxSizeIndex: 0,
    fits: new Map(),
    placed: false,
  });
  const byOrder = [...samples].sort((a, b) => a.order - b.order);
  const raw = byOrder.map((s) => make(s, false));
  if (kind !== 'room') return [raw];
  // Moved to eye height, samples 10 cm apart along a wall land on the same spot: keep one.
  const snapped: Candidate[] = [];
  const seen = new Set<string>();
  for (const s of byOrder) {
    const key = [s.point[0] * 10, s.point[2] * 10, s.normal[0] * 4, s.normal[2] * 4].map(Math.round).join(',');
    if (seen.has(key)) continue;
    seen.add(key);
    snapped.push(make(s, true));
  }
  return [snapped, raw];
}

/** One candidate at the current tier and spacing: placed (the largest size that fits) or not. */
function tryPlace(probe: FrameProbe, placement: Placement, c: Candidate, tier: number, spacing: number): boolean {
  if (c.placed || c.state === -1) return false;
  if (c.state === 0 && !probe.locate(c)) return false;
  const position = madd(c.anchor, c.frame.z, probe.tunables.wallOffset);
  if (placement.tooClose(position, spacing)) return false;
  if (c.state === 1 && !probe.measure(c)) return false;
  const first = Math.max(tier, c.maxSizeIndex);
  let tries = 0;
  for (let i = first; i <= probe.lastIndex && tries < 3; i++) {
    const size = probe.ladder[i]!;
    const box = placement.box(position, c.frame, size, size);
    if (placement.overlaps(position, box, size)) continue;
    tries++;
    const fit = probe.fitsCandidate(c, i);
    if (!fit.ok) continue;
    c.placed = true;
    placement.add({ position, frame: c.frame, width: size, height: size, box, front: fit.front });
    return true;
  }
  // Every size this candidate may still take has failed its fit: never look at it again.
  let exhausted = true;
  for (let i = first; i <= probe.lastIndex && exhausted; i++) exhausted = c.fits.get(i)?.ok === false;
  if (exhausted) c.state = -1;
  return false;
}

/** The pick sequence, until `wanted` more frames are placed (or nothing else fits). */
function selectFrames(
  probe: FrameProbe,
  placement: Placement,
  lists: Candidate[][],
  sizing: { tier: number; perFrame: number },
  wanted: number,
): Placed[] {
  const picks: Placed[] = [];
  if (wanted <= 0) return picks;
  const { gap } = probe.cfg;
  for (let tier = sizing.tier; tier <= probe.lastIndex; tier++) {
    const size = probe.ladder[tier]!;
    for (const list of lists) {
      let spacing = Math.max(size + gap, 0.6 * sizing.perFrame);
      for (;;) {
        for (const c of list) {
          if (!tryPlace(probe, placement, c, tier, spacing)) continue;
          picks.push(placement.placed[placement.placed.length - 1]!);
          if (picks.length >= wanted) return picks;
        }
        if (spacing === 0) break;
        spacing *= 0.7;
        if (spacing < size + gap) spacing = 0;
      }
    }
  }
  return picks;
}

// ---------------------------------------------------------------------------------------------
// Stable anchors: what the previous bake published

interface Kept {
  slot: RoomSlot;
  position: V3;
  frame: Frame;
  front: number;
  origin: 'kept' | 'reseated';
}

/**
 * Is a published anchor still valid on this model? On a surface within the re-seat tolerance,
 * upright, facing the room, resting flat with open space in front, not overlapping a kept one.
 */
function revalidate(probe: FrameProbe, placement: Placement, slot: RoomSlot): Kept | null {
  const { scene, cfg, tunables } = probe;
  const frame = frameOfQuaternion(slot.quaternion);
  const z = frame.z;
  if (Math.abs(z[1]) > cfg.wallSin) return null;
  const reach = tunables.reseatTolerance + tunables.wallOffset;
  const hit = scene.castFirst(madd(slot.position, z, reach), scale(z, -1), 2 * reach);
  if (!hit?.visible || dot(hit.normal, z) < 0.95) return null;
  const surface = madd(slot.position, z, reach - hit.distance);
  if (!probe.opensTowards(surface, z)) return null;
  const fit = probe.fits(surface, frame, slot.width, slot.height);
  if (!fit.ok) return null;
  const seated = madd(surface, z, tunables.wallOffset);
  const moved = distance(seated, slot.position) > 1e-4;
  const position = moved ? seated : ([...slot.position] as V3);
  if (placement.overlaps(position, placement.box(position, frame, slot.width, slot.height), Math.max(slot.width, slot.height))) return null;
  return { slot, position, frame, front: fit.front, origin: moved ? 'reseated' : 'kept' };
}

/** The previous anchors with index ≤ count that stay, by index; each is placed as an obstacle. */
function keepPrevious(probe: FrameProbe, placement: Placement, previous: PreviousAnchors, count: number): Map<number, Kept> {
  const kept = new Map<number, Kept>();
  const slots = previous.slots.filter((s) => s.source === 'generated' && s.index <= count).sort((a, b) => a.index - b.index);
  for (const slot of slots) {
    const frame = frameOfQuaternion(slot.quaternion);
    const entry: Kept | null = previous.sameModel
      ? { slot, position: [...slot.position] as V3, frame, front: slot.clearance?.front ?? Infinity, origin: 'kept' }
      : revalidate(probe, placement, slot);
    if (!entry) continue;
    kept.set(slot.index, entry);
    const box = placement.box(entry.position, frame, slot.width, slot.height);
    placement.add({ position: entry.position, frame, width: slot.width, height: slot.height, box, front: entry.front });
  }
  return kept;
}

// ---------------------------------------------------------------------------------------------

export function generateAnchors(scene: WorldScene, input: GenerateInput): GenerateResult {
  const { count, tunables } = input;
  const kind: RoomKind = input.interior.kind;
  const cfg = tunables[kind];
  if (count <= 0) return { anchors: [], shortfall: null, examined: 0 };
  const fail = (reason: string): GenerateResult => ({ anchors: [], shortfall: { expected: count, placed: 0, reason }, examined: 0 });
  if (scene.triangleCount === 0) return fail('the model has no triangles');
  const surface = uprightSurface(scene, cfg);
  if (!surface) return fail('no upright surfaces: every face is a floor, ceiling or underside');

  const probe = new FrameProbe(scene, kind, cfg, tunables);
  const placement = new Placement(cfg, Math.max(cfg.maxSize, ...(input.previous?.slots ?? []).map((s) => Math.max(s.width, s.height))));
  const kept = input.previous ? keepPrevious(probe, placement, input.previous, count) : new Map<number, Kept>();
  const free = Array.from({ length: count }, (_, i) => i + 1).filter((index) => !kept.has(index));

  const samples = sampleSurface(scene, surface, seededRandom(input.seed), tunables.samples);
  const sizing = initialSizing(probe, samples, surface, tunables.referenceCount);
  const picks = selectFrames(probe, placement, candidateLists(samples, kind), sizing, free.length);

  const reach = (front: number) => (Number.isFinite(front) ? front : scene.reach);
  const evidence =
    kind === 'room' ? 'generated: upright wall face seen from the room interior' : 'generated: sculpture surface facing outward';
  const anchors: GeneratedAnchor[] = [
    ...[...kept.entries()].map(
      ([index, k]): GeneratedAnchor => ({
        index,
        position: k.position,
        frame: k.frame,
        width: k.slot.width,
        height: k.slot.height,
        clearance: { front: reach(k.front), back: tunables.wallOffset },
        evidence:
          k.origin === 'kept'
            ? `${evidence}; kept from the previous bake`
            : `${evidence}; kept from the previous bake, re-seated on its moved surface`,
        origin: k.origin,
        previous: k.slot,
      }),
    ),
    ...picks.map(
      (pl, i): GeneratedAnchor => ({
        index: free[i]!,
        position: pl.position,
        frame: pl.frame,
        width: pl.width,
        height: pl.height,
        clearance: { front: reach(pl.front), back: tunables.wallOffset },
        evidence,
        origin: 'new',
      }),
    ),
  ].sort((a, b) => a.index - b.index);

  const shortfall =
    anchors.length < count
      ? {
          expected: count,
          placed: anchors.length,
          reason:
            `only ${anchors.length} non-overlapping frames of at least ${probe.minSize} m fit on ` +
            `${kind === 'room' ? 'upright wall surface facing the interior' : 'upright outward surface'} ` +
            `(${probe.examined} candidate spots examined)`,
        }
      : null;
  return { anchors, shortfall, examined: probe.examined };
}
