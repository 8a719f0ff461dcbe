/**
 * First-person walk, as a visitor moves: the eye 1.6 m above the floor, W/A/S/D or the arrow keys
 * to walk (Shift to hurry), drag to look around. No pointer lock, so it works in any embedding.
 */
import { Euler, type PerspectiveCamera, Vector3 } from 'three';

const EYE_HEIGHT = 1.6;
const SPEED = 1.4; // m/s, a gallery stroll
const LOOK = 0.004; // radians per pixel dragged

export class WalkControls {
  enabled = false;
  private readonly keys = new Set<string>();
  private readonly euler = new Euler(0, 0, 0, 'YXZ');
  private last = 0;
  private drag: { x: number; y: number } | null = null;

  constructor(
    private readonly camera: PerspectiveCamera,
    private readonly dom: HTMLElement,
    private readonly requestRender: () => void,
  ) {
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
    window.addEventListener('pointermove', (e) => {
      if (!this.enabled || !this.drag) return;
      this.euler.setFromQuaternion(this.camera.quaternion);
      this.euler.y -= (e.clientX - this.drag.x) * LOOK;
      this.euler.x = Math.max(-1.4, Math.min(1.4, this.euler.x - (e.clientY - this.drag.y) * LOOK));
      this.camera.quaternion.setFromEuler(this.euler);
      this.drag = { x: e.clientX, y: e.clientY };
      this.requestRender();
    });
  }

  /** Stand at `floor` (eye height above it), looking the way the orbit camera looked. */
  start(floor: Vector3, from: Vector3): void {
    this.enabled = true;
    const heading = floor.clone().sub(from).setY(0);
    this.camera.position.set(floor.x, floor.y + EYE_HEIGHT, floor.z);
    if (heading.lengthSq() > 1e-6) this.camera.lookAt(this.camera.position.clone().add(heading));
    this.last = performance.now();
  }

  stop(): void {
    this.enabled = false;
    this.keys.clear();
  }

  private moving(): boolean {
    return ['KeyW', 'KeyA', 'KeyS', 'KeyD', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight'].some((k) => this.keys.has(k));
  }

  /** Advance by the time since the last frame; asks for another frame while a key is held. */
  update(): void {
    const now = performance.now();
    const dt = Math.min(0.1, (now - this.last) / 1000);
    this.last = now;
    if (!this.enabled || !this.moving()) return;
    const forward = new Vector3();
    this.camera.getWorldDirection(forward);
    forward.setY(0).normalize();
    const right = new Vector3(-forward.z, 0, forward.x);
    const step = new Vector3();
    if (this.keys.has('KeyW') || this.keys.has('ArrowUp')) step.add(forward);
    if (this.keys.has('KeyS') || this.keys.has('ArrowDown')) step.sub(forward);
    if (this.keys.has('KeyD') || this.keys.has('ArrowRight')) step.add(right);
    if (this.keys.has('KeyA') || this.keys.has('ArrowLeft')) step.sub(right);
    const speed = SPEED * (this.keys.has('ShiftLeft') || this.keys.has('ShiftRight') ? 2.5 : 1);
    if (step.lengthSq() > 0) this.camera.position.addScaledVector(step.normalize(), speed * dt);
    this.requestRender();
  }
}
