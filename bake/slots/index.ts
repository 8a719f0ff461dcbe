/**
 * The slot engine: one implementation of extract (authored Slot_NNN / Auto_NNN nodes), probe
 * (two-sided facing via a BVH) and generate (Auto_NNN anchors from the onchain count), used by the
 * bake and its tests.
 *
 *   scene.ts     world-space triangles (slot placeholders excluded) + the three-mesh-bvh BVH
 *   extract.ts   placeholder quads: ids, centre, authored normal, extents
 *   probe.ts     room / sculpture, two-sided probes, the facing evidence chain
 *   generate.ts  surface-sampled, non-overlapping Auto_NNN frames
 *   orient.ts    vectors and the levelled orientation rule
 *   spatial.ts   hash grid (neighbour queries) and the frame-overlap test
 *   plan.ts      the plan view drawn by the QA report (bake/report.ts)
 *
 * Positions are in the frame of the default scene (every node transform applied): the frame in
 * which the 3D client places the model. Generation is seeded by `${modelSha256}:${N}:${roomId}`.
 * Everything is synchronous and holds no state between calls.
 */
import type { Document, Material, Node } from '@gltf-transform/core';
import type { RoomSlot, SlotShortfall } from '../../artifacts/format.ts';
import { SLOT_MATERIAL_NAME } from '../sample/room-builder.ts';
import { extractSlotQuads, slotId, type SlotQuad } from './extract.ts';
import { generateAnchors } from './generate.ts';
import { levelledFrame, quaternionOfFrame, round, roundV, scale, type Frame, type V3 } from './orient.ts';
import { planFromScene, type RoomPlan } from './plan.ts';
import { analyseInterior, decideFacings, probeQuad, type RoomKind } from './probe.ts';
import { buildWorldScene, isSlotMaterialName, sceneOf } from './scene.ts';

export { isSlotNode, isSlotMaterialName, SLOT_NAME_PATTERN } from './scene.ts';
export { planOf, type RoomPlan } from './plan.ts';
export type { RoomKind } from './probe.ts';

/**
 * Names the slot algorithm revision; change it whenever the output of the engine can change.
 * (Part of the bake's incremental key: a new revision re-bakes every room.)
 */
export const SLOT_ALGORITHM = 'slot-engine-1';

export interface SlotEngineOptions {
  roomId: number;
  /** Onchain slot count N: how many anchors the room must offer. */
  onchainSlots: number;
  /** sha256 of the source model bytes; seeds generation so re-bakes give the same anchors. */
  modelSha256: string;
  /** Interior room or sculpture; detected from the geometry when omitted. */
  kind?: RoomKind;
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

/** Anchors of a model: its placeholders (probed), or N generated ones when it has none. */
export function computeSlots(document: Document, options: SlotEngineOptions): SlotEngineResult {
  const scene = buildWorldScene(document);
  const { quads, warnings } = extractSlotQuads(document);
  const interior = analyseInterior(scene, options.kind);
  const plan = planFromScene(scene);
  const n = options.onchainSlots;
  let slots: RoomSlot[];
  let shortfall: SlotShortfall | null = null;

  if (quads.length) {
    const probes = quads.map((q: SlotQuad) => probeQuad(scene, q));
    const decisions = decideFacings(quads, probes, interior);
    slots = quads.map((quad, i) => {
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
    if (slots.length < n) {
      shortfall = { expected: n, placed: slots.length, reason: `the model has ${slots.length} slot placeholders for ${n} onchain slots` };
    } else if (slots.length > n) {
      warnings.push(`the model has ${slots.length} slot placeholders but the onchain count is ${n}`);
    }
  } else {
    const generated = generateAnchors(scene, { count: n, seed: `${options.modelSha256}:${n}:${options.roomId}`, interior });
    shortfall = generated.shortfall;
    slots = generated.anchors.map((anchor, i) =>
      slotRecord({ id: slotId('Auto', i + 1), index: i + 1, source: 'generated' }, anchor.position, anchor.frame, anchor, {
        flipped: false,
        ambiguous: false,
        clearance: anchor.clearance,
        evidence: anchor.evidence,
      }),
    );
  }
  return { slots, warnings, shortfall, kind: interior.kind, kindEvidence: interior.evidence, plan };
}

/** Name of the unit quad mesh every embedded `Auto_NNN` node instances. */
export const AUTO_QUAD_MESH_NAME = 'Auto Slot Quad';

/**
 * Embed generated anchors as `Auto_NNN` placeholder nodes (material `Slot Placeholder`), children
 * of the default scene, so the optimized GLB carries the same ids and frames. Every node instances
 * one shared 1 × 1 quad mesh, its frame given by the node's TRS (scale = width, height): a node
 * costs a line of JSON instead of a mesh of its own, and extraction reads the same centre, normal
 * and world-space extents back. Re-embedding replaces nodes of the same name.
 */
export function embedGeneratedSlots(document: Document, slots: RoomSlot[]): void {
  const generated = slots.filter((s) => s.source === 'generated');
  if (!generated.length) return;
  const root = document.getRoot();
  let scene = sceneOf(document);
  if (!scene) {
    scene = document.createScene('Scene');
    root.setDefaultScene(scene);
  }
  const ids = new Set(generated.map((s) => s.id));
  for (const old of root.listNodes().filter((n) => ids.has(n.getName()))) {
    const mesh = old.getMesh();
    old.dispose();
    if (mesh && mesh.getName() !== AUTO_QUAD_MESH_NAME && mesh.listParents().every((p) => p === root)) mesh.dispose();
  }
  const quad = root.listMeshes().find((m) => m.getName() === AUTO_QUAD_MESH_NAME) ?? createUnitQuad(document);
  for (const slot of generated) {
    const node = document
      .createNode(slot.id)
      .setMesh(quad)
      .setTranslation([...slot.position])
      .setRotation([...slot.quaternion])
      .setScale([slot.width, slot.height, 1]);
    scene.addChild(node);
  }
}

/** A 1 × 1 quad in the XY plane facing +Z, with the `Slot Placeholder` material. */
function createUnitQuad(document: Document) {
  const root = document.getRoot();
  const material: Material =
    root.listMaterials().find((m) => isSlotMaterialName(m.getName())) ??
    document.createMaterial(SLOT_MATERIAL_NAME).setBaseColorFactor([1, 0, 1, 1]).setDoubleSided(true);
  const buffer = root.listBuffers()[0] ?? document.createBuffer();
  const accessor = (type: 'VEC2' | 'VEC3' | 'SCALAR', array: Float32Array | Uint16Array) =>
    document.createAccessor().setType(type).setArray(array).setBuffer(buffer);
  const primitive = document
    .createPrimitive()
    .setAttribute('POSITION', accessor('VEC3', new Float32Array([-0.5, -0.5, 0, 0.5, -0.5, 0, 0.5, 0.5, 0, -0.5, 0.5, 0])))
    .setAttribute('NORMAL', accessor('VEC3', new Float32Array([0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1])))
    .setAttribute('TEXCOORD_0', accessor('VEC2', new Float32Array([0, 1, 1, 1, 1, 0, 0, 0])))
    .setIndices(accessor('SCALAR', new Uint16Array([0, 1, 2, 0, 2, 3])))
    .setMaterial(material);
  return document.createMesh(AUTO_QUAD_MESH_NAME).addPrimitive(primitive);
}
