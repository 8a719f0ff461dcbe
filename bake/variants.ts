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
import { EXTTextureWebP, KHRTextureBasisu } from '@gltf-transform/extensions';
import type { ModelVariantFacts } from '../artifacts/format.ts';
import { sha256 } from '../artifacts/store.ts';
import { ModelError, writeGlb } from './gltf-io.ts';
import { BAKE_LIMITS, type OptimizerSettings } from './settings.ts';
import { alphaUnread, textureEncoder } from './texture-alpha.ts';

export interface VariantGlb extends ModelVariantFacts {
  name: 'meshopt' | 'plain' | 'ktx2';
  glb: Uint8Array;
  ms: number;
  /** ktx2: the Basis encoder's time (RGBA decode included), ms. */
  encodeMs?: number;
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

/** RGBA pixels for the Basis encoder (ktx2-encoder asks Node callers for a decoder): sharp, as elsewhere. */
async function decodeRgba(image: Uint8Array): Promise<{ width: number; height: number; data: Uint8Array }> {
  const { default: sharp } = await import('sharp');
  const { data, info } = await sharp(image, { limitInputPixels: true }).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), width: info.width, height: info.height };
}

/** The material slots a texture fills (glTF-Transform's graph edges from materials: 'normalTexture', …). */
const textureSlots = (document: Document, texture: Texture) =>
  new Set(
    document
      .getGraph()
      .listParentEdges(texture)
      .filter((edge) => edge.getParent() !== document.getRoot())
      .map((edge) => edge.getName()),
  );

/** Slots whose texels are sRGB colour (the others hold data: normals, metal/rough, occlusion). */
const COLOUR_SLOTS = ['baseColorTexture', 'emissiveTexture', 'diffuseTexture', 'specularGlossinessTexture', 'sheenColorTexture'];

/** Basis settings per kind: UASTC for normal maps (ETC1S smears their directions), ETC1S otherwise; mipmaps always. */
function basisOptions(slots: Set<string>, settings: OptimizerSettings) {
  const { etc1sQuality, etc1sEffort, uastcQuality } = settings.variants.ktx2;
  const colour = [...slots].some((s) => COLOUR_SLOTS.includes(s));
  // enableDebug off: the encoder otherwise prints every slice to the worker's stdout.
  const common = { generateMipmap: true, enableDebug: false, isKTX2File: true, imageDecoder: decodeRgba };
  if (slots.has('normalTexture') && !colour)
    return {
      ...common,
      isUASTC: true,
      isNormalMap: true,
      isPerceptual: false,
      isSetKTX2SRGBTransferFunc: false,
      uastcLDRQualityLevel: uastcQuality,
      needSupercompression: true,
    };
  return {
    ...common,
    isUASTC: false,
    qualityLevel: etc1sQuality,
    compressionLevel: etc1sEffort,
    isPerceptual: colour,
    isSetKTX2SRGBTransferFunc: colour,
  };
}

/**
 * The meshopt variant's geometry with every texture as KTX2 (KHR_texture_basisu), encoded with ktx2-encoder's
 * wasm Basis Universal one texture at a time (its wasm heap is shared; one at a time keeps the peak bounded).
 * A texture that cannot be encoded fails the variant with its name, never silently kept as WebP.
 */
async function toKtx2(document: Document, settings: OptimizerSettings, timing: { encodeMs?: number }): Promise<void> {
  const { encodeToKTX2 } = await import('ktx2-encoder');
  await toMeshopt(document, settings);
  timing.encodeMs = 0;
  const textures = document.getRoot().listTextures();
  for (const [i, texture] of textures.entries()) {
    const image = texture.getImage();
    if (!image || texture.getMimeType() === 'image/ktx2') continue;
    const label = texture.getURI() || texture.getName() || `#${i}`;
    if (!DECODABLE.includes(texture.getMimeType()))
      throw new ModelError(`texture ${label} is ${texture.getMimeType()}, which cannot be encoded as KTX2`);
    const options = basisOptions(textureSlots(document, texture), settings);
    const t0 = performance.now();
    const encoded = await encodeToKTX2(image, options as Parameters<typeof encodeToKTX2>[1]).catch((err: unknown) => {
      throw new ModelError(`texture ${label} could not be encoded as KTX2: ${err instanceof Error ? err.message : String(err)}`);
    });
    timing.encodeMs += performance.now() - t0;
    texture.setImage(encoded).setMimeType('image/ktx2');
  }
  document.createExtension(KHRTextureBasisu).setRequired(true);
  // No WebP is left: its extension would otherwise stay required.
  for (const ext of document.getRoot().listExtensionsUsed()) if (ext.extensionName === EXTTextureWebP.EXTENSION_NAME) ext.dispose();
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
  make: (timing: { encodeMs?: number }) => Promise<void>,
  finish: (d: Document) => void,
  vertexLayout?: VertexLayout,
): Promise<VariantGlb> {
  const t0 = performance.now();
  const timing: { encodeMs?: number } = {};
  try {
    await make(timing);
    finish(document);
    const glb = await writeGlb(document, { compact: true, vertexLayout });
    return { name, glb, ...(await glbFacts(glb)), ms: performance.now() - t0, ...timing };
  } catch (err) {
    throw new Error(`the ${name} model variant could not be made: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
}

/** Variants over their size bound (BAKE_LIMITS.maxVariantSourceRatio / maxVariantBytes): the room publishes without them. */
export class VariantSizeError extends Error {
  override name = 'VariantSizeError';
}

/** The bytes a variant of a source of `sourceBytes` may take. */
const maxVariantBytes = (sourceBytes: number, limits = BAKE_LIMITS): number =>
  Math.min(limits.maxVariantSourceRatio * sourceBytes, limits.maxVariantBytes);

/** Throws a VariantSizeError (one line) when a made variant is over its bound; nothing has been stored yet. */
export function checkVariantSizes(made: VariantGlb[], sourceBytes: number, limits = BAKE_LIMITS): void {
  const max = maxVariantBytes(sourceBytes, limits);
  const over = made.find((v) => v.glb.byteLength > max);
  if (!over) return;
  const mb = (bytes: number) => `${Number((bytes / 1e6).toPrecision(3))} MB`;
  throw new VariantSizeError(
    `model variants left out: the ${over.name} variant is ${mb(over.glb.byteLength)}, over the bound of ${mb(max)} ` +
      `(${limits.maxVariantSourceRatio}× the ${mb(sourceBytes)} source model, at most ${mb(limits.maxVariantBytes)})`,
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
  // A room without textures has nothing for KTX2 to change: no ktx2 variant (decisions, "KTX2 texture variant").
  const forKtx2 = prepared.getRoot().listTextures().length ? cloneDocument(prepared) : null;
  // The plain variant's texture work runs on sharp's threads while meshopt encodes on this one.
  const made = await Promise.all([
    variant('meshopt', forMeshopt, () => toMeshopt(forMeshopt, settings), finish),
    variant('plain', prepared, () => toPlain(prepared, settings, plainTextures), finish, PLAIN_VERTEX_LAYOUT),
  ]);
  // After the others: the Basis encoder is single-threaded wasm on this thread, as meshopt's is.
  return forKtx2 ? [...made, await variant('ktx2', forKtx2, (timing) => toKtx2(forKtx2, settings, timing), finish)] : made;
}
