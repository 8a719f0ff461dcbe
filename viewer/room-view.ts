/**
 * One room on the stage: its model and its slot frames, loaded from the public routes any client
 * uses (the slot data from `/v1/rooms/{id}/slots`, the model from `/files/…`). Shared by the room
 * page and each room of an exhibition walk.
 */
import { Vector3 } from 'three';
import type { RoomSlot, RoomSlotData } from '../artifacts/format.ts';
import { type Frame, FrameSet } from './frames.ts';
import { chooseModel, type ModelChoice, type ViewRoom } from './page-data.ts';
import type { Stage } from './stage.ts';
import type { Navigation, Vec3 } from '../artifacts/navmesh.ts';

export interface LoadedRoom {
  frames: FrameSet | null;
  /** Why the model is not shown when the page gave up waiting for it (MODEL_TIMEOUT_MS), else null. */
  modelError: string | null;
  slotData: RoomSlotData | null;
  /** Problems to show (model failed, no slot data, stale slot data). */
  warnings: string[];
  modelLoadMs: number | null;
  /** The model shown (which variant, and why not the one asked for). */
  model: ModelChoice;
  /** performance.now() when the model's scene was parsed (ms since navigation start). */
  modelParsedAt: number | null;
}

/**
 * How long a room model may take (download, geometry decode, textures) before the page gives up on it.
 * A decoder that dies at start never answers: three's KTX2Loader, whose Basis transcoder worker fails
 * to start, leaves the model's promise pending for ever. The page option `?model_timeout=` (seconds)
 * changes it, for tests.
 */
export const MODEL_TIMEOUT_MS = 60_000;

class ModelTimeout extends Error {}

/** `stage.loadModel(url)`, rejected with a ModelTimeout after `ms`; a model that arrives after that is dropped. */
async function loadModelWithin(stage: Stage, url: string, ms: number): Promise<void> {
  const abandoned = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      abandoned.abort();
      reject(
        new ModelTimeout(
          `The room model did not load within ${Math.round(ms / 1000)} s: its decoder or texture transcoder ` +
            'may have failed to start. Reload the page to try again.',
        ),
      );
    }, ms);
  });
  try {
    await Promise.race([stage.loadModel(url, abandoned.signal), late]);
  } finally {
    clearTimeout(timer);
  }
}

async function fetchSlots(url: string): Promise<RoomSlotData> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`slot data answered ${res.status}`);
  return ((await res.json()) as { data: RoomSlotData }).data;
}

/** `asked`: the page's `?variant=`, or null for the fastest this browser can load. */
export async function loadRoom(stage: Stage, room: ViewRoom, asked: string | null, modelTimeoutMs = MODEL_TIMEOUT_MS): Promise<LoadedRoom> {
  const warnings: string[] = [];
  const slots = room.slotsUrl ? fetchSlots(room.slotsUrl) : Promise.resolve(null);
  const choice = chooseModel(room, asked, typeof WebAssembly === 'object');
  if (choice.notice) warnings.push(choice.notice);
  let modelLoadMs: number | null = null;
  let modelParsedAt: number | null = null;
  let modelError: string | null = null;
  const model = (async () => {
    if (!choice.url) {
      warnings.push('This room has no model yet.');
      return;
    }
    const started = performance.now();
    try {
      stage.preloadDecoders(choice.extensionsRequired);
      await loadModelWithin(stage, choice.url, modelTimeoutMs);
      modelParsedAt = performance.now();
      modelLoadMs = modelParsedAt - started;
      if (!room.modelOptimized) warnings.push('No optimized model is baked for this room; showing the source model.');
    } catch (err) {
      if (err instanceof ModelTimeout) {
        modelError = err.message;
        // A decoder stuck at start would hold the next room's model too: the next one starts afresh.
        stage.dropDecoders();
      }
      warnings.push(modelError ?? 'The room model could not be loaded.');
    }
  })();
  let slotData: RoomSlotData | null = null;
  try {
    slotData = await slots;
  } catch {
    warnings.push('The slot data could not be loaded.');
  }
  await model;
  if (!room.slotsUrl) warnings.push('No slot data has been baked for this room yet.');
  const stale = slotData && staleFor(slotData, choice.url);
  if (stale) warnings.push(stale);
  const frames = slotData ? new FrameSet(stage, slotData.slots) : null;
  return { frames, modelError, slotData, warnings, modelLoadMs, model: choice, modelParsedAt };
}

/** `/files/<sha256>.<ext>`: the file id is the name (artifacts/format.ts FILE_NAME_PATTERN; the bundle imports no zod). */
const FILE_URL = /\/files\/([0-9a-f]{64})\.[a-z0-9]{2,5}$/;

/** The file id of a `/files/<sha256>.glb` URL (RoomSlotData names files so), or null for any other URL. */
const fileIdOf = (url: string): string | null => FILE_URL.exec(new URL(url, 'http://origin.invalid').pathname)?.[1] ?? null;

/**
 * Why the slot data does not hold in the model shown, or null when it does: the shown file must be
 * its `model` or one of its `models` (the files the bake embedded its anchors in).
 */
function staleFor(slotData: RoomSlotData, shownUrl: string | null): string | null {
  const shown = shownUrl ? fileIdOf(shownUrl) : null;
  if (!shown || shown === slotData.model || slotData.models.includes(shown)) return null;
  return (
    `The slot data was baked for another model (${slotData.model.slice(0, 12)}…) than the one shown ` +
    `(${shown.slice(0, 12)}…): anchors may be wrong until the room is re-baked.`
  );
}

/** Where to stand to see a slot whole: in front of it along its facing, inside the open space. */
export function viewpointOf(slot: RoomSlot, fovDegrees: number): Vector3 {
  const span = Math.max(slot.width, slot.height);
  const wanted = (span * 0.75) / Math.tan((fovDegrees * Math.PI) / 360) + 0.2;
  const open = slot.clearance?.front;
  const distance = open && open > 0.3 ? Math.min(wanted, open * 0.85) : wanted;
  return new Vector3(...slot.position).addScaledVector(new Vector3(...slot.facing), Math.max(0.25, distance));
}

/**
 * Where a visitor stands to see a slot (feet): the bake's `view.position` when the slot data has
 * one (decisions.md "Walkable rooms"), else the viewpoint in front of it brought down onto the floor.
 */
export function standingPoint(slot: RoomSlot, stage: Stage, navigation: Navigation | null): Vector3 {
  // Slot data baked before walkable rooms has no view.
  const baked = slot.view?.position;
  if (baked) return new Vector3(...baked);
  const eye = viewpointOf(slot, stage.camera.fov);
  const floor: Vec3 = [eye.x, stage.floorAt(eye.x, eye.z), eye.z];
  return new Vector3(...(navigation?.closestPoint(floor) ?? floor));
}

export function describeSlot(frame: Frame): Array<[string, string]> {
  const s = frame.slot;
  const category = s.ambiguous ? 'ambiguous' : s.flipped ? 'flipped' : s.source;
  const rows: Array<[string, string]> = [
    ['Slot', `${s.id} (#${s.index})`],
    ['Source', `${s.source}${category !== s.source ? `, ${category}` : ''}`],
    ['Size', `${s.width.toFixed(2)} × ${s.height.toFixed(2)} m`],
    ['Position', s.position.map((v) => v.toFixed(3)).join(', ')],
    ['Facing', s.facing.map((v) => v.toFixed(2)).join(', ')],
  ];
  if (s.clearance) rows.push(['Clearance', `front ${s.clearance.front.toFixed(2)} m · back ${s.clearance.back.toFixed(2)} m`]);
  if (s.evidence) rows.push(['Evidence', s.evidence]);
  return rows;
}
