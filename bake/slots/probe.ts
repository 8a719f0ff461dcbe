/**
 * Probe: what is on each side of a slot, and which way it faces.
 *
 * Room or sculpture (when not given): rays from a 5×5×5 grid of points inside the model bounds.
 * A point is "interior" when at most half of its rays escape and at least 60% of the surfaces
 * they hit are seen from the front (an interior point of a room sees the room's faces; a point
 * inside a sculpture's solid sees back faces, one outside it mostly escapes). The model is a
 * room when at least 25% of the points are interior. Double-sided blocky sculptures can look
 * like rooms: pass `kind` for those.
 *
 * Facing of an authored slot: 3×3 points across the frame, from each 5 rays (normal, and tilted
 * 30° towards each edge) on each side. A ray whose first hit is a back face within 2.5 cm steps
 * through it (the slot is sunk into its wall, or sits just behind a single-sided one) and is
 * measured from there. Evidence, strongest first:
 *   1. one side closed (most rays blocked within 10 cm), the other open → the open side;
 *   2. connectivity: the side whose rays reach visible room faces (rooms — escaping to infinity
 *      means outside) or escape / see the sculpture from outside (sculptures), by a clear margin;
 *   3. the face the slot is mounted on (surfaces within 2.5 cm of its plane, by their winding);
 *   4. relative clearance: one side at least 3× more open and the smaller under the frame size;
 *   5. neighbours on the same wall plane (same authored orientation) decided by 1–4: flip or not,
 *      by a clear weighted majority, and not on a two-faced partition (they may hang on the
 *      other face);
 *   6. both sides open and nothing against it → the authored normal stands;
 *   7. ambiguous: into the room interior (rooms) or outward (sculptures).
 */
import { add, dot, madd, normalize, scale, sub, type V3 } from '../../common/vec.ts';
import { levelledFrame } from './orient.ts';
import type { SlotQuad } from './extract.ts';
import type { WorldScene } from './scene.ts';
import { SpatialHash } from './spatial.ts';

export type RoomKind = 'room' | 'sculpture';

export interface Interior {
  kind: RoomKind;
  /** Mean of the interior grid points (rooms), the centre of the bounds otherwise. */
  centre: V3;
  /** Fraction of grid points found inside a room. */
  interiorFraction: number;
  evidence: string;
}

/** Deterministic, roughly uniform unit directions (Fibonacci sphere). */
function sphereDirections(count: number): V3[] {
  const out: V3[] = [];
  const golden = Math.PI * (3 - Math.sqrt(5));
  for (let i = 0; i < count; i++) {
    const y = 1 - (2 * (i + 0.5)) / count;
    const r = Math.sqrt(1 - y * y);
    const a = golden * i;
    out.push([Math.cos(a) * r, y, Math.sin(a) * r]);
  }
  return out;
}

const GRID = 5;
const INTERIOR_DIRECTIONS = sphereDirections(48);
const ROOM_INTERIOR_FRACTION = 0.25;

export function analyseInterior(scene: WorldScene, kind?: RoomKind): Interior {
  const { min, max } = scene.bounds;
  const centre: V3 = [(min[0] + max[0]) / 2, (min[1] + max[1]) / 2, (min[2] + max[2]) / 2];
  if (scene.triangleCount === 0) return { kind: kind ?? 'room', centre, interiorFraction: 0, evidence: 'no geometry' };
  const interior: V3[] = [];
  for (let i = 0; i < GRID; i++) {
    for (let j = 0; j < GRID; j++) {
      for (let k = 0; k < GRID; k++) {
        const p: V3 = [
          min[0] + ((i + 0.5) / GRID) * (max[0] - min[0]),
          min[1] + ((j + 0.5) / GRID) * (max[1] - min[1]),
          min[2] + ((k + 0.5) / GRID) * (max[2] - min[2]),
        ];
        let escaped = 0;
        let visible = 0;
        let hidden = 0;
        for (const d of INTERIOR_DIRECTIONS) {
          const hit = scene.castFirst(p, d);
          if (!hit) escaped++;
          else if (hit.visible) visible++;
          else hidden++;
        }
        if (escaped <= INTERIOR_DIRECTIONS.length / 2 && visible >= 0.6 * (visible + hidden)) interior.push(p);
      }
    }
  }
  const fraction = interior.length / GRID ** 3;
  const detected: RoomKind = fraction >= ROOM_INTERIOR_FRACTION ? 'room' : 'sculpture';
  const chosen = kind ?? detected;
  const interiorCentre: V3 = interior.length
    ? scale(
        interior.reduce((s, p) => add(s, p), [0, 0, 0] as V3),
        1 / interior.length,
      )
    : centre;
  const evidence = kind
    ? `kind given as ${kind} (geometry suggests ${detected}: ${Math.round(fraction * 100)}% interior points)`
    : `detected ${detected}: ${Math.round(fraction * 100)}% of grid points are inside a room (threshold ${ROOM_INTERIOR_FRACTION * 100}%)`;
  return { kind: chosen, centre: chosen === 'room' ? interiorCentre : centre, interiorFraction: fraction, evidence };
}

interface SideProbe {
  /** Median open distance perpendicular to the slot (escaping rays count as the model's reach). */
  clearance: number;
  /** Fraction of rays blocked within CLOSE_DISTANCE. */
  near: number;
  /** Fraction of rays that leave the model without hitting anything. */
  escape: number;
  /** Fraction of rays whose first hit is a visible face. */
  visible: number;
}

export interface SlotProbe {
  /** Along the authored normal. */
  plus: SideProbe;
  /** Against the authored normal. */
  minus: SideProbe;
  /** Faces within the contact band: +1 all face along the normal, −1 all against, 0 balanced. */
  contact: number;
  /** The slot sits on a surface with faces both ways (a zero-thickness partition). */
  twoFaced: boolean;
  /**
   * Gap between the slot and the face it hangs on (a parallel face within the contact band that
   * faces the same way), were it to face along (plus) or against (minus) its authored normal;
   * 0 when sunk into it, Infinity when there is none.
   */
  mount: { plus: number; minus: number };
}

const ORIGIN_OFFSET = 0.002;
const CLOSE_DISTANCE = 0.1;
const CONTACT_BAND = 0.025;
const GRID_FRACTIONS = [-0.35, 0, 0.35];
const TILT = Math.PI / 6;

const median = (values: number[]): number => {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Probe both sides of a quad and the surfaces it rests on. */
export function probeQuad(scene: WorldScene, quad: SlotQuad): SlotProbe {
  const frame = levelledFrame(quad.normal);
  const n = frame.z;
  const points: V3[] = [];
  for (const fy of GRID_FRACTIONS)
    for (const fx of GRID_FRACTIONS) {
      points.push(add(add(quad.center, scale(frame.x, fx * quad.width)), scale(frame.y, fy * quad.height)));
    }
  const side = (sign: 1 | -1): SideProbe => {
    const axis = scale(n, sign);
    const dirs: V3[] = [axis];
    for (const t of [frame.x, scale(frame.x, -1), frame.y, scale(frame.y, -1)] as V3[]) {
      dirs.push(normalize(add(scale(axis, Math.cos(TILT)), scale(t, Math.sin(TILT)))));
    }
    const distances: number[] = [];
    let near = 0;
    let escaped = 0;
    let visible = 0;
    for (const p of points) {
      const origin = madd(p, axis, ORIGIN_OFFSET);
      for (const d of dirs) {
        const cos = dot(d, axis);
        let hit = scene.castFirst(origin, d);
        // A back face right away: the slot is sunk into the surface it hangs on (or sits just
        // behind a single-sided wall). Step out of it and look on from there.
        let skipped = 0;
        if (hit && !hit.visible && hit.distance * cos < CONTACT_BAND) {
          skipped = hit.distance + 1e-4;
          hit = scene.castFirst(madd(origin, d, skipped), d);
        }
        // An escaping ray is as open as the model is large, however close the bounds are.
        const perpendicular = hit ? (skipped + hit.distance) * cos + ORIGIN_OFFSET : scene.reach;
        distances.push(perpendicular);
        if (perpendicular < CLOSE_DISTANCE) near++;
        if (!hit) escaped++;
        else if (hit.visible) visible++;
      }
    }
    const total = distances.length;
    return { clearance: median(distances), near: near / total, escape: escaped / total, visible: visible / total };
  };
  let contact = 0;
  let twoFaced = 0;
  const mount = { plus: Infinity, minus: Infinity };
  for (const p of points) {
    let along = 0;
    let against = 0;
    for (const hit of scene.castAll(madd(p, n, CONTACT_BAND), scale(n, -1), 2 * CONTACT_BAND)) {
      const c = dot(hit.normal, n);
      if (Math.abs(c) <= 0.9) continue;
      if (c > 0) along++;
      else against++;
      // The face a slot facing +n hangs on faces +n too: a gap behind it when the face lies
      // behind the slot, none when the slot is sunk into it.
      const offset = CONTACT_BAND - hit.distance; // signed, along the authored normal
      if (c > 0) mount.plus = Math.min(mount.plus, Math.max(0, -offset));
      else mount.minus = Math.min(mount.minus, Math.max(0, offset));
    }
    contact += Math.sign(along - against);
    if (along && against) twoFaced++;
  }
  return { plus: side(1), minus: side(-1), contact: contact / points.length, twoFaced: twoFaced * 2 > points.length, mount };
}

export interface FacingDecision {
  /** +1: facing = authored normal; −1: flipped. */
  sign: 1 | -1;
  ambiguous: boolean;
  /** Step of the evidence chain that decided (1–7, see the module comment). */
  step: number;
  evidence: string;
}

/** Steps 1–4: geometric evidence of this slot alone; null when it cannot decide. */
function decideFromProbe(quad: SlotQuad, probe: SlotProbe, kind: RoomKind): FacingDecision | null {
  const { plus, minus } = probe;
  const closed = (s: SideProbe) => s.near >= 0.5;
  const open = (s: SideProbe) => s.near < 0.25;
  if (open(plus) && closed(minus)) return { sign: 1, ambiguous: false, step: 1, evidence: 'probe: the back is closed, the front open' };
  if (open(minus) && closed(plus))
    return { sign: -1, ambiguous: false, step: 1, evidence: 'probe: the authored front is closed, the back open' };

  const connected = (s: SideProbe) => (kind === 'room' ? s.visible : s.escape + s.visible);
  const cPlus = connected(plus);
  const cMinus = connected(minus);
  if (Math.abs(cPlus - cMinus) >= 0.4 && Math.max(cPlus, cMinus) >= 0.5) {
    const sign = cPlus > cMinus ? 1 : -1;
    const what =
      kind === 'room'
        ? 'reaches the room interior; the other side sees outside or back faces'
        : 'opens to the outside; the other side is inside the solid';
    return { sign, ambiguous: false, step: 2, evidence: `connectivity: the ${sign === 1 ? 'authored front' : 'back'} ${what}` };
  }

  if (Math.abs(probe.contact) >= 0.5) {
    const sign = probe.contact > 0 ? 1 : -1;
    return {
      sign,
      ambiguous: false,
      step: 3,
      evidence: `mounting face: the surface under the slot faces ${sign === 1 ? 'along' : 'against'} the authored normal`,
    };
  }

  const size = Math.max(quad.width, quad.height);
  const small = Math.min(plus.clearance, minus.clearance);
  const big = Math.max(plus.clearance, minus.clearance);
  if (small < size && big >= 3 * small) {
    const sign = plus.clearance > minus.clearance ? 1 : -1;
    return { sign, ambiguous: false, step: 4, evidence: `relative clearance: ${big.toFixed(2)} m against ${small.toFixed(2)} m` };
  }
  return null;
}

const SAME_PLANE_DISTANCE = 0.03;
const SAME_PLANE_COS = 0.99;
const NEIGHBOUR_REACH = 4;

/**
 * Decide every slot: geometric evidence first, then neighbours on the same wall plane, then the
 * authored normal when both sides are open, then the tie-break.
 */
export function decideFacings(quads: SlotQuad[], probes: SlotProbe[], interior: { kind: RoomKind; centre: V3 }): FacingDecision[] {
  const decisions = quads.map((q, i) => decideFromProbe(q, probes[i]!, interior.kind));
  const index = new SpatialHash(NEIGHBOUR_REACH);
  quads.forEach((q, i) => {
    if (decisions[i]) index.insert(i, q.center);
  });
  return quads.map((quad, i): FacingDecision => {
    const own = decisions[i];
    if (own) return own;
    const probe = probes[i]!;
    // Step 5: neighbours with the same authored orientation on the same plane vote "flip or not"
    // — unless the plane is a two-faced partition, whose neighbours may hang on the other face.
    const frame = levelledFrame(quad.normal);
    let vote = 0;
    let weight = 0;
    for (const j of probe.twoFaced ? [] : index.near(quad.center, NEIGHBOUR_REACH)) {
      const other = quads[j]!;
      if (dot(other.normal, quad.normal) < SAME_PLANE_COS) continue;
      const offset = sub(other.center, quad.center);
      if (Math.abs(dot(offset, quad.normal)) > SAME_PLANE_DISTANCE) continue;
      const dx = Math.abs(dot(offset, frame.x));
      const dy = Math.abs(dot(offset, frame.y));
      if (dx < (quad.width + other.width) / 2 && dy < (quad.height + other.height) / 2) continue; // overlapping: not the same face
      const w = 1 / Math.max(0.1, Math.hypot(dx, dy));
      vote += decisions[j]!.sign * w;
      weight += w;
    }
    // A clear majority only: a tie must not be settled by rounding.
    if (weight > 0 && Math.abs(vote) >= 0.25 * weight) {
      const sign = vote > 0 ? 1 : -1;
      return { sign, ambiguous: false, step: 5, evidence: `neighbours on the same wall plane were ${sign === 1 ? 'kept' : 'flipped'}` };
    }
    if (probe.plus.near < 0.25 && probe.minus.near < 0.25) {
      return { sign: 1, ambiguous: false, step: 6, evidence: 'both sides open and no evidence against the authored normal' };
    }
    const towards = interior.kind === 'room' ? sub(interior.centre, quad.center) : sub(quad.center, interior.centre);
    const t = dot(towards, quad.normal);
    const sign = t < -1e-3 ? -1 : 1;
    const why = probe.plus.near >= 0.5 && probe.minus.near >= 0.5 ? 'both sides closed' : 'no side clearly open';
    return {
      sign,
      ambiguous: true,
      step: 7,
      evidence: `ambiguous (${why}): tie-break ${interior.kind === 'room' ? 'into the room interior' : 'outward from the sculpture'}`,
    };
  });
}
