/**
 * Writing and reading artifacts on disk. Every write is atomic (temp file + fsync + rename), so a
 * reader — the server, another bake, a killed bake's successor — only ever sees complete files.
 * Publishing a bake is one rename of manifest.json after every file it references exists.
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { dirname } from 'node:path';
import {
  artifactPaths,
  filePath,
  Manifest,
  MANIFEST_FORMAT,
  type FileExt,
  type FileRef,
} from './format.ts';

export const sha256 = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');

/** Write a file atomically: readers see the old content or the new, never a partial file. */
export async function writeFileAtomic(path: string, data: Uint8Array | string): Promise<void> {
  await fs.mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await fs.open(tmp, 'w');
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fs.rename(tmp, path);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

/** Store bytes under their content address; an existing file with that address is kept as is. */
export async function putContentFile(dataDir: string, data: Uint8Array | string, ext: FileExt): Promise<FileRef> {
  const ref: FileRef = { sha256: sha256(data), ext, bytes: typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength };
  const path = filePath(dataDir, ref);
  const existing = await fs.stat(path).catch(() => null);
  if (!existing || existing.size !== ref.bytes) await writeFileAtomic(path, data);
  return ref;
}

export const emptyManifest = (): Manifest => ({
  format: MANIFEST_FORMAT,
  bake_id: 'none',
  published_at: new Date(0).toISOString(),
  rooms: [],
  collections: [],
  artworks: [],
  report: null,
});

/** Read the published manifest; null when nothing was ever published. Throws on a corrupt one. */
export async function readManifest(dataDir: string): Promise<Manifest | null> {
  const text = await fs.readFile(artifactPaths(dataDir).manifest, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (text === null) return null;
  return Manifest.parse(JSON.parse(text));
}

/** Publish a manifest: the single atomic step that makes a bake visible. */
export async function publishManifest(dataDir: string, manifest: Manifest): Promise<void> {
  const checked = Manifest.parse(manifest);
  await writeFileAtomic(artifactPaths(dataDir).manifest, JSON.stringify(checked, null, 1) + '\n');
}
