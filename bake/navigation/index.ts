/**
 * The room's walkable rooms step (decisions.md "Walkable rooms"): navmesh GLB, spawn and every
 * slot's view. A navmesh that cannot be built leaves the room's other artifacts as they are:
 * navmesh null, views null, the reason in the warnings.
 */
import type { Document } from '@gltf-transform/core';
import type { Vec3 } from '../../artifacts/navmesh.ts';
import type { FileRef, RoomSlot } from '../../artifacts/format.ts';
import { putContentFile } from '../../artifacts/store.ts';
import { buildWorldScene } from '../slots/scene.ts';
import { navMeshGlb } from './glb.ts';
import { bakeWalkableFloor } from './navmesh.ts';
import { viewFor } from './views.ts';

export interface RoomNavigation {
  navmesh: FileRef | null;
  spawn: Vec3 | null;
  /** The slots with their `view` set (null when there is no floor). */
  slots: RoomSlot[];
  warnings: string[];
  /** The kept floor's triangles, for the QA plan picture. */
  floor: { positions: Float32Array; indices: Uint32Array } | null;
}

const SPAWN_NODE = /^(spawn|entrance)$/i;

/** World position of an authored `Spawn` / `Entrance` node, if the model has one. */
function authoredSpawn(document: Document): Vec3 | null {
  const node = document
    .getRoot()
    .listNodes()
    .find((n) => SPAWN_NODE.test(n.getName().trim()));
  return node ? (node.getWorldTranslation() as Vec3) : null;
}

export async function bakeRoomNavigation(document: Document, slots: RoomSlot[], dataDir: string): Promise<RoomNavigation> {
  const none = (warnings: string[]): RoomNavigation => ({
    navmesh: null,
    spawn: null,
    slots: slots.map((s) => ({ ...s, view: null })),
    warnings,
    floor: null,
  });
  const scene = buildWorldScene(document);
  const floor = await bakeWalkableFloor(scene, authoredSpawn(document)).catch((error: unknown) =>
    error instanceof Error ? error : new Error(String(error)),
  );
  if (floor instanceof Error) return none([`navmesh: not built (${floor.message})`]);
  if (!('spawn' in floor)) return none(floor.warnings);
  try {
    const withViews = slots.map((s) => ({ ...s, view: viewFor(s as never, floor.navigation, scene) }));
    const missing = withViews.filter((s) => s.view === null).map((s) => s.id);
    const warnings = [...floor.warnings];
    if (missing.length) warnings.push(`navmesh: no view within 8 m for ${missing.join(', ')}`);
    const navmesh = await putContentFile(dataDir, await navMeshGlb(floor.positions, floor.indices), 'glb');
    return { navmesh, spawn: floor.spawn, slots: withViews, warnings, floor: { positions: floor.positions, indices: floor.indices } };
  } finally {
    floor.navigation.destroy();
  }
}
