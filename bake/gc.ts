/**
 * `museum bake gc`: remove content-addressed files nobody can still be served.
 *
 * A file stays when any of these holds:
 *   - one of the last K published manifests references it (K = --keep, default 3; the current
 *     manifest is always one of them);
 *   - a manifest that references it was replaced less than the grace period ago (a server that has
 *     not reloaded yet still serves it);
 *   - the file itself is younger than the grace period (a bake may be about to reference it);
 *   - the QA facts (bake/qa-facts.ts) of a room of those manifests name it (its plan picture, which
 *     the next QA report embeds): kept manifests' rooms keep it, those of replaced manifests within
 *     the grace period keep it within the grace.
 * Everything else under files/ goes, as do temp files of killed writes: at once when their writer is
 * no longer running, else once older than the grace period.
 * The stale QA facts go first (see sweepQaFacts), and manifests of the history that protect nothing
 * any more are pruned last. gc only ever deletes what is unreferenced, one file at a time, so a kill
 * at any point loses nothing still referenced (the next gc finishes the job); it takes the bake
 * lock, so no bake publishes meanwhile.
 */
import { promises as fs } from 'node:fs';
import { join, resolve as resolvePath } from 'node:path';
import {
  artifactPaths,
  ENCODED_FILE_NAME_PATTERN,
  FILE_NAME_PATTERN,
  fileName,
  type Manifest,
  manifestFileRefs,
} from '../artifacts/format.ts';
import {
  DataDirBusyError,
  isAbandonedTempFile,
  listManifests,
  lockDataDir,
  type PublishedManifest,
  TEMP_FILE_PATTERN,
} from '../artifacts/store.ts';
import { QA_FACTS_NAME_PATTERN, qaFactsDir, readQaFactsFile } from './qa-facts.ts';

export interface GcOptions {
  /** Published manifests whose files are kept (the current one included). Default 3. */
  keep?: number;
  /** Milliseconds a replaced manifest's files, and any new file, are kept. Default 1 h. */
  graceMs?: number;
  /** List what would be removed; remove nothing. */
  dryRun?: boolean;
  /** The clock (tests). */
  now?: number;
  /** Told of each removal as it happens (or would happen, with dryRun); gc waits for it (output backpressure). */
  onRemove?: (removal: GcRemoval) => void | Promise<void>;
}

export interface GcRemoval {
  /** Relative to DATA_DIR: `files/<sha256>.<ext>` (or a temp file there), `cache/qa/<room>.json`. */
  path: string;
  bytes: number;
}

export interface GcSummary {
  data_dir: string;
  dry_run: boolean;
  /** Bake ids of the manifests whose files are kept, newest first. */
  kept_manifests: string[];
  /** Files kept because a replaced manifest or their own age is within the grace period. */
  in_grace: number;
  /** Files kept in all. */
  kept_files: number;
  removed: Array<{ name: string; bytes: number }>;
  removed_bytes: number;
  /** History manifests removed (they protect nothing any more). */
  pruned_manifests: string[];
  /** QA-facts cache files removed: rooms in none of the kept manifests, or not valid QA facts. */
  removed_qa_facts: Array<{ name: string; bytes: number }>;
}

const GC_DEFAULTS: Required<Omit<GcOptions, 'now' | 'onRemove'>> = { keep: 3, graceMs: 60 * 60 * 1000, dryRun: false };

/** The bake lock's refusal, or an unreadable manifest: gc removes nothing then. */
export class GcError extends Error {
  override name = 'GcError';
}

/** "90s", "15m", "1h", "2d" (or plain seconds) → milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new GcError(`not a duration: "${text}" (e.g. 30m, 1h, 2d)`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h' | 'd'];
  return Number(m[1]) * unit;
}

export async function collectGarbage(dataDir: string, options: GcOptions = {}): Promise<GcSummary> {
  const dir = resolvePath(dataDir);
  // Taking the lock would create the directory: a mistyped --out must not turn into an empty one.
  const isDir = await fs.stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) throw new GcError(`${dir} is not a data directory (it does not exist): nothing to collect`);
  const release = await lockDataDir(dir).catch((err: unknown) => {
    throw err instanceof DataDirBusyError ? new GcError(err.message) : err;
  });
  try {
    return await collectGarbageUnderLock(dir, options);
  } finally {
    await release();
  }
}

/** gc for a caller that already holds the bake lock (`bake rooms --gc`). */
export async function collectGarbageUnderLock(dataDir: string, options: GcOptions = {}): Promise<GcSummary> {
  const { keep, graceMs, dryRun } = { ...GC_DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
  if (!Number.isInteger(keep) || keep < 1) throw new GcError(`--keep must be a positive integer (got ${keep})`);
  if (!(graceMs >= 0)) throw new GcError(`--grace must be a duration of 0 or more (got ${graceMs})`);
  const run: GcRun = { dataDir, graceMs, dryRun, now: options.now ?? Date.now(), onRemove: options.onRemove ?? (() => {}) };
  const manifests = await listManifests(dataDir).catch((err: unknown) => {
    throw new GcError(
      `a published manifest is unreadable, so nothing is removed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`,
    );
  });
  const refs = referencesOf(manifests, keep, run);
  const summary: GcSummary = {
    data_dir: dataDir,
    dry_run: dryRun,
    kept_manifests: manifests.slice(0, keep).map((m) => m.manifest.bake_id),
    in_grace: 0,
    kept_files: 0,
    removed: [],
    removed_bytes: 0,
    pruned_manifests: [],
    removed_qa_facts: [],
  };
  await sweepQaFacts(run, refs, summary);
  await sweepFiles(run, refs, summary);
  for (const path of refs.prunable) {
    if (!dryRun) await fs.rm(path, { force: true });
    summary.pruned_manifests.push(
      path
        .split('/')
        .pop()!
        .replace(/\.json$/, ''),
    );
  }
  return summary;
}

interface GcRun {
  dataDir: string;
  graceMs: number;
  dryRun: boolean;
  now: number;
  onRemove: (removal: GcRemoval) => void | Promise<void>;
}

/** What stays: the files and rooms (`<id>:<bake key>`) of the kept manifests, and of those replaced within the grace. */
interface References {
  files: Set<string>;
  graceFiles: Set<string>;
  rooms: Set<string>;
  graceRooms: Set<string>;
  /** History files of manifests that protect nothing any more. */
  prunable: string[];
}

const roomKey = (id: number | string, key: string) => `${id}:${key}`;
const bakedRooms = (manifest: Manifest) => manifest.rooms.flatMap((r) => (r.bake ? [roomKey(r.id, r.bake.key)] : []));

function referencesOf(manifests: PublishedManifest[], keep: number, run: GcRun): References {
  const refs: References = { files: new Set(), graceFiles: new Set(), rooms: new Set(), graceRooms: new Set(), prunable: [] };
  manifests.forEach(({ manifest, path }, i) => {
    const add = (files: Set<string>, rooms: Set<string>) => {
      manifestFileRefs(manifest).forEach((ref) => files.add(fileName(ref)));
      bakedRooms(manifest).forEach((room) => rooms.add(room));
    };
    if (i < keep) return add(refs.files, refs.rooms);
    // Replaced when the next newer manifest was published.
    const replacedAt = Date.parse(manifests[i - 1]!.manifest.published_at);
    if (run.now - replacedAt < run.graceMs) add(refs.graceFiles, refs.graceRooms);
    else if (path) refs.prunable.push(path);
  });
  return refs;
}

/** Remove one file unless it is a dry run; false when it could not be removed (it stays, unreported). */
async function remove(run: GcRun, path: string, relative: string, bytes: number): Promise<boolean> {
  if (!run.dryRun) {
    const gone = await fs.rm(path).then(
      () => true,
      (err: NodeJS.ErrnoException) => err.code === 'ENOENT',
    );
    if (!gone) return false;
  }
  await run.onRemove({ path: relative, bytes });
  return true;
}

/**
 * QA facts protect their plan picture while their room (same id and bake key) is in a kept manifest,
 * or in one replaced within the grace; other facts protect nothing. Those stale facts files go too
 * (once older than the grace, like any file): the bake rewrites only the facts of rooms it bakes, so
 * a dropped room's facts would otherwise stay forever, and no report can use them again (it reads a
 * room's facts only under the bake key of its manifest entry). Files that are not valid QA facts are
 * absent for the bake, so they protect nothing and go the same way; names the bake does not write
 * are left alone. They go before the pictures they name, so a kill in between leaves only
 * unreferenced pictures, which the next gc removes.
 */
async function sweepQaFacts(run: GcRun, refs: References, summary: GcSummary): Promise<void> {
  const dir = qaFactsDir(run.dataDir);
  const names = (await fs.readdir(dir).catch(() => [] as string[])).sort();
  for (const name of names) {
    const tempOf = TEMP_FILE_PATTERN.exec(name)?.[1];
    const room = QA_FACTS_NAME_PATTERN.exec(tempOf ?? name)?.[1];
    if (!room) continue;
    const path = join(dir, name);
    const stat = await fs.stat(path).catch(() => null);
    if (!stat?.isFile()) continue;
    const facts = tempOf === undefined ? await readQaFactsFile(path) : null;
    const key = facts ? roomKey(room, facts.key) : null;
    const picture = facts?.planPicture ? fileName(facts.planPicture) : null;
    if (key && refs.rooms.has(key)) {
      if (picture) refs.files.add(picture);
      continue;
    }
    if ((key && refs.graceRooms.has(key)) || (!isAbandonedTempFile(name) && run.now - stat.mtimeMs < run.graceMs)) {
      if (picture) refs.graceFiles.add(picture);
      continue;
    }
    if (await remove(run, path, `cache/qa/${name}`, stat.size)) summary.removed_qa_facts.push({ name, bytes: stat.size });
  }
}

/** files/: everything not referenced and out of the grace period goes, one file at a time. */
async function sweepFiles(run: GcRun, refs: References, summary: GcSummary): Promise<void> {
  const dir = artifactPaths(run.dataDir).files;
  const entries = (await fs.readdir(dir).catch(() => [] as string[])).sort();
  for (const name of entries) {
    // A precompressed sibling (`<file>.br` / `.gz`) lives and goes with its file (and is not counted apart).
    const owner = ENCODED_FILE_NAME_PATTERN.exec(name)?.[1];
    const isFile = FILE_NAME_PATTERN.test(owner ?? name);
    if (!isFile && !TEMP_FILE_PATTERN.test(name)) continue;
    const path = join(dir, name);
    const stat = await fs.stat(path).catch(() => null);
    if (!stat?.isFile()) continue;
    const counted = owner === undefined ? 1 : 0;
    if (isFile && refs.files.has(owner ?? name)) {
      summary.kept_files += counted;
      continue;
    }
    // A temp file whose writer is gone can never be renamed into place: no grace for it.
    if (!isAbandonedTempFile(name) && (run.now - stat.mtimeMs < run.graceMs || refs.graceFiles.has(owner ?? name))) {
      summary.kept_files += counted;
      summary.in_grace += counted;
      continue;
    }
    if (!(await remove(run, path, `files/${name}`, stat.size))) continue;
    summary.removed.push({ name, bytes: stat.size });
    summary.removed_bytes += stat.size;
  }
}
