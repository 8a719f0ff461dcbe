/**
 * Read the published manifest in a worker thread (issue 43): parsing and validating a manifest of
 * 200,000 artworks takes seconds of CPU, which on the main thread would stall every request. The
 * artworks arrive in chunks, the next asked for once the last is taken, so no task here is long.
 */
import { Worker } from 'node:worker_threads';
import type { Manifest } from '../artifacts/format.ts';

export type ManifestPiece =
  | { kind: 'none' }
  | { kind: 'head'; manifest: Manifest }
  | { kind: 'artworks'; artworks: Manifest['artworks'] }
  | { kind: 'end' }
  | { kind: 'error'; message: string };

export interface ManifestReadOptions {
  /** Artworks per message. */
  chunk: number;
  /** A reader that has not finished by then is stopped (the previous snapshot stays). */
  timeoutMs: number;
}

/** The defaults of ManifestReadOptions, exported beside them as glTF-Transform's functions do. @public */
export const MANIFEST_READ_DEFAULTS: ManifestReadOptions = { chunk: 500, timeoutMs: 120_000 };

/** The worker entry: the TypeScript source from source (through the tsx bootstrap), the bundle from dist/. */
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const ENTRY = new URL(FROM_SOURCE ? './manifest-worker.ts' : './manifest-worker.mjs', import.meta.url);
const BOOTSTRAP = new URL('../bake/worker-bootstrap.mjs', import.meta.url);

/** The published manifest (null when none is published), read, parsed and validated off the main thread. */
export function readManifestOffThread(dataDir: string, options: Partial<ManifestReadOptions> = {}): Promise<Manifest | null> {
  const { chunk, timeoutMs } = { ...MANIFEST_READ_DEFAULTS, ...options };
  const worker = FROM_SOURCE
    ? new Worker(BOOTSTRAP, { argv: [ENTRY.href], workerData: { dataDir, chunk }, execArgv: [] })
    : new Worker(ENTRY, { workerData: { dataDir, chunk }, execArgv: [] });
  return new Promise<Manifest | null>((resolve, reject) => {
    let head: Manifest | null = null;
    // Appended piece by piece: one flat() of 400 pieces at the end was a 50 ms task.
    const artworks: Manifest['artworks'] = [];
    const timer = setTimeout(() => finish(new Error(`reading the manifest took over ${timeoutMs} ms`)), timeoutMs);
    const finish = (err: Error | null, manifest: Manifest | null = null) => {
      clearTimeout(timer);
      worker.removeAllListeners();
      void worker.terminate();
      if (err) reject(err);
      else resolve(manifest);
    };
    worker.on('message', (piece: ManifestPiece) => {
      if (piece.kind === 'none') finish(null, null);
      else if (piece.kind === 'head' || piece.kind === 'artworks') {
        if (piece.kind === 'head') head = piece.manifest;
        else for (const artwork of piece.artworks) artworks.push(artwork);
        // The next piece once this task is done: requests get their turn between pieces.
        setImmediate(() => worker.postMessage('next'));
      } else if (piece.kind === 'end') finish(null, { ...head!, artworks });
      else finish(new Error(piece.message));
    });
    worker.on('error', (err) => finish(err));
    worker.on('exit', (code) => finish(new Error(`the manifest reader exited (${code}) before answering`)));
  });
}
