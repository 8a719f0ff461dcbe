/**
 * The model variants beside the Draco model (decisions, "Model variants"), both made from the
 * optimizer's prepared document (after dedup … textures, before Draco) with glTF-Transform's own
 * functions:
 *   - meshopt: glTF-Transform's `meshopt` with meshoptimizer's encoder, WebP textures;
 *   - plain: float32 geometry (dequantize), no geometry compression, WebP textures at most 1024 px,
 *     each vertex attribute in a bufferView of its own (see PLAIN_VERTEX_LAYOUT).
 * Both carry every Slot_NNN / Auto_NNN node exactly as the Draco model does: the anchors are embedded
 * the same way, after the geometry step (see toMeshopt).
 */
import { Document, GLB_BUFFER, ImageUtils, NodeIO, VertexLayout, type Texture } from '@gltf-transform/core';
import { cloneDocument, compressTexture, dequantize, meshopt } from '@gltf-transform/functions';
import type { ModelVariantFacts } from '../artifacts/format.ts';
import { sha256 } from '../artifacts/store.ts';
import { ModelError, writeGlb } from './gltf-io.ts';
import { BAKE_LIMITS, type OptimizerSettings } from './settings.ts';
import { alphaUnread, textureEncoder } from './texture-alpha.ts';

export interface VariantGlb extends ModelVariantFacts {
  name: 'meshopt' | 'plain';
  glb: Uint8Array;
  ms: number;
}

/** Geometry codecs a variant replaces (one codec per file; the plain one has none). */
const GEOMETRY_CODECS = ['KHR_draco_mesh_compression', 'EXT_meshopt_compression'];
const dropExtensions = (document: Document, names: string[]) =>
  document
    .getRoot()
    .listExtensionsUsed()
    .filter((e) => names.includes(e.extensionName))
    .forEach((e) => e.dispose());

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

const longestSide = (image: Uint8Array, mime: string) => Math.max(...((ImageUtils.getSize(image, mime) ?? [0, 0]) as [number, number]));

/**
 * A texture of a scratch document, resized to the plain variant's cap with glTF-Transform's compressTexture
 * (`dropAlpha`: what the texture's uses in the model say, see texture-alpha.ts; the scratch one has none).
 */
async function plainTexture(
  image: Uint8Array,
  mime: string,
  settings: OptimizerSettings,
  dropAlpha: boolean,
): Promise<{ image: Uint8Array; mime: string }> {
  const { maxTextureSize, effort } = settings.variants.plain;
  const texture = new Document().createTexture().setImage(image).setMimeType(mime);
  const resize: [number, number] = [maxTextureSize, maxTextureSize];
  await compressTexture(texture, {
    encoder: textureEncoder(dropAlpha),
    targetFormat: 'webp',
    resize,
    quality: settings.textures.quality,
    effort,
    limitInputPixels: true,
  });
  return { image: texture.getImage()!, mime: texture.getMimeType() };
}

/**
 * The plain variant's textures, started from the source images before the optimizer runs (their
 * encoding then overlaps the slot engine, and they are made from the original pixels, not from the
 * Draco model's WebP). `keyed` is called once the textures step has encoded the document's
 * textures: the prepared document's textures are found again by those bytes.
 */
export function startPlainTextures(document: Document, settings: OptimizerSettings) {
  const { maxTextureSize } = settings.variants.plain;
  const early = new Map<Texture, Promise<{ image: Uint8Array; mime: string }>>();
  for (const texture of document.getRoot().listTextures()) {
    const [image, mime] = [texture.getImage(), texture.getMimeType()];
    if (!image || !DECODABLE.includes(mime) || longestSide(image, mime) <= maxTextureSize) continue;
    const work = plainTexture(image, mime, settings, alphaUnread(texture));
    work.catch(() => undefined); // reported where the variant uses it
    early.set(texture, work);
  }
  return {
    keyed: (): PlainTextures =>
      new Map([...early].flatMap(([texture, work]) => (texture.getImage() ? [[sha256(texture.getImage()!), work]] : []))),
  };
}
/** The plain variant's textures already being made, by the sha256 of the image they replace. */
export type PlainTextures = ReadonlyMap<string, Promise<{ image: Uint8Array; mime: string }>>;

/** Float32 geometry, no geometry codec, textures re-encoded as WebP only where over the size cap. */
async function toPlain(document: Document, settings: OptimizerSettings, early: PlainTextures): Promise<void> {
  dropExtensions(document, GEOMETRY_CODECS);
  await document.transform(dequantize());
  const textures = document.getRoot().listTextures();
  await Promise.all(
    textures.map(async (texture, i) => {
      const image = texture.getImage();
      if (!image) return;
      const mime = texture.getMimeType();
      // A KTX2 or other GPU format needs a transcoder: nothing a decoder-less client can load.
      if (!DECODABLE.includes(mime))
        throw new ModelError(
          `plain variant: texture ${texture.getURI() || texture.getName() || `#${i}`} is ${mime}, which needs a decoder`,
        );
      if (longestSide(image, mime) <= settings.variants.plain.maxTextureSize) return;
      const resized = await (early.get(sha256(image)) ?? plainTexture(image, mime, settings, alphaUnread(texture)));
      texture.setImage(resized.image).setMimeType(resized.mime);
    }),
  );
}

/** Reads a GLB's JSON and binary chunk (glTF-Transform's own GLB parsing; no extension or codec needed). */
const glbReader = new NodeIO();

/** extensionsRequired and the longest texture side, read back from a written GLB (never assumed). */
export async function glbFacts(glb: Uint8Array): Promise<ModelVariantFacts> {
  // Its chunk headers are read as a Uint32Array: a view at an unaligned offset is copied first.
  const { json, resources } = await glbReader.binaryToJSON(glb.byteOffset % 4 ? glb.slice() : glb);
  const bin = resources[GLB_BUFFER];
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

/**
 * The plain variant's vertex attributes each in a run of their own rather than interleaved: on the garage's
 * 774 KB plain model, 11 % fewer bytes after brotli (178.6 → 158.2 KB) and gzip (212.6 → 190.1 KB), like
 * values being adjacent, and a faster write (glTF-Transform interleaves element by element).
 */
const PLAIN_VERTEX_LAYOUT = VertexLayout.SEPARATE;

async function variant(
  name: VariantGlb['name'],
  document: Document,
  make: () => Promise<void>,
  finish: (d: Document) => void,
  vertexLayout?: VertexLayout,
): Promise<VariantGlb> {
  const t0 = performance.now();
  try {
    await make();
    finish(document);
    const glb = await writeGlb(document, { compact: true, vertexLayout });
    return { name, glb, ...(await glbFacts(glb)), ms: performance.now() - t0 };
  } catch (err) {
    throw new Error(`the ${name} model variant could not be made: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
}

/** Variants over their size bound (BAKE_LIMITS.maxVariantSourceRatio / maxVariantBytes): the room publishes without them. */
export class VariantSizeError extends Error {
  override name = 'VariantSizeError';
}

/** The bytes a variant of a source of `sourceBytes` may take. */
export const maxVariantBytes = (sourceBytes: number, limits = BAKE_LIMITS): number =>
  Math.min(limits.maxVariantSourceRatio * sourceBytes, limits.maxVariantBytes);

/** Throws a VariantSizeError (one line) when a made variant is over its bound; nothing has been stored yet. */
export function checkVariantSizes(made: VariantGlb[], sourceBytes: number, limits = BAKE_LIMITS): void {
  const max = maxVariantBytes(sourceBytes, limits);
  const over = made.find((v) => v.glb.byteLength > max);
  if (!over) return;
  const mb = (bytes: number) => `${Number((bytes / 1e6).toPrecision(3))} MB`;
  throw new VariantSizeError(
    `model variants left out: the ${over.name} variant is ${mb(over.glb.byteLength)}, over the bound of ${mb(max)} (${limits.maxVariantSourceRatio}× the ${mb(sourceBytes)} source model, at most ${mb(limits.maxVariantBytes)})`,
  );
}

/**
 * Both variants of a prepared document (which this takes over: the plain variant is made from it, the
 * meshopt one from a clone). `finish` embeds the slot anchors, as it does in the Draco model.
 */
export async function makeVariants(
  prepared: Document,
  settings: OptimizerSettings,
  finish: (d: Document) => void,
  plainTextures: PlainTextures = new Map(),
): Promise<VariantGlb[]> {
  const forMeshopt = cloneDocument(prepared);
  // The plain variant's texture work runs on sharp's threads while meshopt encodes on this one.
  return Promise.all([
    variant('meshopt', forMeshopt, () => toMeshopt(forMeshopt, settings), finish),
    variant('plain', prepared, () => toPlain(prepared, settings, plainTextures), finish, PLAIN_VERTEX_LAYOUT),
  ]);
}
