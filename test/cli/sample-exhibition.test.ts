// `museum serve --dev-key` (what `make run` starts) registers a sample exhibition on a baked sample
// and prints its link beside the development key; a restart finds it and registers nothing.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bakeRooms } from '../../bake/pipeline.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { killServeChildren, serveStartLines as startLines } from '../helpers/serve-cli.ts';

afterEach(killServeChildren);

/** Start `museum serve --dev-key`; resolves with its start-up lines, then stops it. */
const serveStartLines = (env: Record<string, string>) => startLines({ HOST: '127.0.0.1', ...env }, ['--dev-key'], /sample exhibition/);

describe('museum serve --dev-key on a baked sample', () => {
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'museum-sample-show-'));
    const content = join(dir, 'content');
    await writeSampleContent(content);
    // The Long Gallery alone (ten slots) keeps the bake short.
    const rooms = JSON.parse(readFileSync(join(content, 'rooms.json'), 'utf8')) as Array<{ id: number }>;
    writeFileSync(join(content, 'rooms.json'), JSON.stringify(rooms.filter((r) => r.id === 1)));
    const summary = await bakeRooms({ contentDir: content, dataDir: join(dir, 'data'), concurrency: 1 });
    expect(summary.failed).toBe(0);
    env = { DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'state', 'museum.db') };
  }, 120_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints the sample exhibition link beside the key, registered once: a restart only links it', async () => {
    const first = await serveStartLines(env);
    const link = /museum: open +(http:\/\/127\.0\.0\.1:\d+\/view\/exhibitions\/sample) \(sample exhibition, registered now\)/.exec(first);
    expect(link, first).not.toBeNull();
    // Beside the development key: the line right after the key's lines.
    const lines = first.trim().split('\n');
    const at = (text: string) => lines.findIndex((l) => l.includes(text));
    expect(at('(sample exhibition') - at('development key')).toBeLessThanOrEqual(2);
    const second = await serveStartLines(env);
    expect(second).toMatch(/museum: open +http:\/\/127\.0\.0\.1:\d+\/view\/exhibitions\/sample \(sample exhibition\)\n/);
    expect(second).not.toMatch(/registered now/);
  }, 60_000);

  it('says why there is none when nothing is baked', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'museum-sample-show-empty-'));
    try {
      const lines = await serveStartLines({ DATA_DIR: join(empty, 'data'), STATE_DB: join(empty, 'museum.db') });
      expect(lines).toMatch(/museum: no sample exhibition: nothing baked with slots and pictures yet/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  }, 60_000);
});
