/**
 * Writing and reading artifacts on disk. Every write is atomic (temp file + fsync + rename), so a
 * reader — the server, another bake, a killed bake's successor — only ever sees complete files.
 * Publishing a bake is one rename of manifest.json after every file it references exists.
 */
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlibConstants, gzip } from 'node:zlib';
import {
  artifactPaths,
  CONTENT_ENCODINGS,
  filePath,
  PRECOMPRESSED_EXTENSIONS,
  Manifest,
  MANIFEST_FORMAT,
  type FileExt,
  type FileRef,
} from './format.ts';

export const sha256 = (data: Uint8Array | string): string => createHash('sha256').update(data).digest('hex');

/**
 * The name of an atomic write's temp file, `<target>.<pid>.<random hex>.tmp` (group 1: the target's
 * name, group 2: the writing process): a write in progress, or one a kill left behind. A file whose
 * writer is no longer running is abandoned: the next bake (holding the lock) and `bake gc` remove it.
 */
export const TEMP_FILE_PATTERN = /^(.+)\.(\d+)\.[0-9a-f]+\.tmp$/;

/** A fresh temp name beside `path`, created by its writer with `wx` (O_EXCL: never through a planted link). */
const tempPathFor = (path: string): string => `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;

/** Whether a process with this pid is running (signal 0 checks without signalling; EPERM: it runs as another user). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether `name` is the temp file of a write whose process is gone (a killed bake or worker). */
export function isAbandonedTempFile(name: string): boolean {
  const writer = TEMP_FILE_PATTERN.exec(name)?.[2];
  if (writer === undefined) return false;
  const pid = Number(writer);
  return pid !== process.pid && !isRunning(pid);
}

/**
 * Remove the temp files of writers no longer running anywhere under `dataDir` (caller holds the bake
 * lock, so no other bake is writing; a live server's or worker's writes are kept). Returns their paths.
 */
export async function removeAbandonedTempFiles(dataDir: string): Promise<string[]> {
  const names = await fs.readdir(dataDir, { recursive: true }).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names.sort()) {
    if (!isAbandonedTempFile(basename(name))) continue;
    const path = join(dataDir, name);
    const stat = await fs.lstat(path).catch(() => null);
    if (!stat?.isFile()) continue;
    if (
      await fs.rm(path).then(
        () => true,
        () => false,
      )
    )
      removed.push(path);
  }
  return removed;
}

/** Write a file atomically: readers see the old content or the new, never a partial file. */
export async function writeFileAtomic(path: string, data: Uint8Array | string, mode = 0o644): Promise<void> {
  await fs.mkdir(dirname(path), { recursive: true });
  const tmp = tempPathFor(path);
  const handle = await fs.open(tmp, 'wx', mode);
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

/**
 * Compression levels of the precompressed siblings (part of the bake's settings, so of its key),
 * measured on the shared rooms' GLBs (source, draco, meshopt, plain): brotli 5 is within 0.1–2.2 %
 * of 9 at a fifth of its time or less (garage plain 776 KB: 51 vs 188 ms; 11 took 21.7 s on the
 * 2.6 MB cube-room source); gzip 6 is within 0.1 % of 9 (garage plain: 9 vs 82 ms).
 */
export const PRECOMPRESS_LEVELS = { brotliQuality: 5, gzipLevel: 6 };

const brotli = promisify(brotliCompress);
const gzipAsync = promisify(gzip);
const encoders: Record<(typeof CONTENT_ENCODINGS)[number]['suffix'], (data: Buffer) => Promise<Buffer>> = {
  br: (data) =>
    brotli(data, {
      params: {
        [zlibConstants.BROTLI_PARAM_QUALITY]: PRECOMPRESS_LEVELS.brotliQuality,
        [zlibConstants.BROTLI_PARAM_SIZE_HINT]: data.byteLength,
      },
    }),
  gz: (data) => gzipAsync(data, { level: PRECOMPRESS_LEVELS.gzipLevel }),
};

/**
 * The `.br` / `.gz` siblings of a compressible file, each written (atomically, on the thread pool)
 * when it is smaller than the file. An existing sibling is kept: same name, same content.
 */
async function putEncodedSiblings(path: string, data: Uint8Array | string): Promise<void> {
  const bytes = typeof data === 'string' ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  await Promise.all(
    CONTENT_ENCODINGS.map(async ({ suffix }) => {
      const target = `${path}.${suffix}`;
      if (
        await fs.stat(target).then(
          (s) => s.isFile(),
          () => false,
        )
      )
        return;
      const encoded = await encoders[suffix](bytes);
      if (encoded.byteLength < bytes.byteLength) await writeFileAtomic(target, encoded);
    }),
  );
}

/**
 * Store bytes under their content address; an existing file with that address is kept as is. GLB and
 * JSON files get their precompressed siblings first, so whoever sees the file sees them too.
 */
export async function putContentFile(dataDir: string, data: Uint8Array | string, ext: FileExt): Promise<FileRef> {
  const ref: FileRef = { sha256: sha256(data), ext, bytes: typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength };
  const path = filePath(dataDir, ref);
  if (PRECOMPRESSED_EXTENSIONS.has(ext)) await putEncodedSiblings(path, data);
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

/** Bake ids name history files: keep them to safe file-name characters. */
const historyName = (bakeId: string) => `${bakeId.replace(/[^A-Za-z0-9_.-]/g, '_')}.json`;

/**
 * Publish a manifest: the single atomic step that makes a bake visible. A copy goes to the history
 * (`manifests/<bake_id>.json`) first, so `bake gc` knows every manifest a server may still serve.
 */
export async function publishManifest(dataDir: string, manifest: Manifest): Promise<void> {
  const checked = Manifest.parse(manifest);
  const text = `${JSON.stringify(checked, null, 1)}\n`;
  const paths = artifactPaths(dataDir);
  await writeFileAtomic(join(paths.manifests, historyName(checked.bake_id)), text);
  await writeFileAtomic(paths.manifest, text);
}

export interface PublishedManifest {
  manifest: Manifest;
  /** Its history file (null: only manifest.json, published before the history existed). */
  path: string | null;
}

/** Every manifest of the history plus the current one, newest first. Throws on an unreadable one. */
export async function listManifests(dataDir: string): Promise<PublishedManifest[]> {
  const paths = artifactPaths(dataDir);
  const names = await fs.readdir(paths.manifests).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw err;
  });
  const found = new Map<string, PublishedManifest>();
  for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
    const path = join(paths.manifests, name);
    const manifest = Manifest.parse(JSON.parse(await fs.readFile(path, 'utf8')));
    found.set(manifest.bake_id, { manifest, path });
  }
  const current = await readManifest(dataDir);
  if (current && !found.has(current.bake_id)) found.set(current.bake_id, { manifest: current, path: null });
  const list = [...found.values()];
  // The current manifest first, whatever the clocks said, then by publication time.
  const rank = (m: Manifest) => (current && m.bake_id === current.bake_id ? 1 : 0);
  return list.sort(
    (a, b) =>
      rank(b.manifest) - rank(a.manifest) ||
      b.manifest.published_at.localeCompare(a.manifest.published_at) ||
      b.manifest.bake_id.localeCompare(a.manifest.bake_id),
  );
}

/** Another bake holds the data directory; one line for operators. */
export class DataDirBusyError extends Error {
  override name = 'DataDirBusyError';
}

interface LockHolder {
  pid: number;
  host: string;
  started_at: string;
}

const parseHolder = (text: string): LockHolder | null => {
  try {
    return JSON.parse(text) as LockHolder;
  } catch {
    return null;
  }
};

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, owned by someone else
  }
};

/**
 * Remove a dead holder's lock so that the next link attempt can take it. Several bakes may find the
 * same dead holder: only the one holding `<lock>.takeover` removes it, and only while it is still
 * that same file (inode), so a live lock created meanwhile is never removed. A takeover lock left
 * by a bake killed in those few milliseconds is cleared after a few seconds.
 */
async function removeDeadLock(path: string, mine: string, deadIno: number): Promise<void> {
  const takeover = `${path}.takeover`;
  if (
    !(await fs.link(mine, takeover).then(
      () => true,
      () => false,
    ))
  ) {
    const left = await fs.stat(takeover).catch(() => null);
    if (left && Date.now() - left.mtimeMs > 10_000) await fs.rm(takeover, { force: true });
    return;
  }
  try {
    const now = await fs.stat(path).catch(() => null);
    if (now?.ino === deadIno) await fs.rm(path, { force: true });
  } finally {
    await fs.rm(takeover, { force: true });
  }
}

/** A bake taking the lock holds its `<lock>.<pid>.<random>.new` file for milliseconds. */
const LOCK_TEMP_MAX_AGE_MS = 60_000;

/**
 * The `.new` files of bakes killed while taking the lock (lockDataDir removes its own): a file whose
 * writer on this host no longer runs, or one older than a minute (another host's), is left over.
 */
async function removeStaleLockTemps(lockPath: string, host: string): Promise<void> {
  const prefix = `${basename(lockPath)}.`;
  const names = await fs.readdir(dirname(lockPath)).catch(() => [] as string[]);
  for (const name of names) {
    const pid = name.startsWith(prefix) ? /^(\d+)\.[0-9a-f]+\.new$/.exec(name.slice(prefix.length))?.[1] : undefined;
    if (!pid) continue;
    const file = join(dirname(lockPath), name);
    const [info, text] = await Promise.all([fs.stat(file).catch(() => null), fs.readFile(file, 'utf8').catch(() => null)]);
    if (!info) continue;
    const holder = text === null ? null : parseHolder(text);
    const writerGone = holder?.host === host && Number(pid) === holder.pid && !isAlive(holder.pid);
    if (writerGone || Date.now() - info.mtimeMs > LOCK_TEMP_MAX_AGE_MS) await fs.rm(file, { force: true });
  }
}

/**
 * One bake at a time per data directory. Two bakes publishing into one DATA_DIR would each write a
 * manifest built from the one they read, and the later would silently drop the other's rooms. The
 * lock file names its holder; a holder on this host that no longer runs (SIGKILL, power loss) is
 * taken over. Returns the release function.
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const path = artifactPaths(dataDir).lock;
  await fs.mkdir(dirname(path), { recursive: true });
  const me: LockHolder = { pid: process.pid, host: hostname(), started_at: new Date().toISOString() };
  await removeStaleLockTemps(path, me.host);
  // The lock appears with its holder already written in it (a hard link to a finished file), so a
  // second bake never reads a half-written lock: it names the holder, however the two interleave.
  const mine = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.new`;
  await fs.writeFile(mine, `${JSON.stringify(me)}\n`);
  try {
    return await takeLock(path, mine, dataDir, me.host);
  } finally {
    await fs.rm(mine, { force: true });
  }
}

async function takeLock(path: string, mine: string, dataDir: string, host: string): Promise<() => Promise<void>> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const created = await fs.link(mine, path).then(
      () => true,
      (err: NodeJS.ErrnoException) => {
        if (err.code === 'EEXIST') return false;
        throw err;
      },
    );
    if (created) {
      return async () => {
        await fs.rm(path, { force: true });
      };
    }
    const stale = await fs.stat(path).catch(() => null);
    if (!stale) continue; // released meanwhile
    const text = await fs.readFile(path, 'utf8').catch(() => null);
    if (text === null) continue; // released or taken over meanwhile
    const holder = parseHolder(text);
    // A holder that runs (or may run: another host) wins; so does an unreadable lock file younger
    // than a few seconds (a bake of an older version still writing it); an older one is a holder
    // killed while writing it.
    const starting = !holder && Date.now() - stale.mtimeMs < 10_000;
    if (starting || (holder && (holder.host !== host || isAlive(holder.pid)))) {
      const who = holder ? `pid ${holder.pid} on ${holder.host}, since ${holder.started_at}` : 'a bake that is starting';
      throw new DataDirBusyError(`${dataDir} is being baked by ${who}; wait for it, or remove ${path} if that bake is gone`);
    }
    await removeDeadLock(path, mine, stale.ino);
  }
  throw new DataDirBusyError(`${dataDir} is being baked by another process; try again`);
}
