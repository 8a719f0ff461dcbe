/**
 * The model variants beside the Draco model (decisions, "Model variants"), both made from the
 * optimizer's prepared document (after dedup … textures, before Draco) with glTF-Transform's own
 * functions:
 *   - meshopt: reorder + quantize + EXT_meshopt_compression (meshoptimizer's encoder), WebP textures;
 *   - plain: float32 geometry (dequantize), no geometry compression, WebP textures at most 1024 px.
 * Both carry every Slot_NNN / Auto_NNN node exactly as the Draco model does: the anchors are embedded
 * the same way, and quantization leaves the slot placeholders alone (see quantizeExceptSlots).
 */
import { type Accessor, type Document, ImageUtils, type Mesh, type Node, type Primitive, PropertyType, type Transform } from '@gltf-transform/core';
import { EXTMeshoptCompression } from '@gltf-transform/extensions';
import { cloneDocument, compressTexture, dedup, dequantize, prune, quantize, reorder } from '@gltf-transform/functions';
import sharp from 'sharp';
import type { ModelVariantFacts } from '../artifacts/format.ts';
import { ModelError, writeGlb } from './gltf-io.ts';
import type { OptimizerSettings } from './settings.ts';
import { isSlotNode, isSlotPrimitive } from './slots/scene.ts';

export interface VariantGlb extends ModelVariantFacts {
  name: 'meshopt' | 'plain';
  glb: Uint8Array;
  ms: number;
}

/** Geometry codecs a variant replaces (one codec per file; the plain one has none). */
const GEOMETRY_CODECS = ['KHR_draco_mesh_compression', 'EXT_meshopt_compression'];
const dropExtensions = (document: Document, names: string[]) =>
  document.getRoot().listExtensionsUsed().filter((e) => names.includes(e.extensionName)).forEach((e) => e.dispose());

/**
 * Quantize every mesh but the slot placeholders. glTF-Transform's quantize folds each mesh's
 * dequantization scale and offset into the nodes that draw it, so a Slot_NNN node's transform would
 * no longer be its anchor. The placeholders keep their float geometry and their node transforms
 * (two quads: their bytes do not matter); everything else is quantized as glTF-Transform does it.
 */
function quantizeExceptSlots(options: Parameters<typeof quantize>[0]): Transform {
  const quantizeAll = quantize({ ...options, cleanup: false });
  return async (document: Document) => {
    const root = document.getRoot();
    const slotMeshes = new Set<Mesh>([
      ...root.listNodes().filter(isSlotNode).map((n) => n.getMesh()!),
      ...root.listMeshes().filter((m) => m.listPrimitives().some(isSlotPrimitive)),
    ]);
    const kept = [...slotMeshes].flatMap((mesh) => mesh.listPrimitives()).map((prim) => ({
      prim,
      indices: prim.getIndices(),
      attributes: prim.listSemantics().map((s) => [s, prim.getAttribute(s)!] as [string, Accessor]),
    }));
    const nodes = root.listNodes().filter((n) => slotMeshes.has(n.getMesh()!));
    const held = nodes.map((node) => ({ node, mesh: node.getMesh()!, matrix: node.getMatrix().slice() as Mat4 }));
    await document.transform(quantizeAll);
    for (const { prim, indices, attributes } of kept) restorePrimitive(prim, indices, attributes);
    for (const { node, mesh, matrix } of held) restoreNode(node, mesh, matrix);
    // The cleanup quantize would have done, now that the slot geometry is back.
    await document.transform(
      prune({ propertyTypes: [PropertyType.ACCESSOR], keepAttributes: true, keepIndices: true, keepLeaves: true, keepSolidTextures: true }),
      dedup({ propertyTypes: [PropertyType.ACCESSOR], keepUniqueNames: true }),
    );
  };
}

type Mat4 = Parameters<Node['setMatrix']>[0];

function restorePrimitive(prim: Primitive, indices: Accessor | null, attributes: Array<[string, Accessor]>): void {
  prim.setIndices(indices);
  for (const semantic of prim.listSemantics()) if (!attributes.some(([s]) => s === semantic)) prim.setAttribute(semantic, null);
  for (const [semantic, accessor] of attributes) prim.setAttribute(semantic, accessor);
}

/** quantize moves the mesh of a node with children onto a new child node: it goes back where it was. */
function restoreNode(node: Node, mesh: Mesh, matrix: Mat4): void {
  if (node.getMesh() !== mesh) {
    node.listChildren().filter((child) => child.getMesh() === mesh && !child.getName() && !child.listChildren().length).forEach((c) => c.dispose());
    node.setMesh(mesh);
  }
  node.setMatrix(matrix);
}

/** EXT_meshopt_compression as glTF-Transform's `meshopt` (level high) composes it, with the slots kept unquantized. */
async function toMeshopt(document: Document, settings: OptimizerSettings): Promise<void> {
  const { MeshoptEncoder } = await import('meshoptimizer');
  await MeshoptEncoder.ready;
  dropExtensions(document, GEOMETRY_CODECS);
  if (!document.getRoot().listAccessors().length) return;
  const { quantizePosition, quantizeTexcoord, quantizeColor, quantizeNormal, quantizationVolume } = settings.variants.meshopt;
  await document.transform(
    reorder({ encoder: MeshoptEncoder, target: 'size' }),
    quantizeExceptSlots({
      // `meshopt` level high: normals stay float here and are octahedral-filtered by the extension.
      pattern: /^(POSITION|TEXCOORD|JOINTS|WEIGHTS|COLOR)(_\d+)?$/,
      patternTargets: /^(POSITION|TEXCOORD|JOINTS|WEIGHTS|COLOR|NORMAL|TANGENT)(_\d+)?$/,
      quantizePosition,
      quantizeTexcoord,
      quantizeColor,
      quantizeNormal: Math.min(quantizeNormal, 8),
      quantizationVolume,
    }),
  );
  document.createExtension(EXTMeshoptCompression).setRequired(true).setEncoderOptions({ method: EXTMeshoptCompression.EncoderMethod.FILTER });
}

const DECODABLE = ['image/png', 'image/jpeg', 'image/webp'];

/** Float32 geometry, no geometry codec, textures re-encoded as WebP only where over the size cap. */
async function toPlain(document: Document, settings: OptimizerSettings): Promise<void> {
  dropExtensions(document, GEOMETRY_CODECS);
  await document.transform(dequantize());
  const { maxTextureSize } = settings.variants.plain;
  const { quality } = settings.textures;
  const textures = document.getRoot().listTextures();
  await Promise.all(
    textures.map(async (texture, i) => {
      const image = texture.getImage();
      if (!image) return;
      const mime = texture.getMimeType();
      // A KTX2 or other GPU format needs a transcoder: nothing a decoder-less client can load.
      if (!DECODABLE.includes(mime)) throw new ModelError(`plain variant: texture ${texture.getURI() || texture.getName() || `#${i}`} is ${mime}, which needs a decoder`);
      const [w, h] = (ImageUtils.getSize(image, mime) ?? [0, 0]) as [number, number];
      if (Math.max(w, h) <= maxTextureSize) return;
      await compressTexture(texture, { encoder: sharp, targetFormat: 'webp', resize: [maxTextureSize, maxTextureSize], quality, limitInputPixels: true });
    }),
  );
}

const GLB_JSON_CHUNK = 0x4e4f534a;
const GLB_BIN_CHUNK = 0x004e4942;

/** extensionsRequired and the longest texture side, read back from a written GLB (never assumed). */
export function glbFacts(glb: Uint8Array): ModelVariantFacts {
  const view = new DataView(glb.buffer, glb.byteOffset, glb.byteLength);
  let json: { extensionsRequired?: string[]; images?: Array<{ bufferView?: number; mimeType?: string }>; bufferViews?: Array<{ byteOffset?: number; byteLength: number }> } | null = null;
  let bin: Uint8Array | null = null;
  for (let at = 12; at + 8 <= glb.byteLength; ) {
    const length = view.getUint32(at, true);
    const type = view.getUint32(at + 4, true);
    const data = glb.subarray(at + 8, at + 8 + length);
    if (type === GLB_JSON_CHUNK) json = JSON.parse(Buffer.from(data).toString('utf8'));
    else if (type === GLB_BIN_CHUNK) bin = data;
    at += 8 + length;
  }
  if (!json) throw new Error('written GLB has no JSON chunk');
  let longest = 0;
  for (const image of json.images ?? []) {
    const bufferView = image.bufferView === undefined ? undefined : json.bufferViews?.[image.bufferView];
    if (!bufferView || !bin || !image.mimeType) continue;
    const start = bufferView.byteOffset ?? 0;
    const size = ImageUtils.getSize(bin.subarray(start, start + bufferView.byteLength), image.mimeType);
    if (size) longest = Math.max(longest, size[0], size[1]);
  }
  return { extensions_required: json.extensionsRequired ?? [], max_texture_size: longest || null };
}

async function variant(name: VariantGlb['name'], document: Document, make: () => Promise<void>, finish: (d: Document) => void): Promise<VariantGlb> {
  const t0 = performance.now();
  try {
    await make();
    finish(document);
    const glb = await writeGlb(document, { compact: true });
    return { name, glb, ...glbFacts(glb), ms: performance.now() - t0 };
  } catch (err) {
    throw new Error(`the ${name} model variant could not be made: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
}

/**
 * Both variants of a prepared document (which this takes over: the plain variant is made from it, the
 * meshopt one from a clone). `finish` embeds the slot anchors, as it does in the Draco model.
 */
export async function makeVariants(prepared: Document, settings: OptimizerSettings, finish: (d: Document) => void): Promise<VariantGlb[]> {
  const forMeshopt = cloneDocument(prepared);
  // The plain variant's texture work runs on sharp's threads while meshopt encodes on this one.
  return Promise.all([
    variant('meshopt', forMeshopt, () => toMeshopt(forMeshopt, settings), finish),
    variant('plain', prepared, () => toPlain(prepared, settings), finish),
  ]);
}
