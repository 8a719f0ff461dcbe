/**
 * Baking one room: source model → model GLB (model_url), slots (from the SOURCE document),
 * optimized GLB (with generated Auto_NNN placeholders embedded), slot JSON, preview image and
 * thumbnail — every file content-addressed under DATA_DIR/files. Runs inside a pool worker for
 * `bake rooms` and in-process for `bake room`; it only reads local files (the main thread has
 * already fetched and hashed the sources).
 */
import { workerData } from 'node:worker_threads';
import sharp from 'sharp';
import type { z } from 'zod';
import type { Document } from '@gltf-transform/core';
import {
  type FileRef,
  type ManifestModelVariant,
  type RoomSlot,
  RoomSlotData,
  SLOT_DATA_VERSION,
  slotDataModels,
  type SlotSummary,
} from '../artifacts/format.ts';
import { putContentFile } from '../artifacts/store.ts';
import { bakeRoomNavigation } from './navigation/index.ts';
import { renderPlanPng } from './report.ts';
import {
  assertTextureSizes,
  optimizeModel,
  OPTIMIZER_SETTINGS,
  startTextureCompression,
  type OptimizerSettings,
  type StepName,
} from './optimize.ts';
import {
  compareSlots,
  computeSlots,
  embedAnchors,
  SLOT_ALGORITHM,
  type RoomKind,
  type SlotChanges,
  type SlotEngineResult,
} from './slots/index.ts';
import { readSource, readSourceModel, type ModelFiles, type SourceModel } from './source-model.ts';
import { makeThumbnail, publishablePreview } from './thumbnail.ts';
import {
  checkVariantSizes,
  glbFacts,
  makeVariants,
  type PlainTextures,
  startPlainTextures,
  type VariantGlb,
  VariantSizeError,
} from './variants.ts';
import { serveJobs } from './workers.ts';

export interface RoomJob {
  roomId: number;
  /** Onchain slot count. */
  onchainSlots: number;
  kind?: RoomKind;
  /** Local copies of the sources (main thread resolved them). */
  model: ModelFiles;
  image: { path: string } | null;
  dataDir: string;
  settings?: OptimizerSettings;
  /** The room's slot data as last published (stable anchors; what the re-bake changes is reported). */
  previousSlots?: RoomSlotData | null;
  /** Render the plan picture of the QA report (default true; `bake room` shows no report). */
  planPicture?: boolean;
  /** Make the meshopt and plain model variants (default true; bench-bake measures the Draco model alone). */
  modelVariants?: boolean;
}

/**
 * Wall time of the room's steps on its worker, ms. They overlap: image work (preview, textures) runs on
 * sharp's threads beside the engine, and the variants are made while the Draco model is encoded.
 */
export interface RoomStepTimes {
  /** Reading and checking the source model (the texture work then starts). */
  read_ms: number;
  /** The slot engine. */
  anchors_ms: number;
  /** The walkable floor: recast navmesh, spawn, every slot's view, its GLB written. */
  navmesh_ms: number;
  /** Waiting for the Draco model's textures once the engine and the navmesh are done. */
  textures_ms: number;
  /** The optimizer and the model variants, to the last variant stored. */
  optimize_ms: number;
  /** Of which the Basis encoder (RGBA decode included) for the ktx2 variant's textures; null: no ktx2 variant. */
  ktx2_encode_ms: number | null;
}

export interface RoomBakeResult {
  roomId: number;
  model: FileRef;
  model_optimized: FileRef;
  /** draco (= model_optimized), meshopt, plain: files and what loading each requires. */
  model_variants: ManifestModelVariant[];
  image: FileRef | null;
  thumbnail: FileRef | null;
  slot_data: FileRef;
  slot_summary: SlotSummary;
  /** The walkable floor and where a visitor enters (null when none could be built: see warnings). */
  navmesh: FileRef | null;
  spawn: [number, number, number] | null;
  /** What this bake did to the previously published anchors. */
  slotChanges: SlotChanges;
  /** The slot data as written (for the QA report). */
  slotData: RoomSlotData;
  /** What the QA report shows about the slots beyond the slot data: the plan picture is rendered here, on the lane. */
  engine: { kind: RoomKind; kindEvidence?: string; planPicture: FileRef | null };
  /** Everything operators should know: the engine's warnings, a shortfall, the optimizer's notes. */
  warnings: string[];
  /** The optimizer's notes alone (the report lists the engine's separately). */
  optimizerWarnings: string[];
  optimizer: { skipped: StepName[]; isSource: boolean; steps: Array<{ name: string; ms: number }> };
  /** Time making each model variant (from the prepared document to its GLB), ms. */
  variantsMs: Partial<Record<'meshopt' | 'plain' | 'ktx2', number>>;
  steps: RoomStepTimes;
  /** Source model GLB bytes → optimized GLB bytes. */
  bytesIn: number;
  bytesOut: number;
  ms: number;
}

function summarizeSlots(data: RoomSlotData): SlotSummary {
  return {
    count: data.slots.length,
    authored: data.slots.filter((s) => s.source === 'authored').length,
    generated: data.slots.filter((s) => s.source === 'generated').length,
    flipped: data.slots.filter((s) => s.flipped).length,
    ambiguous: data.slots.filter((s) => s.ambiguous).length,
    shortfall: data.shortfall ?? null,
  };
}

/** The slot data without the ids of the files it holds in (known once the models are written). */
const SlotAnchors = RoomSlotData.omit({ model: true, source_model: true, models: true });
type SlotAnchors = z.infer<typeof SlotAnchors>;

/**
 * Data as its JSON, parsed back with the schema the server's snapshot uses: engine output the
 * server would refuse (NaN written as null, a malformed id) fails this room alone, here.
 */
function checkedJson<T>(schema: z.ZodType<T>, data: T): string {
  const json = JSON.stringify(data);
  const checked = schema.safeParse(JSON.parse(json));
  if (checked.success) return json;
  const issues = checked.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`);
  throw new Error(`slot data fails the RoomSlotData schema: ${issues.join('; ')}`);
}

/** The slot data's JSON, checked as the server reads it. */
export const slotDataJson = (data: RoomSlotData): string => checkedJson(RoomSlotData, data);

/** A promise whose failure is reported where it is awaited, not as an unhandled rejection meanwhile. */
function started<T>(work: Promise<T>): Promise<T> {
  work.catch(() => undefined);
  return work;
}

/** image_url and the thumbnail (sharp, on its own threads). */
async function bakePreview(path: string, dataDir: string, maxPixels: number): Promise<{ image: FileRef; thumbnail: FileRef }> {
  const preview = await publishablePreview(await readSource(path, 'preview image'), maxPixels);
  const thumb = await makeThumbnail(preview.bytes, maxPixels);
  const [image, thumbnail] = await Promise.all([
    putContentFile(dataDir, preview.bytes, preview.ext),
    putContentFile(dataDir, thumb, 'webp'),
  ]);
  return { image, thumbnail };
}

/** The source model read and checked, model_url's GLB being stored, and the texture work started. */
async function readModel(job: RoomJob, settings: OptimizerSettings) {
  const source = await readSourceModel(job.model);
  assertTextureSizes(source.document, settings.maxTexturePixels);
  const model = started(putContentFile(job.dataDir, source.glb, 'glb'));
  // The textures change in the Document: model_url's GLB was packed above, and the engine never reads them.
  const plainTextures = job.modelVariants !== false ? startPlainTextures(source.document, settings) : null;
  const textures = started(startTextureCompression(source.document, settings));
  return { source, model, plainTextures, textures };
}

/** The slot anchors, placed on the source Document before the optimizer changes it; the plan picture started. */
function placeAnchors(job: RoomJob, source: SourceModel) {
  const slots = computeSlots(source.document, {
    roomId: job.roomId,
    onchainSlots: job.onchainSlots,
    modelSha256: source.sha256,
    kind: job.kind,
    previous: job.previousSlots ?? null,
    plan: job.planPicture !== false,
  });
  const anchors: SlotAnchors = {
    version: SLOT_DATA_VERSION,
    room: job.roomId,
    generated_at: new Date().toISOString(),
    algorithm: SLOT_ALGORITHM,
    slots: slots.slots,
    onchain_slots: job.onchainSlots,
    shortfall: slots.shortfall,
    warnings: slots.warnings,
  };
  // Checked before anything else is built from the anchors (plan picture, embedded nodes).
  checkedJson(SlotAnchors, anchors);
  return { slots, anchors };
}

/**
 * The slot data, once every model it holds in is written: `model` names the optimized (Draco)
 * model a client loads by default, `models` every variant in the room's order (decisions, "Artifacts").
 */
function slotDataOf(anchors: SlotAnchors, source: FileRef, variants: ManifestModelVariant[]): RoomSlotData {
  const draco = variants.find((v) => v.name === 'draco')?.file ?? null;
  const { version, room, ...rest } = anchors;
  return { version, room, ...slotDataModels({ source, optimized: draco, variants }), ...rest };
}

/**
 * The optimized (Draco) model, being stored, and the meshopt and plain variants, stored. The
 * variants start from the optimizer's document before Draco: their texture work runs on sharp's
 * threads while the Draco model is encoded and written, and their files are stored (br/gz siblings
 * compressed on libuv's threads) as soon as both are made, not after the Draco model.
 */
async function optimizeWithVariants(
  job: RoomJob,
  settings: OptimizerSettings,
  source: SourceModel,
  anchors: RoomSlot[],
  plainTextures: PlainTextures | undefined,
) {
  // The optimized model carries every anchor in its slot nodes (the source stays as it is).
  const finish = (document: Document) => {
    if (!anchors.length) return false;
    embedAnchors(document, anchors);
    return true;
  };
  const variantsWork: { started: Promise<Array<VariantGlb & { file: FileRef }>> | null } = { started: null };
  const storeVariants = (prepared: Document) =>
    makeVariants(prepared, settings, finish, plainTextures).then((made) => {
      checkVariantSizes(made, source.glb.byteLength);
      return Promise.all(made.map(async (v) => ({ ...v, file: await putContentFile(job.dataDir, v.glb, 'glb') })));
    });
  const withVariants = job.modelVariants !== false;
  const optimized = await optimizeModel({
    source: source.glb,
    read: source.read,
    first: source.document,
    settings,
    finish,
    prepared: withVariants ? (document) => (variantsWork.started = started(storeVariants(document))) : undefined,
  });
  if (optimized.isSource && anchors.length) {
    // Cannot happen (embedding forces a written model); guards the slot node contract.
    throw new Error('optimized model lost its slot anchors');
  }
  const draco = started(putContentFile(job.dataDir, optimized.glb, 'glb'));
  if (withVariants && !variantsWork.started) throw new Error('the optimizer gave no prepared document for the model variants');
  const { variants, variantsWarning } = await variantsWithinBounds(variantsWork.started);
  return { optimized, draco, variants, variantsWarning };
}

/** The stored variants, or none and the one line saying why when they are over their size bound. */
async function variantsWithinBounds<T>(work: Promise<T[]> | null): Promise<{ variants: T[]; variantsWarning: string | null }> {
  try {
    return { variants: work ? await work : [], variantsWarning: null };
  } catch (err) {
    if (err instanceof VariantSizeError) return { variants: [], variantsWarning: err.message };
    throw err;
  }
}

/** Everything operators should know, once each: the engine's warnings, a shortfall, the optimizer's notes. */
function roomWarnings(slots: SlotEngineResult, optimizerWarnings: string[]): string[] {
  const warnings = [...slots.warnings, ...optimizerWarnings];
  if (slots.shortfall)
    warnings.push(`only ${slots.shortfall.placed} of ${slots.shortfall.expected} slots placed: ${slots.shortfall.reason}`);
  return [...new Set(warnings)];
}

/**
 * Bake one room. Throws (one line) when the room cannot be baked; nothing is published here.
 * `onStep` hears each step as it begins (`bake room` shows them: a large model takes seconds).
 *
 * The slot engine is main-thread JavaScript; image work (preview, thumbnail, the model's textures,
 * the plan picture) runs on sharp's threads and file writes on libuv's. So the image and file work
 * starts first and runs while the engine does: every output is the same bytes as in sequence.
 */
export async function bakeRoom(job: RoomJob, onStep: (step: string) => void = () => {}): Promise<RoomBakeResult> {
  const startedAt = performance.now();
  let lap = startedAt;
  /** Time since the previous step ended. */
  const stepMs = () => {
    const [since, now] = [lap, performance.now()];
    lap = now;
    return now - since;
  };
  const settings = job.settings ?? OPTIMIZER_SETTINGS;
  const preview = job.image ? started(bakePreview(job.image.path, job.dataDir, settings.maxTexturePixels)) : null;
  onStep('reading the model');
  const { source, model, plainTextures, textures } = await readModel(job, settings);
  const readMs = stepMs();
  onStep('placing the slot anchors');
  const { slots, anchors } = placeAnchors(job, source);
  const anchorsMs = stepMs();
  onStep('finding the walkable floor');
  const walk = await bakeRoomNavigation(source.document, anchors.slots, job.dataDir);
  const navmeshMs = stepMs();
  anchors.slots = walk.slots;
  const planWalk = walk.floor && { ...walk.floor, spawn: walk.spawn };
  const planPicture =
    slots.plan && job.planPicture !== false
      ? started(renderPlanPng(slots.plan, anchors.slots, planWalk).then((png) => putContentFile(job.dataDir, png, 'png')))
      : null;
  onStep('compressing the textures');
  await textures;
  const texturesMs = stepMs();
  const plainTexturesKeyed = plainTextures?.keyed();
  onStep('optimizing the model');
  const { optimized, draco, variants, variantsWarning } = await optimizeWithVariants(
    job,
    settings,
    source,
    slots.slots,
    plainTexturesKeyed,
  );
  const optimizeMs = stepMs();

  const [modelRef, modelOptimized, dracoFacts] = await Promise.all([model, draco, glbFacts(optimized.glb)]);
  const modelVariants: ManifestModelVariant[] = [
    { name: 'draco', file: modelOptimized, ...dracoFacts },
    ...variants.map(({ name, file, extensions_required, max_texture_size }) => ({ name, file, extensions_required, max_texture_size })),
  ];
  // Written after the models: it names every file its anchors hold in.
  const slotData = slotDataOf(anchors, modelRef, modelVariants);
  const [slotFile, images, planRef] = await Promise.all([
    putContentFile(job.dataDir, slotDataJson(slotData), 'json'),
    preview,
    planPicture,
  ]);
  return {
    roomId: job.roomId,
    model: modelRef,
    model_optimized: modelOptimized,
    model_variants: modelVariants,
    image: images?.image ?? null,
    thumbnail: images?.thumbnail ?? null,
    slot_data: slotFile,
    slot_summary: summarizeSlots(slotData),
    navmesh: walk.navmesh,
    spawn: walk.spawn,
    slotChanges: compareSlots(job.previousSlots?.slots ?? null, slotData.slots),
    slotData,
    engine: { kind: slots.kind, kindEvidence: slots.kindEvidence, planPicture: planRef },
    warnings: [...roomWarnings(slots, variantsWarning ? [...optimized.warnings, variantsWarning] : optimized.warnings), ...walk.warnings],
    optimizerWarnings: optimized.warnings,
    optimizer: { skipped: optimized.skipped, isSource: optimized.isSource, steps: optimized.steps },
    variantsMs: Object.fromEntries(variants.map((v) => [v.name, v.ms])),
    steps: {
      read_ms: readMs,
      anchors_ms: anchorsMs,
      navmesh_ms: navmeshMs,
      textures_ms: texturesMs,
      optimize_ms: optimizeMs,
      ktx2_encode_ms: variants.find((v) => v.name === 'ktx2')?.encodeMs ?? null,
    },
    bytesIn: source.glb.byteLength,
    bytesOut: optimized.glb.byteLength,
    ms: performance.now() - startedAt,
  };
}

/** Entry of a pool worker (see workers.ts): bake the rooms it is sent. */
export function startRoomWorker(): void {
  const threads = (workerData as { imageThreads?: number } | null)?.imageThreads;
  if (threads) useImageThreads(threads);
  serveJobs(bakeRoom);
}

/** libvips threads are per process: a run with N lanes gives each its share of the cores. */
export function useImageThreads(threads: number): void {
  sharp.concurrency(threads);
}
