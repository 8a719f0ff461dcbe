import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startModelServer } from '../fakes/model-server.ts';
import { smallRoomGlb, truncatedGlb } from './fixtures.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const museum = (...args: string[]) => spawnSync(process.execPath, [join(ROOT, 'bin/museum.js'), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));

describe('museum bake (CLI)', () => {
  it('bake sample writes the content and reports it as one JSON document', () => {
    const out = tmp('museum-cli-sample-');
    const run = museum('bake', 'sample', '--out', out, '--json');
    expect(run.status).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({ dir: out, rooms: 7, collections: 6, artworks: 16 });
  });

  it('bake rooms runs parallel lanes as worker threads of the CLI process and publishes every room', () => {
    const dir = tmp('museum-cli-rooms-');
    expect(museum('bake', 'sample', '--out', join(dir, 'content')).status).toBe(0);
    const run = museum('bake', 'rooms', '--content', join(dir, 'content'), '--out', join(dir, 'data'), '--concurrency', '2', '--json');
    expect(run.status).toBe(0);
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({ published: true, baked: 7, skipped: 0, failed: 0 });
    expect(summary.rooms.map((room: { status: string }) => room.status)).toEqual(Array(7).fill('baked'));
  });

  it('a broken model fails with exit 1 and one line, no stack trace', async () => {
    const dir = tmp('museum-cli-bad-');
    await writeFile(join(dir, 'broken.glb'), truncatedGlb(await smallRoomGlb()));
    const run = museum('bake', 'room', join(dir, 'broken.glb'), '--room', '1', '--out', join(dir, 'data'));
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^museum: truncated GLB: header declares \d+ bytes but the file has \d+\n$/);
  });

  it('a missing content directory fails with exit 1 and says what is missing', () => {
    const dir = tmp('museum-cli-nocontent-');
    const run = museum('bake', 'rooms', '--content', join(dir, 'nowhere'), '--out', join(dir, 'data'));
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/rooms\.json: not found/);
  });

  it('bake room <url> refuses a loopback host unless BAKE_ALLOW_HOSTS names it', async () => {
    const server = await startModelServer({ '/m.glb': { body: await smallRoomGlb() } });
    // Async: the fake server in this process must answer while the CLI runs.
    const run = (env: Record<string, string>) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
        const { BAKE_ALLOW_HOSTS: _a, CONTENT_UPSTREAM_URL: _c, ...base } = process.env;
        execFile(process.execPath, [join(ROOT, 'bin/museum.js'), 'bake', 'room', `${server.url}/m.glb`, '--room', '1', '--out', tmp('museum-cli-url-'), '--json'], { cwd: ROOT, env: { ...base, ...env } }, (err, stdout, stderr) =>
          done({ code: err ? Number((err as { code?: number }).code) : 0, stdout, stderr }),
        );
      });
    try {
      const refused = await run({});
      expect(refused.code).toBe(1);
      expect(refused.stderr).toBe(`museum: ${server.url}/m.glb refused: ${new URL(server.url).host} is a loopback address (allow the host with BAKE_ALLOW_HOSTS)\n`);
      expect(server.requests.size).toBe(0);
      const allowed = await run({ BAKE_ALLOW_HOSTS: new URL(server.url).host });
      expect(allowed.code, allowed.stderr).toBe(0);
      expect(JSON.parse(allowed.stdout)).toMatchObject({ room: 1, slot_summary: { authored: 2 } });
      const badList = await run({ BAKE_ALLOW_HOSTS: 'http://nope/' });
      expect([badList.code, badList.stderr]).toEqual([1, 'museum: BAKE_ALLOW_HOSTS: "http://nope/" is not host or host:port\n']);
    } finally {
      await server.close();
    }
  });

  it.each([
    [['bake', 'rooms', '--concurrency', 'many']],
    [['bake', 'rooms', '--only', 'x,y']],
    [['bake', 'room', 'model.glb', '--out', 'x']],
  ])('usage errors exit with 2: %j', (args) => {
    const run = museum(...args);
    expect(run.status).toBe(2);
  });
});
