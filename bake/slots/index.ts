/**
 * The slot engine: one implementation of extract (authored Slot_NNN / Auto_NNN nodes), probe
 * (two-sided facing via a BVH) and generate (Auto_NNN anchors from the onchain count), used by the
 * bake and its tests.
 *
 *   scene.ts     world-space triangles (slot placeholders excluded) + the three-mesh-bvh BVH
 *   extract.ts   placeholder quads: ids, centre, authored normal, extents
 *   probe.ts     room / sculpture, two-sided probes, the facing evidence chain
 *   generate.ts  surface-sampled, non-overlapping Auto_NNN frames, stable across re-bakes
 *   embed.ts     the anchors as the optimized GLB's Slot_NNN / Auto_NNN node transforms
 *   changes.ts   what a re-bake did to the published anchors (kept / moved / added / removed)
 *   options.ts   the engine's tunables and their DEFAULTS
 *   algorithm.ts the revision (SLOT_ALGORITHM; the incremental key reads it without the engine)
 *   orient.ts    the levelled orientation rule
 *   spatial.ts   hash grid (neighbour queries) and the frame-overlap test
 *   plan.ts      the plan view drawn by the QA report (bake/report.ts)
 *
 * Positions are in the frame of the default scene (every node transform applied): the frame in
 * which the 3D client places the model. Generation is seeded by `${modelSha256}:${roomId}` (never N:
 * the first N picks do not depend on the total).
 * Everything is synchronous and holds no state between calls.
 */
import type { Document } from '@gltf-transform/core';
import type { RoomSlot, RoomSlotData, SlotShortfall } from '../../artifacts/format.ts';
import { slotId } from '../../artifacts/format.ts';
import { SLOT_ALGORITHM } from './algorithm.ts';
import { extractSlotQuads, type SlotQuad } from './extract.ts';
import { generateAnchors, type PreviousAnchors } from './generate.ts';
import { resolveTunables, type SlotEngineTunables } from './options.ts';
import { scale, type V3 } from '../../common/vec.ts';
import { levelledFrame, quaternionOfFrame, round, roundV, type Frame } from './orient.ts';
import { planFromScene, type RoomPlan } from './plan.ts';
import { analyseInterior, decideFacings, probeQuad, type Interior, type RoomKind } from './probe.ts';
import { buildWorldScene, type WorldScene } from './scene.ts';

export { SLOT_ALGORITHM } from './algorithm.ts';
export { embedAnchors } from './embed.ts';
export { compareSlots, type SlotChanges } from './changes.ts';
export type { RoomPlan } from './plan.ts';
export type { RoomKind } from './probe.ts';

export interface SlotEngineOptions {
  roomId: number;
  /** Onchain slot count N: how many anchors the room must offer. */
  onchainSlots: number;
  /** sha256 of the source model bytes; seeds generation so re-bakes give the same anchors. */
  modelSha256: string;
  /** Interior room or sculpture; detected from the geometry when omitted. */
  kind?: RoomKind;
  /**
   * The room's previously published slot data: its generated anchors that are still valid keep
   * their ids and poses (stable anchors); they stand unchecked when its `source_model` is this
   * model. Without it, the result depends on the model and N only.
   */
  previous?: RoomSlotData | null;
  /** Engine tunables; SLOT_ENGINE_DEFAULTS for what is not given. */
  tunables?: SlotEngineTunables;
  /** Draw the plan view for the QA report (default true; it never changes the anchors). */
  plan?: boolean;
}

export interface SlotEngineResult {
  slots: RoomSlot[];
  warnings: string[];
  shortfall: SlotShortfall | null;
  kind: RoomKind;
  /** How the kind was decided (given, or the interior-point measure). */
  kindEvidence?: string;
  /** Plan view of the geometry, for the QA report. */
  plan?: RoomPlan;
}

function slotRecord(
  base: { id: string; index: number; source: 'authored' | 'generated' },
  position: V3,
  frame: Frame,
  size: { width: number; height: number },
  facts: { flipped: boolean; ambiguous: boolean; clearance: { front: number; back: number }; evidence: string },
): RoomSlot {
  return {
    id: base.id,
    index: base.index,
    source: base.source,
    position: roundV(position, 4) as V3,
    quaternion: roundV(quaternionOfFrame(frame), 6) as [number, number, number, number],
    width: round(size.width, 4),
    height: round(size.height, 4),
    facing: roundV(frame.z, 6) as V3,
    flipped: facts.flipped,
    ambiguous: facts.ambiguous,
    clearance: { front: round(facts.clearance.front, 3), back: round(facts.clearance.back, 3) },
    evidence: facts.evidence,
  };
}

/** Authored (or previously embedded) placeholders: probed, facing decided, as records. */
function authoredSlots(scene: WorldScene, quads: SlotQuad[], interior: Interior, warnings: string[]): RoomSlot[] {
  const probes = quads.map((q) => probeQuad(scene, q));
  const decisions = decideFacings(quads, probes, interior);
  return quads.map((quad, i) => {
    const decision = decisions[i]!;
    const probe = probes[i]!;
    const frame = levelledFrame(scale(quad.normal, decision.sign));
    const [front, back] = decision.sign === 1 ? [probe.plus, probe.minus] : [probe.minus, probe.plus];
    // Behind a mounted frame the open distance is the gap to its wall, whatever lies beyond.
    const mount = decision.sign === 1 ? probe.mount.plus : probe.mount.minus;
    if (decision.ambiguous) warnings.push(`${quad.id}: ${decision.evidence}`);
    return slotRecord(quad, quad.center, frame, quad, {
      flipped: decision.sign === -1,
      ambiguous: decision.ambiguous,
      clearance: { front: front.clearance, back: Math.min(back.clearance, mount) },
      evidence: decision.evidence,
    });
  });
}

/** The previous bake's generated anchors, when it published any for this room. */
function previousAnchors(options: SlotEngineOptions): PreviousAnchors | null {
  const previous = options.previous;
  const slots = previous?.slots.filter((s) => s.source === 'generated') ?? [];
  // Computed by this algorithm on this model: nothing to re-check. Another algorithm revision (or
  // model) re-validates every anchor against today's rules, keeping the ids of those that pass.
  const sameModel = previous?.source_model === options.modelSha256 && previous?.algorithm === SLOT_ALGORITHM;
  return previous && slots.length ? { slots, sameModel } : null;
}

/** N generated anchors (Auto_NNN), stable against the previous bake. */
function generatedSlots(scene: WorldScene, interior: Interior, options: SlotEngineOptions, tunables: ReturnType<typeof resolveTunables>) {
  const published = previousAnchors(options);
  const generated = generateAnchors(scene, {
    count: options.onchainSlots,
    seed: `${options.modelSha256}:${options.roomId}`,
    interior,
    tunables,
    previous: published,
  });
  const slots = generated.anchors.map((anchor) => {
    const record = slotRecord(
      { id: slotId('Auto', anchor.index), index: anchor.index, source: 'generated' },
      anchor.position,
      anchor.frame,
      anchor,
      {
        flipped: false,
        ambiguous: false,
        clearance: anchor.clearance,
        evidence: anchor.evidence,
      },
    );
    // A kept anchor keeps its published pose to the digit (a re-seated one its orientation).
    const previous = anchor.previous;
    if (!previous) return record;
    // Same model: the published record stands as it is (nothing it says can have changed).
    if (anchor.origin === 'kept' && published?.sameModel) return previous;
    const pose = { quaternion: previous.quaternion, facing: previous.facing, width: previous.width, height: previous.height };
    return anchor.origin === 'kept' ? { ...record, position: previous.position, ...pose } : { ...record, ...pose };
  });
  return { slots, shortfall: generated.shortfall };
}

/** Anchors of a model: its placeholders (probed), or N generated ones when it has none. */
export function computeSlots(document: Document, options: SlotEngineOptions): SlotEngineResult {
  const tunables = resolveTunables(options.tunables);
  const scene = buildWorldScene(document);
  const { quads, warnings } = extractSlotQuads(document);
  // Left out so that bounds, the room/sculpture decision and every ray stay finite.
  if (scene.dropped) warnings.unshift(`${scene.dropped} room triangle(s) with non-finite vertex positions were ignored`);
  const interior = analyseInterior(scene, options.kind);
  const plan = options.plan === false ? undefined : planFromScene(scene);
  const n = options.onchainSlots;
  if (!quads.length) {
    const { slots, shortfall } = generatedSlots(scene, interior, options, tunables);
    return { slots, warnings, shortfall, kind: interior.kind, kindEvidence: interior.evidence, plan };
  }
  const slots = authoredSlots(scene, quads, interior, warnings);
  let shortfall: SlotShortfall | null = null;
  if (slots.length < n) {
    shortfall = { expected: n, placed: slots.length, reason: `the model has ${slots.length} slot placeholders for ${n} onchain slots` };
  } else if (slots.length > n) {
    warnings.push(`the model has ${slots.length} slot placeholders but the onchain count is ${n}`);
  }
  return { slots, warnings, shortfall, kind: interior.kind, kindEvidence: interior.evidence, plan };
}
