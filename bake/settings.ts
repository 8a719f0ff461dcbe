/**
 * The bake's output-shaping settings and their id. Kept apart from the optimizer itself so that
 * deciding what to rebuild (the incremental key) does not load the image and geometry libraries.
 */
import { readFileSync } from 'node:fs';
import { PRECOMPRESS_LEVELS, sha256 } from '../artifacts/store.ts';

export const OPTIMIZER_SETTINGS = {
  /**
   * Bump when the step code changes in a way that changes output. 3: hostile-input checks (textures
   * must be images, SVG previews rasterized) — every room is re-checked once. 4: accessor bounds and
   * primitive modes written compactly (gltf-io compactJson). 5: Draco at speed 4 (see draco).
   * 6: meshopt and plain model variants, br/gz siblings of GLB and JSON files. 7: the plain variant's
   * vertex attributes not interleaved (bake/variants.ts PLAIN_VERTEX_LAYOUT). 8: textures whose alpha no
   * material reads encoded without it (bake/texture-alpha.ts). 9: generated placeholders in the original's
   * faint blue material, and slot data naming the optimized model (`model`, `source_model`, `models`).
   * 10: walkable rooms (navmesh GLB, spawn, every slot's view). 11: the ktx2 variant (bake/variants.ts toKtx2).
   */
  revision: 11,
  /** Walkable rooms (decisions.md); the same numbers as artifacts/navmesh.ts NAVMESH_AGENT and the view rule. */
  navmesh: { radius: 0.25, height: 1.8, step: 0.3, slope: 40, cellSize: 0.1, cellHeight: 0.1, detailSampleDist: 1, viewGrid: 0.25 },
  textures: {
    format: 'webp' as const,
    /** Longest side after resizing, in pixels. */
    maxSize: 2048,
    quality: 80,
    /**
     * Normal maps are lossy WebP like the other textures by default (decisions); `--lossless-normals`
     * keeps them exact. Either way the setting is part of the incremental key. `make bench-bake`
     * reports the angular error lossy encoding costs.
     */
    normalMapsLossless: false,
    /**
     * Lossless WebP effort (glTF-Transform's 0–100 scale; 17 is libwebp method 1) and quality (for
     * lossless, how hard to search). Measured on Avocado's 2048² normal map: 1.2 s and +0.6% bytes
     * against 2.8 s at sharp's defaults (method 4, quality 80); method 0 barely compresses.
     */
    lossless: { effort: 17, quality: 30 },
  },
  /** Images declaring more pixels than this fail their room before anything is decoded. */
  maxTexturePixels: 8192 * 8192,
  /**
   * glTF-Transform's DRACO_DEFAULTS (what `gltf-transform optimize --compress draco` uses: the same
   * method and quantization bits, so the same decoded geometry) but at speed 4 instead of 5. Draco
   * encodes at max(encodeSpeed, decodeSpeed), so both are 4. Speed 4 keeps speed 5's prediction
   * schemes (what the decoder does) and entropy-codes the same quantized values harder: on the
   * shared rooms 1.4 % (cube room) and 3.5 % (garage: 43,644 → 42,372 B, the 8 embedded anchors
   * included) smaller, the decoded triangles identical (test), encoding a few ms either way. Speeds
   * 0–3 switch prediction schemes: smaller on some models, 19 % larger on the garage.
   */
  draco: {
    method: 'edgebreaker' as const,
    encodeSpeed: 4,
    decodeSpeed: 4,
    quantizePosition: 14,
    quantizeNormal: 10,
    quantizeColor: 8,
    quantizeTexcoord: 12,
    quantizeGeneric: 12,
    quantizationVolume: 'mesh' as const,
  },
  /** The model variants beside the Draco model (bake/variants.ts; decisions, "Model variants"). */
  variants: {
    /** glTF-Transform's quantize defaults, as its `meshopt` (level high) uses them. */
    meshopt: { quantizePosition: 14, quantizeTexcoord: 12, quantizeColor: 8, quantizeNormal: 10, quantizationVolume: 'mesh' as const },
    /**
     * Longest texture side of the plain variant (what decoder-less worlds take), and its WebP effort
     * (glTF-Transform's 0–100; 33 is libwebp method 2): cube-room's 2048² PNG to 1024² took 138 ms
     * and 49.1 KB against 373 ms and 47.1 KB at sharp's default (method 4).
     */
    plain: { maxTextureSize: 1024, effort: 33 },
    /**
     * Basis Universal: ETC1S quality 1–255 and effort 0–6 for colour/data textures, UASTC level 0–3 for
     * normal maps. Effort 1 is basisu's own default (ktx2-encoder's is 2): cube-room's 2048² light map
     * encodes in 11.9 s instead of 19.7 s, 335 KB instead of 341 KB (bench/RESULTS.md).
     */
    ktx2: { etc1sQuality: 128, etc1sEffort: 1, uastcQuality: 1 },
  },
  /**
   * Precompressed `.br` / `.gz` siblings of GLB and JSON files (artifacts/store.ts), written when
   * they save bytes; the levels are measured there.
   */
  precompress: PRECOMPRESS_LEVELS,
};

/**
 * Limits on what a model may ask of the bake: memory, time, and what the slot engine expands. A
 * model over one fails its room alone (slot numbers are renumbered instead); the others bake on.
 * Not part of the incremental key: they never change the output of a room that bakes.
 */
export const BAKE_LIMITS = {
  /**
   * Accessor elements (count × components, summed over a model's accessors, zero-filled, sparse and
   * Draco-decoded ones included) a model may declare. glTF-Transform allocates them all on read: a
   * 250-byte .gltf declaring 1e8 VEC3 took 4.8 GB. The shared rooms declare 56k–210k; 5e7 (200 MB
   * per float copy) leaves 200× headroom.
   */
  maxAccessorElements: 50_000_000,
  /**
   * Triangles the slot engine expands into world space (a mesh counts once per node and instance
   * that draws it). The shared rooms draw 5,364 and 11,358, the densest shared model 30,720; a
   * million costs the engine ~180 MB more resident memory and under a second.
   */
  maxDrawnTriangles: 1_000_000,
  /**
   * A model variant (meshopt, plain) is at most this many times its source model's bytes, and at most
   * maxVariantBytes: decoding a compact source (Draco, points) into a plain GLB made one 61× its source.
   * Past either, the room publishes without its variants (the Draco model and anchors still do).
   */
  maxVariantSourceRatio: 64,
  maxVariantBytes: 256 * 1024 * 1024,
  /** Highest Slot_NNN / Auto_NNN number taken as written; a higher one is renumbered (warning). */
  maxSlotNumber: 9999,
  /** A room still baking after this is stopped (its worker terminated) and fails. */
  roomTimeoutMs: 300_000,
  /**
   * Resident memory bound of each bake worker as a whole, in MB (decisions: "a room's worker is bounded
   * in memory as a whole … 2 GB by default"): V8's heap, typed arrays, wasm memories (Draco, meshopt,
   * recast, Basis) and libvips's buffers. The parent reads it every 50 ms (bake/workers.ts); a worker
   * over it is killed and its room fails with one line naming the bound. Linux only (/proc): elsewhere
   * the heap cap and the time limit still bound a room, this does not. 0: no bound.
   */
  workerRssMb: 2048,
  /**
   * V8 old-generation cap per bake worker, in MB: part of the resident bound above, so never above
   * it. A worker baking the shared rooms peaks below 200 MB of heap; 1.5 GB is 7× that and leaves
   * the resident bound 0.5 GB for the rest of the process (code, wasm, buffers), so a room that grows
   * JavaScript objects fails at the heap limit (its clearer line) before the resident bound. An
   * explicit heap cap over the resident bound is refused; with a lower resident bound the default
   * heap cap is the resident bound.
   */
  workerHeapMb: 1536,
};

export type OptimizerSettings = Omit<typeof OPTIMIZER_SETTINGS, 'textures'> & {
  textures: Omit<(typeof OPTIMIZER_SETTINGS)['textures'], 'normalMapsLossless'> & { normalMapsLossless: boolean };
};

/** The default settings, with normal maps exact or lossy (`--lossless-normals`). */
export const withLosslessNormals = (lossless: boolean, settings: OptimizerSettings = OPTIMIZER_SETTINGS): OptimizerSettings =>
  lossless === settings.textures.normalMapsLossless
    ? settings
    : { ...settings, textures: { ...settings.textures, normalMapsLossless: lossless } };

/** The libraries whose output the settings control, at the versions package.json pins. */
const OUTPUT_LIBRARIES = ['@gltf-transform/core', '@gltf-transform/functions', 'sharp', 'draco3dgltf', 'meshoptimizer', 'ktx2-encoder'];
let pinned: Record<string, string> | null = null;
function pinnedVersions(): Record<string, string> {
  if (!pinned) {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> };
    pinned = Object.fromEntries(OUTPUT_LIBRARIES.map((name) => [name, pkg.dependencies[name] ?? 'unknown']));
  }
  return pinned;
}

/**
 * Names the optimizer configuration for the incremental key: the settings plus the versions of the
 * libraries whose output they control, so an upgrade re-bakes what it could change.
 */
export function optimizerSettingsId(settings: OptimizerSettings = OPTIMIZER_SETTINGS): string {
  return `opt${settings.revision}-${sha256(JSON.stringify({ settings, libraries: pinnedVersions() })).slice(0, 12)}`;
}
