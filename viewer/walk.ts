/**
 * First-person walk, as a visitor moves: the eye 1.6 m above the feet, W/A/S/D or the arrow keys
 * to walk (Shift to hurry), drag to look around. No pointer lock, so it works in any embedding.
 * With a navmesh every step goes through its moveAlong (Detour moveAlongSurface): the visitor
 * slides along walls and never leaves the walkable floor. Routes (click-to-walk, the tour) are
 * walked waypoint by waypoint in the same frame loop.
 */
import { Euler, type PerspectiveCamera, Vector3 } from 'three';
import { NAVMESH_AGENT, type Navigation, type Vec3 } from '../artifacts/navmesh.ts';

const EYE_HEIGHT = 1.6;
const SPEED = 1.4; // m/s, a gallery stroll
const LOOK = 0.004; // radians per pixel dragged
/** A waypoint counts as reached within this many metres. */
const ARRIVED = 0.05;
/** Entering walk mode, the visitor faces a heading with at least this much floor straight ahead (m). */
const OPEN_AHEAD = 1;
const UP = new Vector3(0, 1, 0);

export interface WalkOptions {
  /** Walking speed multiplier (the page's `?walk_speed=`, for tests and demos); 1 = 1.4 m/s. */
  speed: number;
}

/** The defaults of WalkOptions, exported beside them as glTF-Transform's functions do. @public */
export const WALK_DEFAULTS: WalkOptions = { speed: 1 };

interface Route {
  points: Vector3[];
  face: Vector3 | null;
  done: (reached: boolean) => void;
}

export class WalkControls {
  enabled = false;
  /** The walkable floor, when the room has one; null walks freely at the start's height. */
  navigation: Navigation | null = null;
  /** Where the visitor stands (feet, room frame). */
  readonly feet = new Vector3();
  private readonly keys = new Set<string>();
  private readonly euler = new Euler(0, 0, 0, 'YXZ');
  private last = 0;
  private drag: { x: number; y: number } | null = null;
  private route: Route | null = null;
  private readonly options: WalkOptions;
  /** How far the navmesh lies above the model's floor (recast lays it about a cell height up). */
  private lift = 0;
  /** The model's floor height under a point (the stage's ray cast), to measure `lift`. */
  floorAt: ((x: number, z: number) => number) | null = null;

  constructor(
    private readonly camera: PerspectiveCamera,
    dom: HTMLElement,
    private readonly requestRender: () => void,
    options: Partial<WalkOptions> = {},
  ) {
    this.options = { ...WALK_DEFAULTS, ...options };
    window.addEventListener('keydown', (e) => {
      // Typing into a text field is not walking (checkboxes and buttons are fine).
      if (
        !this.enabled ||
        (e.target as HTMLElement | null)?.closest?.('input:not([type=checkbox]):not([type=button]),textarea,select,[contenteditable]')
      )
        return;
      this.keys.add(e.code);
      if (this.moving()) this.requestRender();
    });
    window.addEventListener('keyup', (e) => this.keys.delete(e.code));
    window.addEventListener('blur', () => this.keys.clear());
    dom.addEventListener('pointerdown', (e) => {
      if (this.enabled) this.drag = { x: e.clientX, y: e.clientY };
    });
    window.addEventListener('pointerup', () => (this.drag = null));
    window.addEventListener('pointermove', (e) => this.look(e));
  }

  private look(e: PointerEvent): void {
    if (!this.enabled || !this.drag) return;
    this.euler.setFromQuaternion(this.camera.quaternion);
    this.euler.y -= (e.clientX - this.drag.x) * LOOK;
    this.euler.x = Math.max(-1.4, Math.min(1.4, this.euler.x - (e.clientY - this.drag.y) * LOOK));
    this.camera.quaternion.setFromEuler(this.euler);
    this.drag = { x: e.clientX, y: e.clientY };
    this.requestRender();
  }

  /**
   * Stand at `floor` (snapped onto the navmesh; eye height above it), looking level along `heading`,
   * or, when a wall or the floor's edge is right ahead there, along the nearest heading that is open.
   */
  start(floor: Vector3, heading: Vector3): void {
    this.enabled = true;
    this.placeFeet(floor);
    const level = this.openHeading(heading.clone().setY(0));
    if (level.lengthSq() > 1e-6) this.camera.lookAt(this.camera.position.clone().add(level));
    this.last = performance.now();
  }

  /** How far (m, up to `limit`) walking straight along `dir` (level, unit) from the feet gets on the navmesh. */
  private reach(dir: Vector3, limit: number): number {
    const nav = this.navigation;
    if (!nav) return limit;
    const f = this.feet;
    const to = nav.moveAlong([f.x, f.y, f.z], [f.x + dir.x * limit, f.y, f.z + dir.z * limit]);
    return (to[0] - f.x) * dir.x + (to[2] - f.z) * dir.z;
  }

  /** `preferred` when the floor is open ahead (OPEN_AHEAD), else the nearest open heading (the most open when none is). */
  private openHeading(preferred: Vector3): Vector3 {
    if (!this.navigation || preferred.lengthSq() <= 1e-6) return preferred;
    const base = preferred.clone().normalize();
    let best = base;
    let bestReach = -Infinity;
    // 0, +15°, -15°, +30°, … 180°: the first open one is the nearest to the heading asked for.
    for (let k = 0; k <= 12; k++) {
      for (const sign of k === 0 || k === 12 ? [1] : [1, -1]) {
        const dir = base.clone().applyAxisAngle(UP, (sign * k * Math.PI) / 12);
        const reach = this.reach(dir, OPEN_AHEAD);
        if (reach >= OPEN_AHEAD * 0.99) return dir;
        if (reach > bestReach) [best, bestReach] = [dir, reach];
      }
    }
    return best;
  }

  stop(): void {
    this.enabled = false;
    this.keys.clear();
    this.cancelRoute();
  }

  /** Put the feet at `p` (its nearest navmesh point when there is a navmesh) and the eye above. */
  placeFeet(p: Vector3): void {
    const on = this.navigation?.closestPoint([p.x, p.y, p.z]);
    this.feet.set(...(on ?? ([p.x, p.y, p.z] as Vec3)));
    const floor = on && this.floorAt ? this.floorAt(this.feet.x, this.feet.z) : this.feet.y;
    this.lift = Math.max(0, Math.min(NAVMESH_AGENT.stepHeight, this.feet.y - floor));
    this.setEye();
  }

  /** Turn (about the vertical) to look at `point` from the eye. */
  face(point: Vector3): void {
    this.camera.lookAt(point);
    this.requestRender();
  }

  /**
   * Walk `points` (feet positions, in order) then face `face`; resolves true on arrival, false when
   * cancelled (a key, another route, leaving walk mode).
   */
  walkRoute(points: Vector3[], face: Vector3 | null): Promise<boolean> {
    this.cancelRoute();
    return new Promise((done) => {
      this.route = { points: points.map((p) => p.clone()), face, done };
      this.last = performance.now();
      this.requestRender();
    });
  }

  private cancelRoute(): void {
    const route = this.route;
    this.route = null;
    route?.done(false);
  }

  private moving(): boolean {
    return ['KeyW', 'KeyA', 'KeyS', 'KeyD', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight'].some((k) => this.keys.has(k));
  }

  /** Advance by the time since the last frame; asks for another frame while walking. */
  update(): void {
    const now = performance.now();
    const dt = Math.min(0.1, (now - this.last) / 1000);
    this.last = now;
    if (!this.enabled) return;
    if (this.moving()) {
      this.cancelRoute();
      this.stepByKeys(dt);
    } else if (this.route) this.stepOnRoute(dt);
    else return;
    this.requestRender();
  }

  private stepByKeys(dt: number): void {
    const forward = new Vector3();
    this.camera.getWorldDirection(forward);
    forward.setY(0).normalize();
    const right = new Vector3(-forward.z, 0, forward.x);
    const step = new Vector3();
    if (this.keys.has('KeyW') || this.keys.has('ArrowUp')) step.add(forward);
    if (this.keys.has('KeyS') || this.keys.has('ArrowDown')) step.sub(forward);
    if (this.keys.has('KeyD') || this.keys.has('ArrowRight')) step.add(right);
    if (this.keys.has('KeyA') || this.keys.has('ArrowLeft')) step.sub(right);
    const hurry = this.keys.has('ShiftLeft') || this.keys.has('ShiftRight') ? 2.5 : 1;
    if (step.lengthSq() > 0) this.moveTo(this.feet.clone().addScaledVector(step.normalize(), SPEED * this.options.speed * hurry * dt));
  }

  private stepOnRoute(dt: number): void {
    const route = this.route!;
    let budget = SPEED * this.options.speed * dt;
    while (budget > 0 && route.points.length) {
      const next = route.points[0]!;
      const to = next.clone().sub(this.feet).setY(0);
      const distance = to.length();
      if (distance <= ARRIVED) {
        route.points.shift();
        continue;
      }
      const stride = Math.min(budget, distance);
      budget -= stride;
      this.camera.lookAt(this.camera.position.clone().add(to));
      const before = this.feet.clone();
      this.moveTo(this.feet.clone().addScaledVector(to.normalize(), stride));
      // Reached, or held back by the navmesh's edge (a corner of the path): on to the next point.
      if (stride === distance || before.distanceTo(this.feet) < stride * 0.01) route.points.shift();
    }
    if (route.points.length) return;
    this.route = null;
    if (route.face) this.camera.lookAt(route.face);
    route.done(true);
  }

  /** One step: along the navmesh surface (sliding along walls) when there is one. */
  private moveTo(target: Vector3): void {
    const nav = this.navigation;
    if (nav) this.feet.set(...nav.moveAlong([this.feet.x, this.feet.y, this.feet.z], [target.x, target.y, target.z]));
    else this.feet.copy(target);
    this.setEye();
  }

  /** The eye EYE_HEIGHT above the floor under the feet. */
  private setEye(): void {
    this.camera.position.set(this.feet.x, this.feet.y - this.lift + EYE_HEIGHT, this.feet.z);
  }
}
