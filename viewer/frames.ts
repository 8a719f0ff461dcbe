/**
 * Slot frames: every slot of the room's slot data drawn at its anchor as a numbered frame in the
 * QA report's colours (authored, generated, flipped, ambiguous), with an optional facing arrow and
 * an optional picture letterboxed into it. Picking is an id-coloured pass: each frame is painted
 * in a colour that encodes its number, everything else black, and the pixel under the pointer
 * names the frame — exact, and the same pass tests use to check what is on screen.
 */
import {
  ArrowHelper,
  BoxGeometry,
  CanvasTexture,
  Color,
  Group,
  LinearSRGBColorSpace,
  type Material,
  Mesh,
  MeshBasicMaterial,
  MeshStandardMaterial,
  type Object3D,
  PlaneGeometry,
  Quaternion,
  Sprite,
  SpriteMaterial,
  SRGBColorSpace,
  type Texture,
  Vector3,
  WebGLRenderTarget,
} from 'three';
import type { RoomSlot } from '../artifacts/format.ts';
import { SLOT_COLOURS, slotCategory } from '../artifacts/slot-colours.ts';
import { disposeTree, type Stage } from './stage.ts';

/** Frames stand this far in front of their anchor, so they never fight the wall for depth. */
const STANDOFF = 0.012;
const MATTE = '#e9e6df';

export interface Frame {
  slot: RoomSlot;
  group: Group;
  /** The area inside the border: artworks are letterboxed into it. */
  inner: { width: number; height: number };
  /** Meshes painted by the pick pass (border, matte, picture). */
  pickable: Mesh[];
  arrow: ArrowHelper;
  label: Sprite;
  picture: Mesh | null;
}

function numberLabel(index: number, colour: string): Sprite {
  const canvas = document.createElement('canvas');
  canvas.width = 128;
  canvas.height = 64;
  const g = canvas.getContext('2d')!;
  g.fillStyle = colour;
  g.beginPath();
  g.roundRect(4, 4, 120, 56, 14);
  g.fill();
  g.fillStyle = '#ffffff';
  g.font = 'bold 40px system-ui, sans-serif';
  g.textAlign = 'center';
  g.textBaseline = 'middle';
  g.fillText(String(index), 64, 34);
  const texture = new CanvasTexture(canvas);
  texture.colorSpace = SRGBColorSpace;
  const sprite = new Sprite(new SpriteMaterial({ map: texture, depthTest: true }));
  sprite.scale.set(0.3, 0.15, 1);
  return sprite;
}

function buildFrame(slot: RoomSlot): Frame {
  const colour = SLOT_COLOURS[slotCategory(slot)];
  const group = new Group();
  group.name = `frame:${slot.id}`;
  const facing = new Vector3(...slot.facing);
  group.position.set(...slot.position).addScaledVector(facing, STANDOFF);
  group.quaternion.copy(new Quaternion(...slot.quaternion));
  const { width: w, height: h } = slot;
  const border = Math.min(0.08, Math.max(0.02, Math.min(w, h) * 0.06));
  const depth = 0.03;
  const borderMaterial = new MeshStandardMaterial({ color: colour, roughness: 0.55 });
  const pickable: Mesh[] = [];
  const bar = (bw: number, bh: number, x: number, y: number) => {
    const mesh = new Mesh(new BoxGeometry(bw, bh, depth), borderMaterial);
    mesh.position.set(x, y, depth / 2);
    group.add(mesh);
    pickable.push(mesh);
  };
  bar(w, border, 0, (h - border) / 2);
  bar(w, border, 0, -(h - border) / 2);
  bar(border, h - 2 * border, -(w - border) / 2, 0);
  bar(border, h - 2 * border, (w - border) / 2, 0);
  const inner = { width: Math.max(0.01, w - 2 * border), height: Math.max(0.01, h - 2 * border) };
  const matte = new Mesh(new PlaneGeometry(inner.width, inner.height), new MeshStandardMaterial({ color: MATTE, roughness: 0.9 }));
  matte.position.z = depth * 0.4;
  group.add(matte);
  pickable.push(matte);
  const label = numberLabel(slot.index, colour);
  label.position.set(0, h / 2 + 0.13, depth);
  group.add(label);
  const arrow = new ArrowHelper(
    new Vector3(0, 0, 1),
    new Vector3(0, 0, depth),
    Math.max(0.5, Math.min(w, h)),
    new Color(colour).getHex(),
    0.15,
    0.1,
  );
  arrow.visible = false;
  group.add(arrow);
  return { slot, group, inner, pickable, arrow, label, picture: null };
}

/**
 * Hang a picture in a frame, letterboxed by its width/height ratio (never stretched): unlit, so
 * the artwork shows its own colours.
 */
export function hangPicture(frame: Frame, texture: Texture, ratio: number): void {
  if (frame.picture) {
    frame.group.remove(frame.picture);
    const old = frame.picture.material as MeshBasicMaterial;
    old.map?.dispose();
    old.dispose();
  }
  const { width: iw, height: ih } = frame.inner;
  const r = ratio > 0 && Number.isFinite(ratio) ? ratio : 1;
  const [pw, ph] = r > iw / ih ? [iw, iw / r] : [ih * r, ih];
  const picture = new Mesh(new PlaneGeometry(pw, ph), new MeshBasicMaterial({ map: texture, toneMapped: false }));
  picture.position.z = 0.03 * 0.4 + 0.002;
  frame.group.add(picture);
  frame.picture = picture;
  frame.pickable.push(picture);
  // The matte around a letterboxed picture is dark, as in a gallery mount.
  ((frame.pickable.find((m) => m.geometry instanceof PlaneGeometry) as Mesh).material as MeshStandardMaterial).color.set('#2b2b2b');
}

/** Id colour of frame number `n` (1-based position in the list): exact in an 8-bit target. */
const pickColour = (n: number) => new Color().setRGB((n & 0xff) / 255, ((n >> 8) & 0xff) / 255, 0xa5 / 255, LinearSRGBColorSpace);
const BLACK = new MeshBasicMaterial({ color: 0x000000 });

/** The frames of one room in the scene, and the pick pass over them. */
export class FrameSet {
  readonly frames: Frame[];
  readonly group = new Group();
  private readonly pickMaterials: MeshBasicMaterial[];
  private target: WebGLRenderTarget | null = null;

  constructor(
    private readonly stage: Stage,
    slots: RoomSlot[],
  ) {
    this.frames = [...slots].sort((a, b) => a.index - b.index).map(buildFrame);
    for (const frame of this.frames) this.group.add(frame.group);
    this.pickMaterials = this.frames.map((_, i) => new MeshBasicMaterial({ color: pickColour(i + 1), toneMapped: false }));
    stage.scene.add(this.group);
  }

  dispose(): void {
    this.stage.scene.remove(this.group);
    disposeTree(this.group);
    for (const m of this.pickMaterials) m.dispose();
    this.target?.dispose();
  }

  showFacing(on: boolean): void {
    for (const f of this.frames) f.arrow.visible = on;
    this.stage.requestRender();
  }

  bySlotIndex(index: number): Frame | undefined {
    return this.frames.find((f) => f.slot.index === index);
  }

  /** The frame under a point of the canvas (CSS pixels from its top left), or null. */
  pick(x: number, y: number): Frame | null {
    const { renderer, scene, camera } = this.stage;
    const canvas = renderer.domElement;
    const ratio = canvas.width / Math.max(1, canvas.clientWidth);
    const px = Math.floor(x * ratio);
    const py = Math.floor(y * ratio);
    if (px < 0 || py < 0 || px >= canvas.width || py >= canvas.height) return null;
    this.target ??= new WebGLRenderTarget(1, 1);
    // Render only the one pixel: a 1×1 view offset of the full camera.
    camera.setViewOffset(canvas.width, canvas.height, px, py, 1, 1);
    const restore = this.paintForPicking(scene);
    const background = scene.background;
    scene.background = new Color(0x000000);
    try {
      renderer.setRenderTarget(this.target);
      renderer.clear();
      renderer.render(scene, camera);
      const pixel = new Uint8Array(4);
      renderer.readRenderTargetPixels(this.target, 0, 0, 1, 1, pixel);
      if (pixel[2] !== 0xa5) return null;
      return this.frames[pixel[0]! + (pixel[1]! << 8) - 1] ?? null;
    } finally {
      renderer.setRenderTarget(null);
      scene.background = background;
      restore();
      camera.clearViewOffset();
    }
  }

  /** Swap every material for its pick colour (frames) or black (the rest); returns the undo. */
  private paintForPicking(scene: Object3D): () => void {
    const saved = new Map<Mesh | Sprite | ArrowHelper, Material | Material[] | boolean>();
    const own = new Map<Mesh, MeshBasicMaterial>();
    this.frames.forEach((f, i) => {
      for (const m of f.pickable) own.set(m, this.pickMaterials[i]!);
      saved.set(f.label, f.label.visible);
      saved.set(f.arrow, f.arrow.visible);
      f.label.visible = false;
      f.arrow.visible = false;
    });
    scene.traverse((o) => {
      if (!(o instanceof Mesh)) return;
      saved.set(o, o.material);
      o.material = own.get(o) ?? BLACK;
    });
    return () => {
      for (const [o, value] of saved) {
        if (typeof value === 'boolean') o.visible = value;
        else (o as Mesh).material = value;
      }
    };
  }
}
