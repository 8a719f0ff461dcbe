/**
 * The viewer page's entry: reads the page data the server embedded, builds the stage and runs the
 * room page or the exhibition walk. All text reaches the document through textContent, never as
 * markup. `window.museumViewer` exposes the state and the pick pass for tests and debugging.
 */
import './viewer.css';
import { SLOT_COLOURS, SLOT_LEGEND } from '../artifacts/slot-colours.ts';
import type { Frame } from './frames.ts';
import { hangPicture } from './frames.ts';
import type { ModelChoice, ViewData, ViewPlacement, ViewRoom } from './page-data.ts';
import { pictureTexture } from './pictures.ts';
import { describeSlot, type LoadedRoom, loadRoom, MODEL_TIMEOUT_MS, standingPoint, viewpointOf } from './room-view.ts';
import { disposeTree, Stage } from './stage.ts';
import { Vector3 } from 'three';
import type { Vec3 } from '../artifacts/navmesh.ts';
import { loadWalkableFloor, type WalkableFloor } from './navigation.ts';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

function el(tag: string, text?: string, cls?: string): HTMLElement {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

/** What the page reads of `GET /v1/guide/exhibitions/{id}/tour` (server/guide/tour.ts). */
interface TourRoute {
  rooms: Array<{
    uid: string;
    spawn: Vec3 | null;
    stops: Array<{ slot: string | null; view: { position: Vec3 } | null }>;
    path: Vec3[];
  }>;
}

const horizontalDistance = (a: Vec3, b: Vec3) => Math.hypot(a[0] - b[0], a[2] - b[2]);

/** The exhibition's tour route, or null when the server has none (the page then queries paths itself). */
async function fetchTour(id: string): Promise<TourRoute | null> {
  try {
    const res = await fetch(`/v1/guide/exhibitions/${encodeURIComponent(id)}/tour`);
    return res.ok ? ((await res.json()) as { data: TourRoute }).data : null;
  } catch {
    return null;
  }
}

/** A stop the tour reached: the placement, the slot and where the visitor stood (feet). */
export interface TourStop {
  placement: number;
  slot: string;
  /** Where the stop is seen from (the slot's view). */
  view: Vec3;
  /** Where the visitor stood on arriving. */
  visitor: Vec3;
}

interface HangState {
  hung: Array<{ slot: string; index: number; artwork: number | null; title: string; placeholder: boolean }>;
  notHung: Array<{ artwork: number | null; title: string }>;
}

/** The page's state and test hooks. */
class Viewer {
  ready = false;
  error: string | null = null;
  firstFullFrameMs: number | null = null;
  modelLoadMs: number | null = null;
  room: LoadedRoom | null = null;
  placement = 0;
  hang: HangState = { hung: [], notHung: [] };
  private readonly artworkBySlot = new Map<string, { title: string; artist: string | null }>();
  private shownRoom: ViewRoom | null = null;
  private floor: Promise<WalkableFloor | null> | null = null;
  /** Where walk mode's floor came from: the bake's navmesh, one built in the page, or none (walking freely). */
  floorSource: WalkableFloor['source'] | 'none' | null = null;
  /** Walks the exhibition's tour; resolves with the stops reached once at the last (exhibition pages only). */
  tour: () => Promise<TourStop[]> = () => Promise.reject(new Error('a room page has no tour'));

  constructor(
    readonly stage: Stage,
    readonly data: Extract<ViewData, { kind: 'room' | 'exhibition' }>,
  ) {}

  slots() {
    return (this.room?.frames?.frames ?? []).map((f) => ({ id: f.slot.id, index: f.slot.index }));
  }

  /** Put the camera in front of a slot; returns its centre on the canvas (CSS pixels). */
  focusSlot(id: string): { x: number; y: number } | null {
    const frame = this.room?.frames?.frames.find((f) => f.slot.id === id);
    if (!frame) return null;
    const centre = new Vector3(...frame.slot.position);
    this.stage.lookAt(centre, viewpointOf(frame.slot, this.stage.camera.fov));
    const p = centre.clone().project(this.stage.camera);
    const canvas = this.stage.renderer.domElement;
    return { x: ((p.x + 1) / 2) * canvas.clientWidth, y: ((1 - p.y) / 2) * canvas.clientHeight };
  }

  pickAt(x: number, y: number): string | null {
    return this.room?.frames?.pick(x, y)?.slot.id ?? null;
  }

  /** The colour shown at a canvas point (CSS pixels), read right after a render. */
  colourAt(x: number, y: number): [number, number, number] {
    const { renderer } = this.stage;
    this.stage.renderNow();
    const gl = renderer.getContext();
    const canvas = renderer.domElement;
    const ratio = canvas.width / canvas.clientWidth;
    const pixel = new Uint8Array(4);
    gl.readPixels(Math.floor(x * ratio), canvas.height - 1 - Math.floor(y * ratio), 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, pixel);
    return [pixel[0]!, pixel[1]!, pixel[2]!];
  }

  canvasRect() {
    const r = this.stage.renderer.domElement.getBoundingClientRect();
    return { left: r.left, top: r.top, width: r.width, height: r.height };
  }

  /**
   * Download and parse a model as the page does (its decoders started beside the download), not
   * shown; for benchmarks, in a fresh page, so the decoders' download and start are included.
   */
  async measureLoad(url: string, extensionsRequired: string[]): Promise<number> {
    const started = performance.now();
    this.stage.preloadDecoders(extensionsRequired);
    const gltf = await this.stage.newLoader().loadAsync(url);
    const ms = performance.now() - started;
    disposeTree(gltf.scene);
    return ms;
  }

  /** The model on stage: its variant (null: a room baked before variants) and when its scene was parsed. */
  model() {
    const loaded = this.room;
    return loaded ? { name: loaded.model.name, url: loaded.model.url, bytes: loaded.model.bytes, parsedAt: loaded.modelParsedAt } : null;
  }

  /** The walkable floor of the room shown, loaded the first time walk mode needs it. */
  walkableFloor(): Promise<WalkableFloor | null> {
    this.floor ??= loadWalkableFloor(this.shownRoom?.navmeshUrl ?? null, this.stage.model);
    return this.floor;
  }

  private dropFloor(): void {
    const floor = this.floor;
    this.floor = null;
    this.floorSource = null;
    this.stage.setNavigation(null);
    void floor?.then((f) => f?.navigation.destroy()).catch(() => undefined);
  }

  /** Enter or leave walk mode, at the room's spawn; walking keeps to the room's navmesh (say so when there is none). */
  async setWalking(on: boolean): Promise<void> {
    $<HTMLInputElement>('walk').checked = on;
    const note = $('walk-note');
    if (on && !this.stage.walk.enabled) {
      let why: string | null = null;
      try {
        const floor = await this.walkableFloor();
        this.stage.setNavigation(floor?.navigation ?? null);
        this.floorSource = floor?.source ?? 'none';
        if (!floor) why = 'No walkable floor: walking freely.';
        else if (floor.source === 'page') why = 'No baked navmesh: walking on a floor built from the model.';
      } catch (err) {
        this.floorSource = 'none';
        why = `Walking freely: ${err instanceof Error ? err.message : String(err)}.`;
      }
      note.textContent = why ?? '';
      note.hidden = why === null;
    }
    // The visitor enters at the room's spawn (decisions.md "Walkable rooms").
    const spawn = this.shownRoom?.spawn;
    this.stage.setWalking(on, spawn ? new Vector3(...spawn) : null);
  }

  /** Where the visitor stands in walk mode (feet, room frame, metres), or null when not walking. */
  visitor(): Vec3 | null {
    const walk = this.stage.walk;
    return walk.enabled ? (walk.feet.toArray() as Vec3) : null;
  }

  /** The triangles of the navmesh walk mode keeps to (room frame), or null without one: for checks. */
  walkFloorTriangles(): { positions: number[]; indices: number[] } | null {
    return this.stage.walk.navigation?.triangles() ?? null;
  }

  /**
   * Time `count` path queries on the shown room's navmesh between centres of its triangles (a fixed
   * sequence, so every run asks the same), for bench/viewer.ts: median and p95 in ms.
   */
  async measurePathQueries(count: number): Promise<{ count: number; medianMs: number; p95Ms: number; meanMs: number; triangles: number }> {
    const floor = await this.walkableFloor();
    if (!floor) throw new Error('this room has no walkable floor');
    const { positions, indices } = floor.navigation.triangles();
    const centre = (t: number): Vec3 => {
      const c: Vec3 = [0, 0, 0];
      for (let k = 0; k < 3; k++) for (let a = 0; a < 3; a++) c[a] += positions[3 * indices[3 * t + k]! + a]! / 3;
      return c;
    };
    const triangles = indices.length / 3;
    const times: number[] = [];
    // performance.now() is coarse (0.1 ms) in a page without cross-origin isolation: the mean over the batch too.
    const batch = performance.now();
    for (let i = 0; i < count; i++) {
      const [a, b] = [centre((i * 7919) % triangles), centre(((i * 104729 + triangles / 2) % triangles) | 0)];
      const started = performance.now();
      floor.navigation.path(a, b);
      times.push(performance.now() - started);
    }
    const meanMs = (performance.now() - batch) / count;
    times.sort((x, y) => x - y);
    const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!;
    return { count, medianMs: at(0.5), p95Ms: at(0.95), meanMs, triangles };
  }

  /** In walk mode, turn to look at a point. */
  faceToward(point: Vec3): void {
    this.stage.walk.face(new Vector3(...point));
  }

  /** Where a visitor stands to see a slot (feet, room frame), on the walkable floor when walking. */
  viewOf(id: string): Vec3 | null {
    const frame = this.room?.frames?.frames.find((f) => f.slot.id === id);
    return frame ? (standingPoint(frame.slot, this.stage, this.stage.walk.navigation).toArray() as Vec3) : null;
  }

  /** Walk to where a slot's artwork is seen (its view) along the navmesh, then face it; false if cancelled. */
  async walkToSlot(id: string): Promise<boolean> {
    const frame = this.room?.frames?.frames.find((f) => f.slot.id === id);
    if (!frame) return false;
    await this.setWalking(true);
    const walk = this.stage.walk;
    const target = standingPoint(frame.slot, this.stage, walk.navigation);
    const from = walk.feet.toArray() as Vec3;
    const path = walk.navigation?.path(from, target.toArray() as Vec3) ?? [];
    const points = path.length ? path.map((p) => new Vector3(...p)) : [target];
    return walk.walkRoute(points, new Vector3(...frame.slot.position));
  }

  /** Walk to every hung artwork in slot order with path queries (no tour route from the server). */
  async walkHung(placement: number): Promise<TourStop[]> {
    const stops: TourStop[] = [];
    for (const stop of this.hang.hung) {
      if (!(await this.walkToSlot(stop.slot))) throw new Error('the tour was interrupted');
      stops.push({ placement, slot: stop.slot, view: this.viewOf(stop.slot)!, visitor: this.visitor()! });
    }
    return stops;
  }

  /** Walk a room's tour route from its spawn, stop by stop (each stop's view is on the path), facing each artwork. */
  async walkTourRoom(placement: number, room: TourRoute['rooms'][number]): Promise<TourStop[]> {
    await this.setWalking(true);
    const walk = this.stage.walk;
    walk.placeFeet(new Vector3(...room.spawn!));
    const stops: TourStop[] = [];
    let at = 0;
    for (const stop of room.stops) {
      const frame = this.room?.frames?.frames.find((f) => f.slot.id === stop.slot);
      if (!stop.view || !frame) continue;
      const view = stop.view.position;
      // The stop's view is the path point nearest it from here on.
      let end = at;
      for (let k = at; k < room.path.length; k++)
        if (horizontalDistance(room.path[k]!, view) < horizontalDistance(room.path[end]!, view)) end = k;
      const points = room.path.slice(at, end + 1).map((p) => new Vector3(...p));
      at = end;
      if (!(await walk.walkRoute(points, new Vector3(...frame.slot.position)))) throw new Error('the tour was interrupted');
      stops.push({ placement, slot: frame.slot.id, view, visitor: this.visitor()! });
    }
    return stops;
  }

  showRecord(frame: Frame | null): void {
    const record = $('record');
    record.replaceChildren();
    if (!frame) {
      record.append(el('p', 'Click a frame to see its record.', 'hint'));
      return;
    }
    const dl = el('dl');
    const rows = describeSlot(frame);
    const artwork = this.artworkBySlot.get(frame.slot.id);
    if (artwork) rows.unshift(['Artwork', artwork.title], ['Artist', artwork.artist ?? 'unknown']);
    for (const [k, v] of rows) dl.append(el('dt', k), el('dd', v));
    record.append(dl);
  }

  setStatus(text: string): void {
    $('status').textContent = text;
  }

  showWarnings(warnings: string[]): void {
    const box = $('warning');
    box.replaceChildren(...warnings.map((w) => el('p', w)));
    box.hidden = warnings.length === 0;
  }

  async showRoom(room: Parameters<typeof loadRoom>[1]): Promise<void> {
    this.room?.frames?.dispose();
    this.room = null;
    this.dropFloor();
    this.shownRoom = room;
    this.artworkBySlot.clear();
    this.showRecord(null);
    const loaded = await loadRoom(this.stage, room, this.data.variant, modelTimeoutMs());
    this.room = loaded;
    // The page gave up waiting for the model: say so where tests and operators look.
    this.error = loaded.modelError;
    this.modelLoadMs = loaded.modelLoadMs;
    this.showWarnings(loaded.warnings);
    this.showVariants(room, loaded.model);
    const count = loaded.frames?.frames.length ?? 0;
    this.setStatus(`${count} slot${count === 1 ? '' : 's'}`);
    if ($<HTMLInputElement>('facing').checked) loaded.frames?.showFacing(true);
  }

  /** Which model variant is shown, with links to the room's others (`?variant=`), for operators. */
  showVariants(room: ViewRoom, shown: ModelChoice): void {
    const box = $('model');
    const size = shown.bytes !== null ? ` (${(shown.bytes / 1024).toFixed(0)} KB)` : '';
    const label = shown.name ?? (room.modelOptimized ? 'draco (baked before variants)' : 'source model');
    box.replaceChildren(el('span', `Showing ${label}${size}.`));
    if (room.variants.length < 2) return;
    box.append(document.createTextNode(' Show: '));
    room.variants.forEach((v, i) => {
      const link = el('a', v.name) as HTMLAnchorElement;
      link.href = `?variant=${encodeURIComponent(v.name)}`;
      if (v.name === shown.name) link.setAttribute('aria-current', 'true');
      box.append(...(i ? [document.createTextNode(' · ')] : []), link);
    });
  }

  /** Hang a placement's artworks in order: artwork k on the slot with index k. */
  async hangPlacement(placement: ViewPlacement): Promise<void> {
    const frames = this.room?.frames;
    const hang: HangState = { hung: [], notHung: [] };
    const jobs: Array<Promise<void>> = [];
    placement.artworks.forEach((artwork, i) => {
      const frame = frames?.bySlotIndex(i + 1);
      if (!frame) {
        hang.notHung.push({ artwork: artwork.id, title: artwork.title });
        return;
      }
      const entry = { slot: frame.slot.id, index: frame.slot.index, artwork: artwork.id, title: artwork.title, placeholder: false };
      hang.hung.push(entry);
      this.artworkBySlot.set(frame.slot.id, { title: artwork.title, artist: artwork.artist });
      jobs.push(
        pictureTexture(artwork).then(({ texture, placeholder }) => {
          entry.placeholder = placeholder;
          hangPicture(frame, texture, artwork.ratio);
          this.stage.requestRender();
        }),
      );
    });
    await Promise.all(jobs);
    this.hang = hang;
    $('counts').textContent = `${hang.hung.length} hung · ${hang.notHung.length} not hung`;
    const list = $('not-hung');
    list.replaceChildren(...hang.notHung.map((a) => el('li', a.title)));
    $('not-hung-box').hidden = hang.notHung.length === 0;
  }
}

function buildLegend(): void {
  const legend = $('legend');
  for (const [category, text] of SLOT_LEGEND) {
    const item = el('li');
    const swatch = el('span', '', `swatch ${category}`);
    swatch.style.background = SLOT_COLOURS[category]; // CSSOM, which the page's CSP allows
    item.append(swatch, document.createTextNode(text));
    legend.append(item);
  }
}

function wireControls(viewer: Viewer): void {
  const { stage } = viewer;
  $('home').addEventListener('click', () => stage.home());
  const walk = $<HTMLInputElement>('walk');
  walk.addEventListener('change', () => void viewer.setWalking(walk.checked));
  const facing = $<HTMLInputElement>('facing');
  facing.addEventListener('change', () => viewer.room?.frames?.showFacing(facing.checked));
  // A click (not a drag) on the canvas picks the frame under it.
  const canvas = stage.renderer.domElement;
  let down: { x: number; y: number } | null = null;
  canvas.addEventListener('pointerdown', (e) => (down = { x: e.clientX, y: e.clientY }));
  canvas.addEventListener('pointerup', (e) => {
    if (!down || Math.hypot(e.clientX - down.x, e.clientY - down.y) > 4) return;
    const r = canvas.getBoundingClientRect();
    const frame = viewer.room?.frames?.pick(e.clientX - r.left, e.clientY - r.top) ?? null;
    viewer.showRecord(frame);
    // In walk mode a click on a frame walks to where it is seen.
    if (frame && stage.walk.enabled) void viewer.walkToSlot(frame.slot.id);
  });
}

async function runExhibition(viewer: Viewer, data: Extract<ViewData, { kind: 'exhibition' }>): Promise<void> {
  const nav = $('rooms');
  const buttons = data.placements.map((p, i) => {
    const button = el('button', `${i + 1}. ${p.title}`) as HTMLButtonElement;
    button.type = 'button';
    button.addEventListener('click', () => void go(i));
    nav.append(button);
    return button;
  });
  const go = async (i: number) => {
    viewer.ready = false;
    viewer.placement = i;
    buttons.forEach((b, j) => b.setAttribute('aria-current', String(i === j)));
    const placement = data.placements[i]!;
    $('room-title').textContent = `Room ${i + 1} of ${data.placements.length}: ${placement.title}`;
    if (placement.room) await viewer.showRoom(placement.room);
    else {
      viewer.room?.frames?.dispose();
      viewer.room = null;
      viewer.showWarnings(['The museum does not know this room: its artworks cannot be hung.']);
    }
    await viewer.hangPlacement(placement);
    viewer.stage.renderNow();
    viewer.ready = true;
  };
  $('prev').addEventListener('click', () => viewer.placement > 0 && void go(viewer.placement - 1));
  $('next').addEventListener('click', () => viewer.placement < data.placements.length - 1 && void go(viewer.placement + 1));
  // The live visitor count from the presence feed.
  const presence = new EventSource(data.presenceUrl);
  presence.onmessage = (e) => {
    try {
      const event = JSON.parse(e.data as string) as { here?: unknown };
      if (typeof event.here === 'number')
        $('visitors').textContent = `${event.here} ${event.here === 1 ? 'visitor' : 'visitors'} in the museum now`;
    } catch {
      // not a count
    }
  };
  // The tour: every room in order, in each its hung artworks in slot order, walked to and faced.
  const tour = async (): Promise<TourStop[]> => {
    const route = await fetchTour(data.id);
    const stops: TourStop[] = [];
    for (let i = 0; i < data.placements.length; i++) {
      await go(i);
      const room = route?.rooms.find((r) => r.uid === data.placements[i]!.uid);
      stops.push(...(room?.spawn ? await viewer.walkTourRoom(i, room) : await viewer.walkHung(i)));
    }
    return stops;
  };
  $('tour').addEventListener('click', () => void tour().catch(() => undefined));
  Object.assign(viewer, { goTo: go, tour });
  if (data.placements.length) await go(0);
  else {
    viewer.setStatus('This exhibition has no rooms.');
    viewer.ready = true;
  }
}

/** The page option `?walk_speed=` (a multiplier of the strolling speed, 0.1–20; tests walk fast with it). */
function walkSpeed(): number {
  const asked = Number(new URLSearchParams(location.search).get('walk_speed'));
  return Number.isFinite(asked) && asked >= 0.1 && asked <= 20 ? asked : 1;
}

/** The page option `?model_timeout=` (seconds, 1–600): how long a room model may take before the page gives up (tests). */
function modelTimeoutMs(): number {
  const asked = Number(new URLSearchParams(location.search).get('model_timeout'));
  return Number.isFinite(asked) && asked >= 1 && asked <= 600 ? asked * 1000 : MODEL_TIMEOUT_MS;
}

async function main(): Promise<void> {
  const data = JSON.parse($('view-data').textContent ?? 'null') as ViewData;
  if (data.kind === 'docs') return;
  const stage = new Stage($('stage'), data.decoders, { speed: walkSpeed() });
  const viewer = new Viewer(stage, data);
  (window as unknown as { museumViewer: Viewer }).museumViewer = viewer;
  buildLegend();
  wireControls(viewer);
  viewer.showRecord(null);
  // The first frame that shows the model with every slot frame, measured from navigation start.
  let firstFull = false;
  stage.onRender(() => {
    if (!firstFull && viewer.ready) {
      firstFull = true;
      viewer.firstFullFrameMs = performance.now();
    }
  });
  try {
    if (data.kind === 'room') {
      await viewer.showRoom(data.room);
      viewer.ready = true;
      stage.renderNow();
    } else {
      await runExhibition(viewer, data);
    }
  } catch (err) {
    viewer.error = err instanceof Error ? err.message : String(err);
    viewer.setStatus('The view could not be loaded.');
    viewer.ready = true;
  }
}

void main();
