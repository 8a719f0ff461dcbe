/**
 * The model variants beside the Draco model (decisions, "Model variants"), both made from the
 * optimizer's prepared document (after dedup … textures, before Draco) with glTF-Transform's own
 * functions:
 *   - meshopt: glTF-Transform's `meshopt` with meshoptimizer's encoder, WebP textures;
 *   - plain: float32 geometry (dequantize), no geometry compression, WebP textures at most 1024 px.
 * Both carry every Slot_NNN / Auto_NNN node exactly as the Draco model does: the anchors are embedded
 * the same way, after the geometry step (see toMeshopt).
 */
import { type Document, ImageUtils } from '@gltf-transform/core';
import { cloneDocument, compressTexture, dequantize, meshopt } from '@gltf-transform/functions';
import sharp from 'sharp';
import type { ModelVariantFacts } from '../artifacts/format.ts';
import { ModelError, writeGlb } from './gltf-io.ts';
import type { OptimizerSettings } from './settings.ts';

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
 * glTF-Transform's `meshopt` (reorder + quantize + EXT_meshopt_compression, level high: normals
 * octahedral-filtered by the extension). Its quantize folds each mesh's dequantization scale and
 * offset into the nodes that draw it; the slot anchors are embedded after it (see variant), which
 * sets every Slot_/Auto_ node's transform to its anchor and gives it a float quad of its own.
 */
async function toMeshopt(document: Document, settings: OptimizerSettings): Promise<void> {
  const { MeshoptEncoder } = await import('meshoptimizer');
  await MeshoptEncoder.ready;
  dropExtensions(document, GEOMETRY_CODECS);
  await document.transform(meshopt({ encoder: MeshoptEncoder, level: 'high', ...settings.variants.meshopt }));
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
