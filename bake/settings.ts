/**
 * The bake's output-shaping settings and their id. Kept apart from the optimizer itself so that
 * deciding what to rebuild (the incremental key) does not load the image and geometry libraries.
 */
import { readFileSync } from 'node:fs';
import { sha256 } from '../artifacts/store.ts';

export const OPTIMIZER_SETTINGS = {
  /**
   * Bump when the step code changes in a way that changes output. 3: hostile-input checks (textures
   * must be images, SVG previews rasterized) — every room is re-checked once. 4: accessor bounds and
   * primitive modes written compactly (gltf-io compactJson). 5: Draco at speed 4 (see draco).
   */
  revision: 5,
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
};
export type OptimizerSettings = Omit<typeof OPTIMIZER_SETTINGS, 'textures'> & {
  textures: Omit<(typeof OPTIMIZER_SETTINGS)['textures'], 'normalMapsLossless'> & { normalMapsLossless: boolean };
};

/** The default settings, with normal maps exact or lossy (`--lossless-normals`). */
export const withLosslessNormals = (lossless: boolean, settings: OptimizerSettings = OPTIMIZER_SETTINGS): OptimizerSettings =>
  lossless === settings.textures.normalMapsLossless ? settings : { ...settings, textures: { ...settings.textures, normalMapsLossless: lossless } };

/** The libraries whose output the settings control, at the versions package.json pins. */
const OUTPUT_LIBRARIES = ['@gltf-transform/core', '@gltf-transform/functions', 'sharp', 'draco3dgltf', 'meshoptimizer'];
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
