/**
 * The anchors in the model itself (decisions, Artifacts): in the optimized GLB every `Slot_NNN` and
 * `Auto_NNN` node carries its anchor — world translation = position, rotation = quaternion
 * (+Z = resolved facing, +Y up), scale 1 — and its mesh is a quad centred on the node's origin in
 * its XY plane, width × height, facing +Z (two triangles wound counter-clockwise seen from +Z).
 * Authored placeholders keep their material and UVs (each corner takes the UV of the authored vertex
 * nearest to it); generated ones instance one quad mesh per frame size with the original's
 * `Slot Placeholder` material (a faint blue pane, SLOT_PLACEHOLDER_LOOK). Works on the optimized
 * document only: the source model is never changed.
 */
import type { Accessor, Document, Material, Mesh, Node, Primitive } from '@gltf-transform/core';
import { clearNodeParent } from '@gltf-transform/functions';
import { type RoomSlot, SLOT_MATERIAL_NAME, SLOT_PLACEHOLDER_LOOK, SLOT_QUAD_MESH_NAME } from '../../artifacts/format.ts';
import { rotateByQuaternion, sub, transformPoint, type Mat4, type Quat, type V3 } from '../../common/vec.ts';
import { extractSlotQuads } from './extract.ts';
import { sceneOf } from './scene.ts';

/** Quad corners in the node's XY plane, counter-clockwise seen from +Z. */
const CORNERS: Array<[number, number]> = [
  [-0.5, -0.5],
  [0.5, -0.5],
  [0.5, 0.5],
  [-0.5, 0.5],
];
/** UVs of a generated quad: the image upright seen from the front. */
const UNIT_UVS = [0, 1, 1, 1, 1, 0, 0, 0];

type UvSets = Map<string, Float32Array>;

/** Two triangles over the four corners, counter-clockwise seen from +Z. */
const TRIANGLES = [0, 1, 2, 0, 2, 3];
const expand = (values: ArrayLike<number>, size: number) =>
  new Float32Array(TRIANGLES.flatMap((v) => Array.from({ length: size }, (_, k) => values[v * size + k]!)));

/**
 * A quad as two non-indexed triangles: 6 vertices of plain floats cost less than a Draco stream of
 * their own (Draco leaves non-indexed primitives alone). No NORMAL: a flat quad's normal is the one
 * a renderer computes (glTF: flat normals when none are given). `shared` holds attribute accessors
 * the quads of one model can share (the generated quads' UVs).
 */
function createQuad(
  document: Document,
  name: string,
  width: number,
  height: number,
  material: Material | null,
  uvs: UvSets | Map<string, Accessor>,
): Mesh {
  const buffer = document.getRoot().listBuffers()[0] ?? document.createBuffer();
  const positions = CORNERS.flatMap(([x, y]) => [x * width, y * height, 0]);
  const primitive = document
    .createPrimitive()
    .setAttribute('POSITION', document.createAccessor().setType('VEC3').setArray(expand(positions, 3)).setBuffer(buffer))
    .setMaterial(material);
  for (const [semantic, uv] of uvs) {
    primitive.setAttribute(
      semantic,
      uv instanceof Float32Array ? document.createAccessor().setType('VEC2').setArray(expand(uv, 2)).setBuffer(buffer) : uv,
    );
  }
  return document.createMesh(name).addPrimitive(primitive);
}

/** Per TEXCOORD_n set, the UV of the authored vertex nearest to each quad corner. */
function authoredUvs(primitive: Primitive, world: Mat4, slot: RoomSlot): UvSets {
  const uvs: UvSets = new Map();
  const position = primitive.getAttribute('POSITION');
  if (!position) return uvs;
  const inverse: Quat = [-slot.quaternion[0], -slot.quaternion[1], -slot.quaternion[2], slot.quaternion[3]];
  const local: Array<[number, number]> = [];
  for (let i = 0; i < position.getCount(); i++) {
    const p = rotateByQuaternion(inverse, sub(transformPoint(world, position.getElement(i, [0, 0, 0]) as V3), slot.position));
    local.push([p[0], p[1]]);
  }
  const nearest = CORNERS.map(([cx, cy]) => {
    const target = [cx * slot.width, cy * slot.height];
    let best = 0;
    let bestDistance = Infinity;
    local.forEach(([x, y], i) => {
      const d = Math.hypot(x - target[0]!, y - target[1]!);
      if (d < bestDistance - 1e-9) [best, bestDistance] = [i, d];
    });
    return best;
  });
  for (const semantic of primitive.listSemantics().filter((s) => s.startsWith('TEXCOORD_'))) {
    const attribute = primitive.getAttribute(semantic)!;
    uvs.set(semantic, new Float32Array(nearest.flatMap((i) => attribute.getElement(i, [0, 0]).slice(0, 2))));
  }
  return uvs;
}

/** Dispose a mesh nobody else uses, and the accessors only it used. */
function disposeIfUnused(mesh: Mesh | null): void {
  if (!mesh || mesh.listParents().some((p) => p.propertyType !== 'Root')) return;
  const accessors = new Set<Accessor>();
  for (const prim of mesh.listPrimitives()) {
    for (const a of [...prim.listAttributes(), prim.getIndices()]) if (a) accessors.add(a);
    for (const target of prim.listTargets()) for (const a of target.listAttributes()) accessors.add(a);
  }
  mesh.listPrimitives().forEach((p) => p.dispose());
  mesh.dispose();
  for (const a of accessors) if (a.listParents().every((p) => p.propertyType === 'Root')) a.dispose();
}

/** Give a node the anchor as its transform, directly under the scene (no inherited transform). */
function seat(node: Node, slot: RoomSlot): void {
  // Children of a placeholder (rare) keep where they are in the world.
  for (const child of node.listChildren()) clearNodeParent(child);
  clearNodeParent(node);
  node
    .setName(slot.id)
    .setTranslation([...slot.position])
    .setRotation([...slot.quaternion])
    .setScale([1, 1, 1]);
}

/** A `Slot Placeholder` material as the original makes it: faint blue, alpha 0.25, blended, double-sided, matte. */
export function createSlotPlaceholderMaterial(document: Document): Material {
  const look = SLOT_PLACEHOLDER_LOOK;
  return document
    .createMaterial(SLOT_MATERIAL_NAME)
    .setBaseColorFactor([...look.baseColorFactor])
    .setAlphaMode(look.alphaMode)
    .setDoubleSided(look.doubleSided)
    .setMetallicFactor(look.metallicFactor)
    .setRoughnessFactor(look.roughnessFactor);
}

export function embedAnchors(document: Document, slots: RoomSlot[]): void {
  if (!slots.length) return;
  const root = document.getRoot();
  let scene = sceneOf(document);
  if (!scene) {
    scene = document.createScene('Scene');
    root.setDefaultScene(scene);
  }
  const byId = new Map(slots.map((s) => [s.id, s]));
  const placed = new Set<string>();
  // Placeholders of the model (authored, or embedded by an earlier bake): re-expressed in place.
  for (const quad of extractSlotQuads(document).quads) {
    const slot = byId.get(quad.id);
    const old = quad.node.getMesh();
    if (!slot || placed.has(slot.id) || !old) continue;
    const primitive = old.listPrimitives().find((p) => p.getAttribute('POSITION')) ?? old.listPrimitives()[0]!;
    const uvs = authoredUvs(primitive, quad.node.getWorldMatrix() as unknown as Mat4, slot);
    const mesh = createQuad(document, slot.id, slot.width, slot.height, primitive.getMaterial(), uvs);
    quad.node.setMesh(mesh);
    disposeIfUnused(old);
    seat(quad.node, slot);
    placed.add(slot.id);
  }
  // Generated anchors without a node: new Auto_NNN nodes, one quad mesh per frame size.
  const rest = slots.filter((s) => !placed.has(s.id));
  if (!rest.length) return;
  // Never the model's own material of that name: a generated quad always looks as the original's do.
  const material = createSlotPlaceholderMaterial(document);
  const buffer = root.listBuffers()[0] ?? document.createBuffer();
  const uvs = new Map([['TEXCOORD_0', document.createAccessor().setType('VEC2').setArray(expand(UNIT_UVS, 2)).setBuffer(buffer)]]);
  const quads = new Map<string, Mesh>();
  for (const slot of rest) {
    const key = `${slot.width}x${slot.height}`;
    let mesh = quads.get(key);
    if (!mesh) quads.set(key, (mesh = createQuad(document, SLOT_QUAD_MESH_NAME, slot.width, slot.height, material, uvs)));
    const node = document.createNode(slot.id).setMesh(mesh);
    scene.addChild(node);
    seat(node, slot);
  }
}
