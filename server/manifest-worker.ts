/**
 * The manifest reader's worker thread: reads, parses and validates the published manifest away from
 * the server's event loop, then posts it in pieces (see manifest-off-thread.ts) so that taking it in
 * costs the main thread one small message per task, never one large one.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { readManifest } from '../artifacts/store.ts';
import type { ManifestPiece } from './manifest-off-thread.ts';

const { dataDir, chunk } = workerData as { dataDir: string; chunk: number };
const post = (piece: ManifestPiece) => parentPort!.postMessage(piece);

try {
  const manifest = await readManifest(dataDir);
  if (manifest === null) post({ kind: 'none' });
  else {
    post({ kind: 'head', manifest: { ...manifest, artworks: [] } });
    for (let i = 0; i < manifest.artworks.length; i += chunk) post({ kind: 'artworks', artworks: manifest.artworks.slice(i, i + chunk) });
    post({ kind: 'end' });
  }
} catch (err) {
  post({ kind: 'error', message: err instanceof Error ? err.message : String(err) });
}
