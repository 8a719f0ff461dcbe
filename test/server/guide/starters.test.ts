/**
 * Starter generation jobs (server/guide/suggestions.ts StarterJobs) against a real SQLite state
 * store: a bounded queue where a newer registration of a queued exhibition replaces it at the back
 * and, beyond the bound, the oldest queued job gives way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExhibitionDocument, type GuideContext } from '../../../server/guide/exhibitions.ts';
import { StarterJobs, templateStarters } from '../../../server/guide/suggestions.ts';
import { DAY_MS } from '../../../server/state/exhibitions.ts';
import { openStateStore, type StateStore } from '../../../server/state/store.ts';
import { exhibitionDoc } from './helpers.ts';

const tmp = mkdtempSync(join(tmpdir(), 'museum-starters-'));
let state: StateStore;
beforeAll(async () => {
  state = await openStateStore({ stateDb: join(tmp, 'state.db'), exhibitionTtlMs: 180 * DAY_MS }, pino({ level: 'silent' }), {
    serving: true,
  });
});
afterAll(async () => {
  await state?.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** Register an exhibition with no starters yet; returns its content hash. */
async function registered(id: string): Promise<string> {
  const doc = ExhibitionDocument.parse(exhibitionDoc({ id, name: `Show ${id}` }));
  const build = (times: { registeredAt: string; updatedAt: string }, starters: string[]): GuideContext => ({
    id,
    name: doc.name,
    ...times,
    generator: null,
    artists: [],
    architects: [],
    starters,
    rooms: [],
    artworks: [],
  });
  return (await state.exhibitions.register(doc, undefined, build, { ip: '192.0.2.1' })).contentHash;
}
const startersOf = async (id: string) => (await state.exhibitions.get(id))!.context.starters;

describe('StarterJobs', () => {
  it('queues at most maxQueued jobs: a newer registration moves to the back, the oldest gives way', async () => {
    const ids = ['queue:a', 'queue:b', 'queue:c', 'queue:d'];
    const hashes = new Map<string, string>();
    for (const id of ids) hashes.set(id, await registered(id));
    const warnings: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).exhibition) });
    const jobs = new StarterJobs({ store: state.exhibitions, llm: null, log }, { concurrency: 1, maxQueued: 2 });
    const schedule = (id: string) => jobs.schedule(id, hashes.get(id)!);
    schedule('queue:a'); // runs at once: the queue is empty again
    schedule('queue:b');
    schedule('queue:c');
    schedule('queue:b'); // queued again: now behind c
    schedule('queue:d'); // three queued > 2: c, the oldest, gives way
    await jobs.idle();
    expect(warnings).toEqual(['queue:c']);
    for (const id of ['queue:a', 'queue:b', 'queue:d']) {
      const { context } = (await state.exhibitions.get(id))!;
      expect(context.starters).toEqual(templateStarters({ ...context, starters: [] }));
      expect(context.starters.length).toBeGreaterThan(0);
    }
    expect(await startersOf('queue:c')).toEqual([]);
    await jobs.close();
  });
});
