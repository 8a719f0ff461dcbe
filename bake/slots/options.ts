/**
 * The slot engine's tunables: one place, one DEFAULTS object merged once at the engine's entry
 * (computeSlots), like glTF-Transform's `*_DEFAULTS: Required<Options>`. Changing a default
 * changes anchors: bump SLOT_ALGORITHM with it.
 */

export interface GenerationKindTunables {
  /** Smallest and largest frame side (metres). */
  minSize: number;
  maxSize: number;
  /** sin of the largest tilt from vertical a surface may have to carry a frame. */
  wallSin: number;
  /** Free space kept between frames, and around them. */
  gap: number;
  /** Free height kept below a frame (rooms: above the floor). */
  bottomClearance: number;
}

export interface SlotEngineTunables {
  /** Frame sizes (square, metres), largest first. */
  sizeLadder?: readonly number[];
  room?: GenerationKindTunables;
  sculpture?: GenerationKindTunables;
  /** Anchors sit this far in front of their surface (no z-fighting, unambiguous back side). */
  wallOffset?: number;
  /** Centre height of the first row of frames above the floor (rooms). */
  eyeHeight?: number;
  /** Surface samples drawn per model: a fixed number, so the picks never depend on the count. */
  samples?: number;
  /**
   * The density the first frames are sized and spread for. Not the onchain count: the first N
   * picks must be the same whatever the total (stable anchors).
   */
  referenceCount?: number;
  /** How far (metres, along its facing) a kept anchor's surface may have moved to be re-seated. */
  reseatTolerance?: number;
}

/** The sine of an angle given in degrees (the `wallSin` tunables are sines of tilts). */
const sinOfDegrees = (d: number) => Math.sin((d * Math.PI) / 180);

export const SLOT_ENGINE_DEFAULTS: Required<SlotEngineTunables> = {
  sizeLadder: [1.6, 1.4, 1.2, 1.0, 0.85, 0.7, 0.6, 0.5, 0.4, 0.32, 0.25, 0.2],
  room: { minSize: 0.32, maxSize: 1.6, wallSin: sinOfDegrees(10), gap: 0.1, bottomClearance: 0.3 },
  sculpture: { minSize: 0.2, maxSize: 1.0, wallSin: sinOfDegrees(20), gap: 0.1, bottomClearance: 0 },
  wallOffset: 0.005,
  eyeHeight: 1.5,
  samples: 8192,
  referenceCount: 12,
  reseatTolerance: 0.1,
};

/** The defaults with the given fields replaced (merged once, at the engine's entry). */
export const resolveTunables = (tunables: SlotEngineTunables = {}): Required<SlotEngineTunables> => ({
  ...SLOT_ENGINE_DEFAULTS,
  ...Object.fromEntries(Object.entries(tunables).filter(([, v]) => v !== undefined)),
});
