/**
 * The optimizer: glTF-Transform's own functions composed as named steps
 *   dedup → palette → join → weld → prune → textures (WebP) → draco
 * configured so that slot placeholders survive: Slot_NNN / Auto_NNN nodes and anything using the
 * `Slot Placeholder` material are never joined, renamed or pruned.
 *
 * Guarantees (checked, not hoped for): every authored slot node and its material survive, and the
 * optimized GLB is never larger than the source GLB — when a step would make it larger, the
 * optimizer retries without that step and says so.
 */
import { type Document, ImageUtils, PropertyType, type Node, type Texture, type Transform } from '@gltf-transform/core';
import { EXTTextureWebP } from '@gltf-transform/extensions';
import { cloneDocument, compressTexture, dedup, draco, join, listTextureSlots, palette, prune, weld } from '@gltf-transform/functions';
import { ModelError, writeGlb } from './gltf-io.ts';
import { OPTIMIZER_SETTINGS, type OptimizerSettings } from './settings.ts';
import { alphaUnread, textureEncoder } from './texture-alpha.ts';
import { isSlotNode, isSlotPrimitive, SLOT_NAME_PATTERN } from './slots/scene.ts';

export { OPTIMIZER_SETTINGS, optimizerSettingsId, type OptimizerSettings } from './settings.ts';

const STEP_NAMES = ['dedup', 'palette', 'join', 'weld', 'prune', 'textures', 'draco'] as const;
export type StepName = (typeof STEP_NAMES)[number];

export interface OptimizeStep {
  name: StepName;
  transform: Transform;
}

/**
 * What an image's bytes are (PNG, JPEG or WebP signature), whatever the model declares: sized with
 * the declared type's parser, a GIF labelled image/png reads palette bytes as its size.
 */
function sniffedImageType(image: Uint8Array): 'image/png' | 'image/jpeg' | 'image/webp' | null {
  const ascii = (from: number, to: number) => Buffer.from(image.subarray(from, to)).toString('latin1');
  if (ascii(0, 8) === '\x89PNG\r\n\x1a\n') return 'image/png';
  if (image[0] === 0xff && image[1] === 0xd8 && image[2] === 0xff) return 'image/jpeg';
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WEBP') return 'image/webp';
  return null;
}

/** Fail before decoding anything when an image declares more pixels than we are willing to hold. */
export function assertTextureSizes(document: Document, maxPixels: number = OPTIMIZER_SETTINGS.maxTexturePixels): void {
  document
    .getRoot()
    .listTextures()
    .forEach((texture, i) => {
      const image = texture.getImage();
      const declared = texture.getMimeType();
      if (!image || !['image/png', 'image/jpeg', 'image/webp'].includes(declared)) return;
      const label = texture.getURI() || texture.getName() || `#${i}`;
      // These textures are decoded (sharp detects the format from the bytes): size what is really there.
      const mime = sniffedImageType(image);
      if (!mime) throw new ModelError(`texture ${label}: declared ${declared}, but its bytes are not a PNG, JPEG or WebP image`);
      let size: [number, number] | null;
      try {
        size = ImageUtils.getSize(image, mime) as [number, number] | null;
      } catch {
        size = null;
      }
      if (!size) throw new ModelError(`texture ${label}: unreadable ${mime} header`);
      const [w, h] = size;
      if (w * h > maxPixels) {
        throw new ModelError(`texture ${label} declares ${w}×${h} pixels, over the limit of ${maxPixels} pixels`);
      }
    });
}

/** Textures already encoded in this Document (early, by startTextureCompression, or by the step). */
const encodedTextures = new WeakSet<Texture>();

/** WebP one texture (normal maps lossy unless normalMapsLossless), resized to the cap; keep the original when smaller. */
async function compressOne(texture: Texture, settings: OptimizerSettings): Promise<void> {
  const { maxSize, quality, normalMapsLossless, lossless: losslessEncoding } = settings.textures;
  encodedTextures.add(texture);
  const image = texture.getImage();
  const mime = texture.getMimeType();
  if (!image || !['image/png', 'image/jpeg', 'image/webp'].includes(mime)) return;
  const [w, h] = (ImageUtils.getSize(image, sniffedImageType(image) ?? mime) ?? [0, 0]) as [number, number];
  const mustResize = Math.max(w, h) > maxSize;
  const original = { image, mime, uri: texture.getURI() };
  const lossless = normalMapsLossless && listTextureSlots(texture).includes('normalTexture');
  // A JPEG normal map is already lossy: lossless WebP only adds bytes, lossy WebP adds loss.
  if (lossless && mime === 'image/jpeg' && !mustResize) return;
  await compressTexture(texture, {
    encoder: textureEncoder(alphaUnread(texture)),
    targetFormat: 'webp',
    resize: mustResize ? [maxSize, maxSize] : undefined,
    ...(lossless ? losslessEncoding : { quality }),
    lossless,
    limitInputPixels: true,
  });
  // Re-encoding can grow an already well-compressed image; unless resizing was required, the
  // smaller of the two is the better texture.
  if (!mustResize && texture.getImage()!.byteLength >= original.image.byteLength) {
    texture.setImage(original.image).setMimeType(original.mime).setURI(original.uri);
  }
}

/** The textures step: every texture not encoded yet (those the palette step made, or all of them). */
function compressTextures(settings: OptimizerSettings): Transform {
  return async (document: Document) => {
    const textures = document.getRoot().listTextures();
    await Promise.all(textures.filter((t) => !encodedTextures.has(t)).map((t) => compressOne(t, settings)));
    if (textures.some((t) => t.getMimeType() === 'image/webp')) document.createExtension(EXTTextureWebP).setRequired(true);
  };
}

/**
 * Start encoding the textures a document's materials use, before the optimizer runs: sharp encodes
 * on its own threads while the caller's main-thread work (the slot engine, which never reads
 * textures) goes on. Await it before optimizing this document; the textures step then encodes only
 * textures made since (palette). Same bytes as encoding them in the step: the earlier steps never
 * change a texture's image, and identical images still encode (and dedup) identically.
 */
export function startTextureCompression(document: Document, settings: OptimizerSettings = OPTIMIZER_SETTINGS): Promise<void> {
  const used = document
    .getRoot()
    .listTextures()
    .filter((t) => listTextureSlots(t).length > 0);
  return Promise.all(used.map((t) => compressOne(t, settings))).then(() => undefined);
}

/**
 * Run a transform with slot placeholder primitives detached from their material: glTF-Transform
 * skips material-less primitives in palette and attribute pruning, so `Slot Placeholder` stays
 * theirs and their UVs (which clients use to map the artwork) stay too.
 */
async function withSlotMaterialsDetached(document: Document, transform: Transform): Promise<void> {
  const held = document
    .getRoot()
    .listMeshes()
    .flatMap((mesh) => mesh.listPrimitives())
    .filter(isSlotPrimitive)
    .map((prim) => ({ prim, material: prim.getMaterial() }));
  held.forEach(({ prim }) => prim.setMaterial(null));
  try {
    await document.transform(transform);
  } finally {
    held.forEach(({ prim, material }) => prim.setMaterial(material));
  }
}

/** Materials that differ only in factors become one palette texture, so their meshes can be joined. */
function paletteExceptSlots(): Transform {
  const merge = palette({ min: 5 });
  return (document: Document) => withSlotMaterialsDetached(document, merge);
}

/**
 * Unused properties go; so do vertex attributes no material reads — except on slot placeholders.
 * keepSolidTextures: finding solid textures decodes every image in JS, a cost rooms rarely repay.
 */
function pruneExceptSlotAttributes(): Transform {
  const properties = prune({ keepLeaves: true, keepSolidTextures: true, keepAttributes: true });
  const attributes = prune({ propertyTypes: [PropertyType.ACCESSOR], keepAttributes: false });
  return async (document: Document) => {
    await document.transform(properties);
    await withSlotMaterialsDetached(document, attributes);
  };
}

/** Draco replaces any meshopt compression the source had (one geometry codec per file). */
function dracoCompress(settings: OptimizerSettings): Transform {
  const compress = draco(settings.draco);
  return async (document: Document) => {
    document
      .getRoot()
      .listExtensionsUsed()
      .find((e) => e.extensionName === 'EXT_meshopt_compression')
      ?.dispose();
    await document.transform(compress);
  };
}

/** The named steps, in order, minus the skipped ones. */
export function optimizeSteps(settings: OptimizerSettings = OPTIMIZER_SETTINGS, skip: ReadonlySet<StepName> = new Set()): OptimizeStep[] {
  // What a slot placeholder is (names, material) is the slot engine's definition.
  const keepSlots = (node: Node) => !isSlotNode(node);
  const steps: OptimizeStep[] = [
    { name: 'dedup', transform: dedup({ keepUniqueNames: true }) },
    { name: 'palette', transform: paletteExceptSlots() },
    { name: 'join', transform: join({ filter: keepSlots }) },
    { name: 'weld', transform: weld() },
    { name: 'prune', transform: pruneExceptSlotAttributes() },
    { name: 'textures', transform: compressTextures(settings) },
    { name: 'draco', transform: dracoCompress(settings) },
  ];
  return steps.filter((s) => !skip.has(s.name));
}

interface SlotNodeFact {
  name: string;
  material: string | null;
}

const slotNodeFacts = (document: Document): SlotNodeFact[] =>
  document
    .getRoot()
    .listNodes()
    .filter((n) => SLOT_NAME_PATTERN.test(n.getName().trim()))
    .map((n) => ({ name: n.getName(), material: n.getMesh()?.listPrimitives()[0]?.getMaterial()?.getName() ?? null }));

export interface OptimizeInput {
  /** The source model as GLB (what model_url serves): the size to stay under. */
  source: Uint8Array;
  /** A fresh Document of the source; called once per attempt (optimizing is destructive). */
  read: () => Promise<Document>;
  /** Runs after the steps and before writing (embeds the slot anchors); true when it changed the model. */
  finish?: (document: Document) => boolean;
  settings?: OptimizerSettings;
  /** A Document already read (and used for slots) for the first attempt, to save a parse. */
  first?: Document;
  /**
   * Given a copy of the first attempt's document after every step before Draco (what the model
   * variants are made from, bake/variants.ts), before the slot anchors are embedded.
   */
  prepared?: (document: Document) => void;
}

export interface OptimizeResult {
  glb: Uint8Array;
  /** Steps that ran, with their time in ms. */
  steps: Array<{ name: StepName | 'write' | 'finish'; ms: number }>;
  /** Steps left out because the output would otherwise have been larger than the source. */
  skipped: StepName[];
  /** True when the optimized model is the source file itself (nothing could make it smaller). */
  isSource: boolean;
  warnings: string[];
}

async function runAttempt(
  document: Document,
  settings: OptimizerSettings,
  skip: Set<StepName>,
  finish: OptimizeInput['finish'],
  prepared?: OptimizeInput['prepared'],
) {
  const steps: OptimizeResult['steps'] = [];
  const before = slotNodeFacts(document);
  for (const step of optimizeSteps(settings, skip)) {
    if (step.name === 'draco' && prepared) prepared(cloneDocument(document));
    const t0 = performance.now();
    await document.transform(step.transform);
    steps.push({ name: step.name, ms: performance.now() - t0 });
  }
  const after = new Map(slotNodeFacts(document).map((f) => [f.name, f.material]));
  for (const fact of before) {
    if (!after.has(fact.name)) throw new Error(`optimizer lost slot node ${fact.name}`);
    if (after.get(fact.name) !== fact.material) throw new Error(`optimizer changed the material of slot node ${fact.name}`);
  }
  let t0 = performance.now();
  const embedded = finish ? finish(document) : false;
  if (finish) steps.push({ name: 'finish', ms: performance.now() - t0 });
  t0 = performance.now();
  const glb = await writeGlb(document, { compact: true });
  steps.push({ name: 'write', ms: performance.now() - t0 });
  return { glb, steps, embedded };
}

/**
 * Optimize a model, never returning something larger than the source: first with every step,
 * then without Draco (tiny or already-compressed geometry), then without re-encoding textures
 * too, and finally — when nothing has to be embedded — the source itself.
 */
export async function optimizeModel(input: OptimizeInput): Promise<OptimizeResult> {
  const settings = input.settings ?? OPTIMIZER_SETTINGS;
  const limit = input.source.byteLength;
  const plans: StepName[][] = [[], ['draco'], ['draco', 'textures']];
  let best: { glb: Uint8Array; steps: OptimizeResult['steps']; skipped: StepName[] } | null = null;
  let embedded = false;
  for (const [i, skipped] of plans.entries()) {
    const document = i === 0 && input.first ? input.first : await input.read();
    const attempt = await runAttempt(document, settings, new Set(skipped), input.finish, i === 0 ? input.prepared : undefined);
    embedded = attempt.embedded;
    if (!best || attempt.glb.byteLength < best.glb.byteLength) best = { glb: attempt.glb, steps: attempt.steps, skipped };
    if (attempt.glb.byteLength <= limit) break;
  }
  const result = best!;
  const warnings: string[] = [];
  if (result.glb.byteLength > limit && !embedded) {
    warnings.push(`no optimization made the model smaller than its ${limit}-byte source; the optimized model is the source`);
    return { glb: input.source, steps: result.steps, skipped: [...STEP_NAMES], isSource: true, warnings };
  }
  if (result.glb.byteLength > limit) {
    warnings.push(
      `optimized model is ${result.glb.byteLength - limit} bytes larger than its source because the slot anchors were embedded in it`,
    );
  }
  if (result.skipped.length)
    warnings.push(`optimizer skipped ${result.skipped.join(' and ')}: the output was larger than the source with it`);
  return { glb: result.glb, steps: result.steps, skipped: result.skipped, isSource: false, warnings };
}
