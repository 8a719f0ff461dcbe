/**
 * The published navmesh file: one node `NavMesh` holding one float32 triangle mesh, uncompressed
 * (decisions.md "Walkable rooms"). Same triangles → same bytes.
 */
import { Document } from '@gltf-transform/core';
import { getIO } from '../gltf-io.ts';

export async function navMeshGlb(positions: Float32Array, indices: Uint32Array): Promise<Uint8Array> {
  const document = new Document();
  document.createBuffer('navmesh');
  const position = document.createAccessor('NavMeshPosition').setType('VEC3').setArray(positions);
  const index = document.createAccessor('NavMeshIndices').setType('SCALAR').setArray(indices);
  const primitive = document.createPrimitive().setAttribute('POSITION', position).setIndices(index);
  const mesh = document.createMesh('NavMesh').addPrimitive(primitive);
  const node = document.createNode('NavMesh').setMesh(mesh);
  document.getRoot().setDefaultScene(document.createScene('NavMesh').addChild(node));
  return (await getIO()).writeBinary(document);
}
