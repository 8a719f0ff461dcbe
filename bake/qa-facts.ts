/**
 * QA facts: what the QA report shows about a room beyond its slot JSON (kind, the plan picture
 * rendered by the lane that baked it, optimizer notes), kept per room in DATA_DIR/cache/qa/<id>.json
 * so unchanged rooms keep their pictures without being re-baked. Written by the bake (pipeline.ts),
 * read back by its report and by `bake gc` (a plan picture is named only here).
 *
 * It is a cache: a file that is missing, unreadable, not JSON or not of this shape is absent, never
 * trusted and never a crash; the next bake of the room writes it again.
 */
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { artifactPaths, FileRef } from '../artifacts/format.ts';
import { writeFileAtomic } from '../artifacts/store.ts';
import type { RoomKind } from './slots/index.ts';

export const QaFacts = z.object({
  /** The room's incremental key when these facts were written: they belong to the bake with that key. */
  key: z.string(),
  kind: z.enum(['room', 'sculpture'] satisfies RoomKind[]),
  kindEvidence: z.string().optional(),
  planPicture: FileRef.nullable(),
  optimizerWarnings: z.array(z.string()),
});
export type QaFacts = z.infer<typeof QaFacts>;

export const qaFactsDir = (dataDir: string) => join(artifactPaths(dataDir).cache, 'qa');
const qaFactsPath = (dataDir: string, id: number) => join(qaFactsDir(dataDir), `${id}.json`);
/** `<room id>.json`: the only names the bake writes there (besides its own temp files). */
export const QA_FACTS_NAME_PATTERN = /^(\d+)\.json$/;

export async function writeQaFacts(dataDir: string, id: number, facts: QaFacts): Promise<void> {
  await writeFileAtomic(qaFactsPath(dataDir, id), JSON.stringify(QaFacts.parse(facts)));
}

/** The facts at `path`, or null when they are absent or not valid QA facts. */
export async function readQaFactsFile(path: string): Promise<QaFacts | null> {
  const text = await fs.readFile(path, 'utf8').catch(() => null);
  if (text === null) return null;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  const parsed = QaFacts.safeParse(json);
  return parsed.success ? parsed.data : null;
}

/** The room's facts if they were written by the bake with this key (else null: absent or stale). */
export async function readQaFacts(dataDir: string, id: number, key: string | undefined): Promise<QaFacts | null> {
  const facts = await readQaFactsFile(qaFactsPath(dataDir, id));
  return facts && facts.key === key ? facts : null;
}
