/**
 * The static assets of the viewer and docs pages, served from this server (no CDN, no network):
 * the browser bundle (built into dist/viewer by `make build`, never by the server: while that copy is
 * missing or older than a source, the pages answer 503 naming `make build`), three's Draco and
 * meshopt decoders and Basis transcoder (fetched by a page only for a model that needs one; the
 * transcoder without its eval, see basis-transcoder.ts), and swagger-ui-dist. Every
 * URL carries a content hash, so responses are immutable; bodies are held in memory (a fixed, small
 * set) with a gzip copy made on first use.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { readBuiltViewer, ROOT, VIEWER_OUT, type ViewerBundle } from '../../scripts/viewer-build.mjs';
import { HttpError } from '../errors.ts';
import { basisTranscoderWithoutEval } from './basis-transcoder.ts';
import type { Decoders } from '../../viewer/page-data.ts';

export const ASSET_PREFIX = '/view/assets/';
/** How long a missing or stale bundle is believed before dist/viewer is read again (so `make build` needs no restart). */
const RECHECK_MS = 5_000;

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  wasm: 'application/wasm',
  png: 'image/png',
};

export interface Asset {
  body: Buffer;
  type: string;
  etag: string;
  gzip(): Buffer | null;
}

export interface PageAssets {
  viewer: { js: string; css: string | null };
  docs: { js: string };
  decoders: Decoders;
  swagger: { js: string; css: string };
}

function asset(body: Buffer, ext: string): Asset {
  let gz: Buffer | null | undefined;
  return {
    body,
    type: TYPES[ext] ?? 'application/octet-stream',
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
    gzip() {
      // Compressed once; kept only when it saves something (wasm and png barely shrink).
      if (gz === undefined) {
        const packed = ext === 'png' ? null : gzipSync(body, { level: 9 });
        gz = packed && packed.length < body.length * 0.9 ? packed : null;
      }
      return gz;
    },
  };
}

const hashed = (stem: string, ext: string, body: Buffer) =>
  `${stem}-${createHash('sha256').update(body).digest('hex').slice(0, 12)}.${ext}`;

export class ViewerAssets {
  private loading: Promise<{ files: Map<string, Asset>; urls: PageAssets }> | null = null;

  /** `dir`: where the build wrote the bundle (dist/viewer; another copy in tests). */
  constructor(private readonly dir = VIEWER_OUT) {}

  /** Why the pages cannot be served now (one line naming `make build`), or null: for serve's start-up notes. */
  problem(): string | null {
    try {
      readBuiltViewer(this.dir);
      return null;
    } catch (err) {
      return unbuilt(err).message;
    }
  }

  /** Resolve the asset set; rejects with a 503 HttpError while dist/viewer is missing or stale. */
  load(): Promise<{ files: Map<string, Asset>; urls: PageAssets }> {
    this.loading ??= this.collect().catch((err) => {
      // A missing bundle is answered from this rejection for a while, not looked up per request.
      if (err instanceof HttpError) setTimeout(() => (this.loading = null), RECHECK_MS).unref();
      else this.loading = null;
      throw err;
    });
    return this.loading;
  }

  async get(name: string): Promise<Asset | undefined> {
    return (await this.load()).files.get(name);
  }

  async urls(): Promise<PageAssets> {
    return (await this.load()).urls;
  }

  private async collect(): Promise<{ files: Map<string, Asset>; urls: PageAssets }> {
    let bundle: ViewerBundle;
    try {
      bundle = readBuiltViewer(this.dir);
    } catch (err) {
      throw unbuilt(err);
    }
    const files = new Map<string, Asset>();
    for (const [name, bytes] of bundle.files) files.set(name, asset(Buffer.from(bytes), name.slice(name.lastIndexOf('.') + 1)));
    /** `transform`: the served text made from the package's file (hashed as served). */
    const add = (stem: string, path: string, transform?: (text: string) => string): string => {
      const body = transform ? Buffer.from(transform(readFileSync(path, 'utf8'))) : readFileSync(path);
      const ext = path.slice(path.lastIndexOf('.') + 1);
      const name = hashed(stem, ext, body);
      files.set(name, asset(body, ext));
      return ASSET_PREFIX + name;
    };
    // Resolved as packages (hoisted or not), from the project root.
    const resolve = createRequire(join(ROOT, 'package.json')).resolve;
    const dracoDir = dirname(resolve('three/examples/jsm/libs/draco/gltf/draco_decoder.wasm'));
    const swaggerDir = dirname(resolve('swagger-ui-dist/package.json'));
    const basisDir = dirname(resolve('three/examples/jsm/libs/basis/basis_transcoder.wasm'));
    const urls: PageAssets = {
      viewer: {
        js: ASSET_PREFIX + bundle.entries.viewer.js,
        css: bundle.entries.viewer.css ? ASSET_PREFIX + bundle.entries.viewer.css : null,
      },
      docs: { js: ASSET_PREFIX + bundle.entries.docs.js },
      decoders: {
        draco: {
          js: add('draco_wasm_wrapper', join(dracoDir, 'draco_wasm_wrapper.js')),
          wasm: add('draco_decoder', join(dracoDir, 'draco_decoder.wasm')),
        },
        meshopt: add('meshopt_decoder', resolve('three/examples/jsm/libs/meshopt_decoder.module.js')),
        basis: {
          // Without its runtime code generation, which the page's CSP (inherited by the blob: worker) forbids.
          js: add('basis_transcoder', join(basisDir, 'basis_transcoder.js'), basisTranscoderWithoutEval),
          wasm: add('basis_transcoder', join(basisDir, 'basis_transcoder.wasm')),
        },
      },
      swagger: {
        js: add('swagger-ui-bundle', join(swaggerDir, 'swagger-ui-bundle.js')),
        css: add('swagger-ui', join(swaggerDir, 'swagger-ui.css')),
      },
    };
    return { files, urls };
  }
}

/** The 503 of pages whose bundle is not built from the sources on disk. */
const unbuilt = (err: unknown) =>
  new HttpError(503, 'UNAVAILABLE', `The pages are unavailable: ${err instanceof Error ? err.message : String(err)}; run make build`);
