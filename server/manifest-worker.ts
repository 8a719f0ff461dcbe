/**
 * The manifest reader's worker thread: reads, parses and validates the published manifest away from
 * the server's event loop, then posts it in pieces, one each time the main thread asks (see
 * manifest-off-thread.ts), so taking it in costs the main thread one small message per task.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { readManifest } from '../artifacts/store.ts';
import type { ManifestPiece } from './manifest-off-thread.ts';

const { dataDir, chunk } = workerData as { dataDir: string; chunk: number };
const post = (piece: ManifestPiece) => parentPort!.postMessage(piece);

/**
 * One piece per 'next' from the main thread: messages already queued are all taken in one task
 * there, so sending every chunk at once would move the stall to their deserialization.
 */
function sendOnRequest(manifest: NonNullable<Awaited<ReturnType<typeof readManifest>>>): void {
  let next = 0;
  parentPort!.on('message', () => {
    if (next >= manifest.artworks.length) {
      post({ kind: 'end' });
      parentPort!.close();
      return;
    }
    post({ kind: 'artworks', artworks: manifest.artworks.slice(next, next + chunk) });
    next += chunk;
  });
  post({ kind: 'head', manifest: { ...manifest, artworks: [] } });
}

try {
  const manifest = await readManifest(dataDir);
  if (manifest === null) post({ kind: 'none' });
  else sendOnRequest(manifest);
} catch (err) {
  post({ kind: 'error', message: err instanceof Error ? err.message : String(err) });
}
