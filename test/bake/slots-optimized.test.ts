/**
 * Anchors computed from the optimized GLB equal those from the source, within 1 mm and 0.5°:
 * the bake's own optimizer steps (dedup, palette, join-except-slots, weld, prune, WebP, Draco),
 * generated Auto_NNN quads embedded like the bake does, written as GLB, read back, recomputed.
 */
import { Logger, type Document } from '@gltf-transform/core';
import { describe, expect, it } from 'vitest';
import type { RoomSlot } from '../../artifacts/format.ts';
import { readModel, writeGlb } from '../../bake/gltf-io.ts';
import { optimizeSteps } from '../../bake/optimize.ts';
import { computeSlots, embedAnchors } from '../../bake/slots/index.ts';
import { angleBetween, rotate } from './rooms/geometry.ts';
import { randomRoom, randomSculpture } from './rooms/random.ts';
import { corridor, gallery, partition, pillar, rotatedScaledGallery, sculpture } from './rooms/truth.ts';

const SHA = '7'.repeat(64);

async function optimizedRoundTrip(build: () => Document, onchainSlots: number) {
  const options = { roomId: 21, onchainSlots, modelSha256: SHA };
  const source = computeSlots(build(), options);
  const document = build();
  document.setLogger(new Logger(Logger.Verbosity.SILENT));
  for (const step of optimizeSteps()) await document.transform(step.transform);
  embedAnchors(document, source.slots);
  const glb = await writeGlb(document);
  const optimized = await readModel(glb);
  return { source, optimized, again: computeSlots(optimized, options) };
}

function expectSameAnchors(a: RoomSlot[], b: RoomSlot[]): void {
  expect(b.map((s) => s.id)).toEqual(a.map((s) => s.id));
  a.forEach((s, i) => {
    const o = b[i]!;
    expect(Math.hypot(...s.position.map((v, k) => v - o.position[k]!)), `${s.id} position`).toBeLessThan(1e-3);
    expect(angleBetween(s.facing, o.facing), `${s.id} facing`).toBeLessThan(0.5);
    for (const axis of [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ] as Array<[number, number, number]>) {
      expect(angleBetween(rotate(s.quaternion, axis), rotate(o.quaternion, axis)), `${s.id} orientation`).toBeLessThan(0.5);
    }
    expect(Math.abs(s.width - o.width), `${s.id} width`).toBeLessThan(1e-3);
    expect(Math.abs(s.height - o.height), `${s.id} height`).toBeLessThan(1e-3);
    // The optimized node faces its resolved facing: nothing is left to flip.
    expect([o.source, o.flipped], s.id).toEqual([s.source, false]);
  });
}

describe('slot engine: anchors survive the bake optimizer (Draco)', () => {
  const authored: Array<[string, () => Document, number]> = [
    ['gallery (single-sided and thick walls, flipped normals)', () => gallery().document, 8],
    ['rotated, scaled root', () => rotatedScaledGallery().document, 8],
    ['zero-thickness partition', () => partition().document, 5],
    ['pillar (slots sunk into a wall)', () => pillar().document, 6],
    ['corridor with doorways', () => corridor().document, 4],
    ['sculpture', () => sculpture().document, 4],
  ];
  it.each(authored)('authored: %s', async (_name, build, n) => {
    const { source, optimized, again } = await optimizedRoundTrip(build, n);
    expect(
      optimized
        .getRoot()
        .listExtensionsUsed()
        .map((e) => e.extensionName),
    ).toContain('KHR_draco_mesh_compression');
    expect(source.slots.every((s) => s.source === 'authored')).toBe(true);
    expectSameAnchors(source.slots, again.slots);
  });

  const generated: Array<[string, () => Document, number]> = [
    ['random room 1', () => randomRoom(1).document, 30],
    ['random room 6 (rotated root)', () => randomRoom(6).document, 12],
    ['random sculpture 2', () => randomSculpture(2).document, 6],
  ];
  it.each(generated)('generated: %s', async (_name, build, n) => {
    const { source, optimized, again } = await optimizedRoundTrip(build, n);
    expect(source.slots).toHaveLength(n);
    expect(source.slots.every((s) => s.source === 'generated')).toBe(true);
    const embedded = optimized
      .getRoot()
      .listNodes()
      .filter((node) => node.getName().startsWith('Auto_'));
    expect(embedded.map((node) => node.getName()).sort()).toEqual(source.slots.map((s) => s.id));
    expect(embedded.every((node) => node.getMesh()!.listPrimitives()[0]!.getMaterial()!.getName() === 'Slot Placeholder')).toBe(true);
    // One shared quad per frame size, each frame in its node's TRS (a line of JSON a slot, not a mesh each).
    expect(new Set(embedded.map((node) => node.getMesh())).size).toBe(new Set(source.slots.map((s) => s.width)).size);
    expect(embedded.every((node) => node.getScale().every((v) => v === 1))).toBe(true);
    expect(again.shortfall).toBeNull();
    expectSameAnchors(source.slots, again.slots);
  });
});
