/**
 * The 3D stage: renderer, camera, lights, the room model (GLTFLoader with the Draco and meshopt
 * decoders, served by this server and fetched only for a model that needs them), orbit controls
 * and a first-person walk at eye height. It renders on demand (a frame when something changed),
 * which keeps an idle tab cheap.
 */
import {
  AmbientLight,
  Box3,
  Color,
  DirectionalLight,
  HemisphereLight,
  LoadingManager,
  type Mesh,
  type Object3D,
  PerspectiveCamera,
  Raycaster,
  Scene,
  Texture,
  Vector3,
  WebGLRenderer,
} from 'three';
import { DRACOLoader } from 'three/examples/jsm/loaders/DRACOLoader.js';
import { GLTFLoader } from 'three/examples/jsm/loaders/GLTFLoader.js';
import { KTX2Loader } from 'three/examples/jsm/loaders/KTX2Loader.js';
import { OrbitControls } from 'three/examples/jsm/controls/OrbitControls.js';
import { type Decoders, DRACO_EXTENSION, MESHOPT_EXTENSION } from './page-data.ts';
import { type WalkOptions, WalkControls } from './walk.ts';
import type { Navigation } from '../artifacts/navmesh.ts';

/**
 * KTX2Loader fetches `<transcoder path>basis_transcoder.js` and `.wasm`; this server names them by content
 * hash, so a loading manager of its own maps those two fixed names onto the hashed URLs (three's public
 * URL modifier). The directory is a name only: nothing is served under it.
 */
const BASIS_DIR = '/view/assets/basis/';
function basisManager(basis: Decoders['basis']): LoadingManager {
  const urls: Record<string, string> = { [`${BASIS_DIR}basis_transcoder.js`]: basis.js, [`${BASIS_DIR}basis_transcoder.wasm`]: basis.wasm };
  return new LoadingManager().setURLModifier((url) => urls[url] ?? url);
}

/** Free the GPU resources of a subtree leaving the scene (geometries, materials, their textures). */
export function disposeTree(root: Object3D): void {
  root.traverse((o) => {
    const mesh = o as Partial<Mesh>;
    mesh.geometry?.dispose();
    for (const material of [mesh.material].flat()) {
      if (!material) continue;
      for (const value of Object.values(material)) if (value instanceof Texture) value.dispose();
      material.dispose();
    }
  });
}

type MeshoptDecoder = typeof import('three/examples/jsm/libs/meshopt_decoder.module.js').MeshoptDecoder;

/**
 * three's MeshoptDecoder, imported from this server the first time a model needs it: what
 * GLTFLoader calls of a decoder (`supported`, `ready`, `decodeGltfBufferAsync`). The decoder
 * decodes on the page's thread (no workers: a room decodes in milliseconds); it instantiates its
 * inlined wasm, which the page's CSP allows with 'wasm-unsafe-eval'.
 */
class LazyMeshoptDecoder {
  readonly supported = typeof WebAssembly === 'object';
  private decoder: Promise<MeshoptDecoder> | null = null;

  constructor(private readonly url: string) {}

  private load(): Promise<MeshoptDecoder> {
    if (!this.decoder) {
      const loading = (import(this.url) as Promise<{ MeshoptDecoder: MeshoptDecoder }>).then(async ({ MeshoptDecoder }) => {
        await MeshoptDecoder.ready;
        return MeshoptDecoder;
      });
      // Not kept when it failed: the next model asks again.
      loading.catch(() => {
        if (this.decoder === loading) this.decoder = null;
      });
      this.decoder = loading;
    }
    return this.decoder;
  }

  get ready(): Promise<void> {
    return this.load().then(() => undefined);
  }

  decodeGltfBufferAsync(count: number, size: number, source: Uint8Array, mode: string, filter?: string): Promise<Uint8Array> {
    return this.load().then((d) => d.decodeGltfBufferAsync(count, size, source, mode, filter));
  }
}

/** Node names of the model's own slot placeholders: the viewer draws frames from slot data instead. */
const PLACEHOLDER = /^(Slot|Auto)_\d{3,}$/;

export class Stage {
  readonly scene = new Scene();
  readonly camera = new PerspectiveCamera(60, 1, 0.05, 1000);
  readonly renderer: WebGLRenderer;
  readonly orbit: OrbitControls;
  readonly walk: WalkControls;
  model: Object3D | null = null;
  bounds = new Box3();
  private pending = false;
  private readonly listeners: Array<() => void> = [];

  private draco: DRACOLoader | null = null;
  private ktx2: KTX2Loader | null = null;
  private readonly meshopt: LazyMeshoptDecoder;

  constructor(
    readonly canvasHost: HTMLElement,
    private readonly decoders: Decoders,
    walkOptions: Partial<WalkOptions> = {},
  ) {
    this.meshopt = new LazyMeshoptDecoder(decoders.meshopt);
    this.renderer = new WebGLRenderer({ antialias: true });
    this.renderer.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
    this.canvasHost.append(this.renderer.domElement);
    this.scene.background = new Color('#1d2127');
    this.scene.add(new HemisphereLight('#ffffff', '#555048', 1.6), new AmbientLight('#ffffff', 0.4));
    const sun = new DirectionalLight('#ffffff', 1.6);
    sun.position.set(4, 10, 6);
    this.scene.add(sun);
    this.orbit = new OrbitControls(this.camera, this.renderer.domElement);
    this.orbit.addEventListener('change', () => this.requestRender());
    this.walk = new WalkControls(this.camera, this.renderer.domElement, () => this.requestRender(), walkOptions);
    this.walk.floorAt = (x, z) => this.floorAt(x, z);
    new ResizeObserver(() => this.resize()).observe(this.canvasHost);
    this.resize();
  }

  /** Called after each rendered frame (e.g. to note the first complete one). */
  onRender(fn: () => void): void {
    this.listeners.push(fn);
  }

  resize(): void {
    const { clientWidth: w, clientHeight: h } = this.canvasHost;
    if (!w || !h) return;
    this.renderer.setSize(w, h, false);
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
    this.renderNow();
  }

  requestRender(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.renderNow();
    });
  }

  renderNow(): void {
    this.walk.update();
    this.renderer.render(this.scene, this.camera);
    for (const fn of this.listeners) fn();
  }

  /**
   * A GLTF loader that can read any of the bake's variants. The page keeps one Draco decoder and
   * one meshopt decoder for all its rooms; neither is fetched before a model needs it (or
   * `preloadDecoders` asks). Decoding a room takes one or two Draco workers: more only compile
   * the wasm again on a small machine.
   */
  newLoader(): GLTFLoader {
    this.draco ??= this.makeDraco();
    this.ktx2 ??= this.makeKtx2();
    // GLTFLoader calls only what LazyMeshoptDecoder has of the decoder's interface.
    return new GLTFLoader()
      .setDRACOLoader(this.draco)
      .setKTX2Loader(this.ktx2)
      .setMeshoptDecoder(this.meshopt as unknown as MeshoptDecoder);
  }

  /** The Basis transcoder runs in one worker (fetched on the first KTX2 texture); formats from this renderer's GPU. */
  private makeKtx2(): KTX2Loader {
    return new KTX2Loader(basisManager(this.decoders.basis)).setTranscoderPath(BASIS_DIR).setWorkerLimit(1).detectSupport(this.renderer);
  }

  private makeDraco(): DRACOLoader {
    const workers = Math.max(1, Math.min(2, (navigator.hardwareConcurrency || 2) - 1));
    return new DRACOLoader().setDecoderPath({ js: this.decoders.draco.js, wasm: this.decoders.draco.wasm }).setWorkerLimit(workers);
  }

  /** Start fetching the decoders a model needs while the model downloads (else on its first mesh). */
  preloadDecoders(extensionsRequired: readonly string[]): void {
    if (extensionsRequired.includes(DRACO_EXTENSION)) {
      this.draco ??= this.makeDraco();
      this.draco.preload();
    }
    if (extensionsRequired.includes(MESHOPT_EXTENSION)) void this.meshopt.ready.catch(() => undefined);
  }

  /**
   * Forget the Draco and KTX2 loaders (their workers ended): a model whose load the page gave up on
   * may have one stuck at start, which would hold every later model too. The next model starts new ones.
   */
  dropDecoders(): void {
    this.draco?.dispose();
    this.ktx2?.dispose();
    this.draco = null;
    this.ktx2 = null;
  }

  /**
   * Load the room model, hide its own slot placeholders, and frame the camera on it. `abandoned`: the
   * page gave up on this load (a model parsed after that is freed, not shown).
   */
  async loadModel(url: string, abandoned?: AbortSignal): Promise<void> {
    const gltf = await this.newLoader().loadAsync(url);
    if (abandoned?.aborted) {
      disposeTree(gltf.scene);
      return;
    }
    if (this.model) {
      this.scene.remove(this.model);
      disposeTree(this.model);
    }
    this.model = gltf.scene;
    this.model.traverse((o) => {
      if (PLACEHOLDER.test(o.name)) o.visible = false;
    });
    this.scene.add(this.model);
    this.bounds = new Box3().setFromObject(this.model);
    this.home();
  }

  /** Orbit view of the whole room from above one corner, its bounding sphere filling the view. */
  home(): void {
    const box = this.bounds.isEmpty() ? new Box3(new Vector3(-5, 0, -5), new Vector3(5, 3, 5)) : this.bounds;
    const centre = box.getCenter(new Vector3());
    const radius = Math.max(box.getSize(new Vector3()).length() / 2, 1);
    const fov = (Math.min(this.camera.fov, this.camera.fov * this.camera.aspect) * Math.PI) / 180;
    const distance = (radius / Math.sin(fov / 2)) * 0.8;
    this.setWalking(false);
    this.camera.position.copy(centre).addScaledVector(new Vector3(0.45, 0.85, 0.75).normalize(), distance);
    this.orbit.target.copy(centre);
    this.orbit.update();
    this.requestRender();
  }

  /** Height of the floor under a point: a ray cast down onto the model, else the model's bottom. */
  floorAt(x: number, z: number): number {
    if (!this.model) return 0;
    const ray = new Raycaster(new Vector3(x, this.bounds.max.y + 1, z), new Vector3(0, -1, 0));
    const hits = ray.intersectObject(this.model, true).filter((h) => h.object.visible && h.face && h.face.normal.y > 0.5);
    // The lowest upward face under the point is the floor (not a table or a ceiling slab).
    return hits.length ? hits[hits.length - 1]!.point.y : this.bounds.min.y;
  }

  /** The walkable floor walk mode keeps to (null: walk freely); a visitor already walking is put on it. */
  setNavigation(navigation: Navigation | null): void {
    this.walk.navigation = navigation;
    if (this.walk.enabled) this.walk.placeFeet(this.walk.feet);
    this.requestRender();
  }

  /**
   * Enter or leave walk mode. The visitor enters at `enter` (the room's spawn: feet on its navmesh)
   * when the room has one, else on the floor under the orbit's target; looking the way the camera
   * looked (levelled).
   */
  setWalking(on: boolean, enter: Vector3 | null = null): void {
    if (on === this.walk.enabled) return;
    if (on) {
      const at = enter ?? this.orbit.target;
      // A spawn is on the navmesh already (its height included); without a navmesh the feet go on the model's floor.
      const feet = enter && this.walk.navigation ? enter.clone() : new Vector3(at.x, this.floorAt(at.x, at.z), at.z);
      const look = this.camera.getWorldDirection(new Vector3());
      // Looking straight down: the screen's up is the way ahead.
      if (Math.hypot(look.x, look.z) < 1e-3) look.set(0, 1, 0).applyQuaternion(this.camera.quaternion);
      this.walk.start(feet, look);
      this.orbit.enabled = false;
    } else {
      this.walk.stop();
      this.orbit.enabled = true;
    }
    this.requestRender();
  }

  /** Stand in front of a point looking at it (a slot's centre along its facing). */
  lookAt(point: Vector3, from: Vector3): void {
    this.setWalking(false);
    this.camera.position.copy(from);
    this.orbit.target.copy(point);
    this.orbit.update();
    this.renderNow();
  }
}
