/**
 * The Basis transcoder as the viewer serves it (server/view/basis-transcoder.ts): it starts and
 * transcodes KTX2 textures where code generation from strings is forbidden, as under the viewer's
 * CSP (no 'unsafe-eval', inherited by KTX2Loader's blob: worker); three's own file does not.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import vm from 'node:vm';
import { encodeToKTX2 } from 'ktx2-encoder';
import { describe, expect, it } from 'vitest';
import { ViewerAssets } from '../../../server/view/assets.ts';
import { basisTranscoderWithoutEval } from '../../../server/view/basis-transcoder.ts';

const DIR = dirname(createRequire(import.meta.url).resolve('three/examples/jsm/libs/basis/basis_transcoder.wasm'));
const SOURCE = readFileSync(join(DIR, 'basis_transcoder.js'), 'utf8');
const WASM = readFileSync(join(DIR, 'basis_transcoder.wasm'));
/** basisu's transcoder_texture_format cTFRGBA32. */
const RGBA32 = 13;

interface KTX2File {
  isValid(): number;
  isUASTC(): boolean;
  getWidth(): number;
  getHeight(): number;
  getLevels(): number;
  startTranscoding(): number;
  getImageLevelInfo(level: number, layer: number, face: number): { origWidth: number; origHeight: number };
  getImageTranscodedSizeInBytes(level: number, layer: number, face: number, format: number): number;
  transcodeImage(dst: Uint8Array, level: number, layer: number, face: number, format: number, flags: number, a: number, b: number): number;
  close(): void;
  delete(): void;
}
interface Basis {
  initializeBasis(): void;
  KTX2File: new (bytes: Uint8Array) => KTX2File;
}

/** Run a transcoder's text in a context that refuses `eval`/`Function` (wasm allowed), as the page's worker. */
async function startWithoutEval(code: string): Promise<Basis> {
  const context = vm.createContext(
    { console, WebAssembly: Reflect.get(globalThis, 'WebAssembly') },
    { codeGeneration: { strings: false, wasm: true } },
  );
  vm.runInContext(`${code}\nthis.BASIS = BASIS;`, context);
  const factory = context.BASIS as (module: object) => Promise<unknown>;
  const basis = await new Promise<Basis>((resolve, reject) => {
    const module = { wasmBinary: WASM, onRuntimeInitialized: () => resolve(module as unknown as Basis), onAbort: reject };
    factory(module).catch(reject);
  });
  basis.initializeBasis();
  return basis;
}

/** A 32×32 RGBA gradient as PNG. */
async function gradientPng(): Promise<Uint8Array> {
  const { default: sharp } = await import('sharp');
  const data = Buffer.alloc(32 * 32 * 4);
  for (let y = 0; y < 32; y++) for (let x = 0; x < 32; x++) data.set([x * 8, y * 8, 128, 255], (y * 32 + x) * 4);
  return sharp(data, { raw: { width: 32, height: 32, channels: 4 } })
    .png()
    .toBuffer();
}

async function decodeRgba(image: Uint8Array) {
  const { default: sharp } = await import('sharp');
  const { data, info } = await sharp(image).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), width: info.width, height: info.height };
}

describe('the Basis transcoder served to the viewer', () => {
  it("three's file needs eval: it cannot start where code generation is forbidden", async () => {
    await expect(startWithoutEval(SOURCE)).rejects.toThrow(/Code generation from strings disallowed/);
  });

  it('starts without eval and transcodes ETC1S and UASTC KTX2 textures', async () => {
    const patched = basisTranscoderWithoutEval(SOURCE);
    expect(patched).not.toMatch(/newFunc\(Function/);
    const basis = await startWithoutEval(patched);
    const png = await gradientPng();
    for (const isUASTC of [false, true]) {
      const ktx2 = await encodeToKTX2(png, { isUASTC, generateMipmap: true, enableDebug: false, imageDecoder: decodeRgba } as Parameters<
        typeof encodeToKTX2
      >[1]);
      const file = new basis.KTX2File(new Uint8Array(ktx2));
      try {
        expect(file.isValid()).toBeTruthy();
        expect(file.isUASTC()).toBe(isUASTC);
        expect([file.getWidth(), file.getHeight()]).toEqual([32, 32]);
        expect(file.getLevels()).toBeGreaterThan(1);
        expect(file.startTranscoding()).toBeTruthy();
        expect(file.getImageLevelInfo(0, 0, 0)).toMatchObject({ origWidth: 32, origHeight: 32 });
        const rgba = new Uint8Array(file.getImageTranscodedSizeInBytes(0, 0, 0, RGBA32));
        expect(rgba.length).toBe(32 * 32 * 4);
        expect(file.transcodeImage(rgba, 0, 0, 0, RGBA32, 0, -1, -1)).toBeTruthy();
        // The gradient came back (lossy codecs: within a few levels).
        for (const [x, y] of [
          [2, 3],
          [20, 9],
          [30, 28],
        ] as const) {
          const i = (y * 32 + x) * 4;
          expect(Math.abs(rgba[i]! - x * 8), `${isUASTC} red at ${x},${y}`).toBeLessThan(24);
          expect(Math.abs(rgba[i + 1]! - y * 8), `${isUASTC} green at ${x},${y}`).toBeLessThan(24);
        }
      } finally {
        file.close();
        file.delete();
      }
    }
  }, 60_000);

  it('is the transcoder the pages are given', async () => {
    const assets = new ViewerAssets();
    const { files, urls } = await assets.load();
    const served = files.get(urls.decoders.basis.js.slice('/view/assets/'.length));
    expect(served?.body.toString('utf8')).toBe(basisTranscoderWithoutEval(SOURCE));
  });

  it('refuses a transcoder whose code-generation sites it does not know', () => {
    expect(() => basisTranscoderWithoutEval('var BASIS = 1;')).toThrow(/needs a new CSP patch/);
  });
});
