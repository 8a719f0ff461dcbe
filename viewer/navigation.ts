/**
 * The walkable floor of the room on stage, for walk mode: the baked navmesh (Room `navmesh_url`)
 * when the room has one, else one built in the page from the model's visible geometry with the
 * bake's agent (decisions.md "Walkable rooms"), until every room is baked with its navmesh.
 */
import type { Mesh, Object3D } from 'three';
import { Vector3 } from 'three';
import {
  generateSoloNavMesh,
  initNavigation,
  loadNavigationGlb,
  NAVMESH_AGENT,
  type Navigation,
  navigationOf,
  recastConfig,
} from '../artifacts/navmesh.ts';

type FloorSource = 'baked' | 'page';

export interface WalkableFloor {
  navigation: Navigation;
  /** Where the navmesh came from: the bake's file, or built from the model in this page. */
  source: FloorSource;
}

/** The model's visible triangles in the room frame (the model sits at the scene's origin). */
function modelTriangles(model: Object3D): { positions: number[]; indices: number[] } {
  const positions: number[] = [];
  const indices: number[] = [];
  const v = new Vector3();
  model.updateMatrixWorld(true);
  model.traverseVisible((o) => {
    const mesh = o as Mesh;
    if (!mesh.isMesh || !mesh.geometry.attributes.position) return;
    const pos = mesh.geometry.attributes.position;
    const base = positions.length / 3;
    for (let i = 0; i < pos.count; i++) {
      v.fromBufferAttribute(pos, i).applyMatrix4(mesh.matrixWorld);
      positions.push(v.x, v.y, v.z);
    }
    const index = mesh.geometry.index;
    const count = index ? index.count : pos.count;
    for (let i = 0; i < count; i++) indices.push(base + (index ? index.getX(i) : i));
  });
  return { positions, indices };
}

/** A navmesh of the model's floor with the bake's agent (radius kept from the walls). */
async function buildFromModel(model: Object3D): Promise<Navigation> {
  await initNavigation();
  const { positions, indices } = modelTriangles(model);
  const result = generateSoloNavMesh(positions, indices, recastConfig(NAVMESH_AGENT));
  if (!result.success) throw new Error(`the walkable floor could not be built (${result.error})`);
  return navigationOf(result.navMesh);
}

/** The room's walkable floor: its baked navmesh GLB when `navmeshUrl` is set, else built from `model`. */
export async function loadWalkableFloor(navmeshUrl: string | null, model: Object3D | null): Promise<WalkableFloor | null> {
  if (navmeshUrl) {
    const res = await fetch(navmeshUrl);
    if (!res.ok) throw new Error(`the navmesh answered ${res.status}`);
    return { navigation: await loadNavigationGlb(new Uint8Array(await res.arrayBuffer())), source: 'baked' };
  }
  return model ? { navigation: await buildFromModel(model), source: 'page' } : null;
}
