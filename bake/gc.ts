/**
 * `museum bake gc`: remove content-addressed files nobody can still be served.
 *
 * A file stays when any of these holds:
 *   - one of the last K published manifests references it (K = --keep, default 3; the current
 *     manifest is always one of them);
 *   - a manifest that references it was replaced less than the grace period ago (a server that has
 *     not reloaded yet still serves it);
 *   - the file itself is younger than the grace period (a bake may be about to reference it);
 *   - a QA fact of the current rooms names it (plan pictures the next report embeds).
 * Everything else under files/ goes, as do temp files of killed writes older than the grace period.
 * Manifests of the history that protect nothing any more are pruned last. gc only ever deletes
 * what is unreferenced, one file at a time, so a kill at any point loses nothing still referenced;
 * it takes the bake lock, so no bake publishes meanwhile.
 */
import { promises as fs } from 'node:fs';
import { join, resolve as resolvePath } from 'node:path';
import { artifactPaths, FILE_NAME_PATTERN, fileName, manifestFileRefs } from '../artifacts/format.ts';
import { DataDirBusyError, listManifests, lockDataDir } from '../artifacts/store.ts';

export interface GcOptions {
  /** Published manifests whose files are kept (the current one included). Default 3. */
  keep?: number;
  /** Milliseconds a replaced manifest's files, and any new file, are kept. Default 1 h. */
  graceMs?: number;
  /** List what would be removed; remove nothing. */
  dryRun?: boolean;
  /** The clock (tests). */
  now?: number;
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
}

export const GC_DEFAULTS: Required<Omit<GcOptions, 'now'>> = { keep: 3, graceMs: 60 * 60 * 1000, dryRun: false };

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
  const release = await lockDataDir(dir).catch((err: unknown) => {
    throw err instanceof DataDirBusyError ? new GcError(err.message) : err;
  });
  try {
    return await collectGarbageUnderLock(dir, options);
  } finally {
    await release();
  }
}

/** Plan pictures (and anything else) the QA facts of the rooms name. */
async function qaFactFiles(dataDir: string): Promise<Set<string>> {
  const dir = join(artifactPaths(dataDir).cache, 'qa');
  const names = await fs.readdir(dir).catch(() => [] as string[]);
  const out = new Set<string>();
  for (const name of names.filter((n) => n.endsWith('.json'))) {
    const facts = await fs
      .readFile(join(dir, name), 'utf8')
      .then((t) => JSON.parse(t) as { planPicture?: { sha256: string; ext: string } | null })
      .catch(() => null);
    if (facts?.planPicture) out.add(fileName(facts.planPicture as never));
  }
  return out;
}

/** gc for a caller that already holds the bake lock (`bake rooms --gc`). */
export async function collectGarbageUnderLock(dataDir: string, options: GcOptions = {}): Promise<GcSummary> {
  const { keep, graceMs, dryRun } = { ...GC_DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
  if (!Number.isInteger(keep) || keep < 1) throw new GcError(`--keep must be a positive integer (got ${keep})`);
  if (!(graceMs >= 0)) throw new GcError(`--grace must be a duration of 0 or more (got ${graceMs})`);
  const now = options.now ?? Date.now();
  const paths = artifactPaths(dataDir);
  const manifests = await listManifests(dataDir).catch((err: unknown) => {
    throw new GcError(`a published manifest is unreadable, so nothing is removed: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  });

  // 1. What stays referenced: the last K manifests, the ones replaced within the grace period, QA facts.
  const kept = manifests.slice(0, keep);
  const referenced = new Set<string>();
  const graceReferenced = new Set<string>();
  const prunable: string[] = [];
  manifests.forEach(({ manifest, path }, i) => {
    const names = manifestFileRefs(manifest).map(fileName);
    if (i < keep) names.forEach((n) => referenced.add(n));
    else {
      // Replaced when the next newer manifest was published.
      const replacedAt = Date.parse(manifests[i - 1]!.manifest.published_at);
      if (now - replacedAt < graceMs) names.forEach((n) => graceReferenced.add(n));
      else if (path) prunable.push(path);
    }
  });
  for (const name of await qaFactFiles(dataDir)) referenced.add(name);

  // 2. Remove the rest, one file at a time.
  const summary: GcSummary = {
    data_dir: dataDir,
    dry_run: dryRun,
    kept_manifests: kept.map((m) => m.manifest.bake_id),
    in_grace: 0,
    kept_files: 0,
    removed: [],
    removed_bytes: 0,
    pruned_manifests: [],
  };
  const entries = (await fs.readdir(paths.files).catch(() => [] as string[])).sort();
  for (const name of entries) {
    const isFile = FILE_NAME_PATTERN.test(name);
    const isTemp = name.endsWith('.tmp');
    if (!isFile && !isTemp) continue;
    const path = join(paths.files, name);
    const stat = await fs.stat(path).catch(() => null);
    if (!stat?.isFile()) continue;
    if (isFile && referenced.has(name)) {
      summary.kept_files++;
      continue;
    }
    if (now - stat.mtimeMs < graceMs || graceReferenced.has(name)) {
      summary.kept_files++;
      summary.in_grace++;
      continue;
    }
    if (!dryRun) {
      const gone = await fs.rm(path).then(() => true, (err: NodeJS.ErrnoException) => err.code === 'ENOENT');
      if (!gone) continue;
    }
    summary.removed.push({ name, bytes: stat.size });
    summary.removed_bytes += stat.size;
  }

  // 3. History entries that protect nothing any more.
  for (const path of prunable) {
    if (!dryRun) await fs.rm(path, { force: true });
    summary.pruned_manifests.push(path.split('/').pop()!.replace(/\.json$/, ''));
  }
  return summary;
}
