import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { RoomSlotData, type RoomSlot } from '../../artifacts/format.ts';
import { writeGlb } from '../../bake/gltf-io.ts';
import { writeSampleContent } from '../../bake/sample/generate.ts';
import { RoomBuilder } from '../../bake/sample/room-builder.ts';
import { startModelServer } from '../fakes/model-server.ts';
import { smallRoomGlb, truncatedGlb } from './fixtures.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const museum = (...args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, 'bin/museum.js'), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));

describe('museum bake (CLI)', () => {
  it('bake sample writes the content and reports it as one JSON document', () => {
    const out = tmp('museum-cli-sample-');
    const run = museum('bake', 'sample', '--out', out, '--json');
    expect(run.status).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({ dir: out, rooms: 7, collections: 6, artworks: 40 }); // 16 normalization cases, 24 pictures
  });

  it('bake rooms runs rooms on worker processes of the bundled CLI (one per lane: four at --concurrency 4) and publishes every room', () => {
    const dir = tmp('museum-cli-rooms-');
    expect(museum('bake', 'sample', '--out', join(dir, 'content')).status).toBe(0);
    const run = museum('bake', 'rooms', '--content', join(dir, 'content'), '--out', join(dir, 'data'), '--concurrency', '4', '--json');
    expect(run.status, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({ published: true, baked: 7, skipped: 0, failed: 0 });
    expect(summary.rooms.map((room: { status: string }) => room.status)).toEqual(Array(7).fill('baked'));
    // Durations without float noise.
    expect([summary.ms, ...summary.rooms.map((room: { ms: number }) => room.ms)].every(Number.isInteger)).toBe(true);
    // Each room's step times come out of its worker (whole ms), and its worker's peak resident memory (Linux: /proc).
    type Steps = Record<string, number | null>;
    for (const room of summary.rooms as Array<{ steps: Steps; peak_rss_mb: number | null }>) {
      expect(Object.keys(room.steps)).toEqual(['read_ms', 'anchors_ms', 'navmesh_ms', 'textures_ms', 'optimize_ms', 'ktx2_encode_ms']);
      expect(Object.values(room.steps).every((ms) => ms === null || Number.isInteger(ms))).toBe(true);
      if (existsSync('/proc/self/status')) expect(room.peak_rss_mb).toBeGreaterThan(50);
    }
    // The summary for people says where the QA report is, as a file and as a URL.
    const again = museum('bake', 'rooms', '--content', join(dir, 'content'), '--out', join(dir, 'data'));
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toContain(`QA report: ${join(dir, 'data', 'report.html')} · served at http://localhost:8080/report\n`);
  });

  it('a broken model fails with exit 1 and one line, no stack trace', async () => {
    const dir = tmp('museum-cli-bad-');
    await writeFile(join(dir, 'broken.glb'), truncatedGlb(await smallRoomGlb()));
    const run = museum('bake', 'room', join(dir, 'broken.glb'), '--room', '1', '--out', join(dir, 'data'));
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    // Its steps as they began, then the one line.
    const lines = run.stderr.trimEnd().split('\n');
    expect(lines.slice(0, -1).every((line) => line.startsWith('bake room: '))).toBe(true);
    expect(lines.at(-1)).toMatch(/^museum: truncated GLB: header declares \d+ bytes but the file has \d+$/);
    // --json: one JSON document on stdout with the error.
    const json = museum('bake', 'room', join(dir, 'broken.glb'), '--room', '1', '--out', join(dir, 'data'), '--json');
    expect(json.status).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      room: 1,
      ok: false,
      error: expect.stringMatching(/^truncated GLB: header declares \d+ bytes/),
    });
  });

  it('bake room shows its steps on stderr as they begin', async () => {
    const dir = tmp('museum-cli-steps-');
    await writeFile(join(dir, 'room.glb'), await smallRoomGlb());
    const run = museum('bake', 'room', join(dir, 'room.glb'), '--room', '1', '--out', join(dir, 'data'), '--json');
    expect(run.status, run.stderr).toBe(0);
    const steps = run.stderr
      .trimEnd()
      .split('\n')
      .map((line) => /^bake room: (.+) \(\d+(?: ms|\.\d s)\)$/.exec(line)?.[1]);
    expect(steps.slice(1)).toEqual(
      expect.arrayContaining(['reading the model', 'placing the slot anchors', 'compressing the textures', 'optimizing the model', 'done']),
    );
    expect(steps.at(-1)).toBe('done');
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true, room: 1 });
  });

  it('a heap limit over the resident memory bound is refused with one line (the heap is part of it)', () => {
    const dir = tmp('museum-cli-limits-');
    expect(museum('bake', 'sample', '--out', join(dir, 'content')).status).toBe(0);
    const run = museum('bake', 'rooms', '--content', join(dir, 'content'), '--out', join(dir, 'data'), '--worker-memory', '4096');
    expect(run.status).toBe(1);
    expect(run.stderr.trim()).toBe(
      'museum: the worker heap limit (4096 MB) is over the worker resident memory limit (2048 MB), of which the heap is a part',
    );
    const help = museum('bake', 'rooms', '--help');
    expect(help.stdout).toMatch(/--worker-rss <mb>/);
  });

  it('a missing content directory fails with exit 1 and says what is missing', () => {
    const dir = tmp('museum-cli-nocontent-');
    const run = museum('bake', 'rooms', '--content', join(dir, 'nowhere'), '--out', join(dir, 'data'));
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/rooms\.json: not found/);
  });

  it('bake room --json on a textured model: stdout is the one JSON document (the Basis encoder prints elsewhere)', async () => {
    const dir = tmp('museum-cli-textured-');
    await writeSampleContent(dir); // its atelier has a brick colour and normal texture: a ktx2 variant is encoded
    const run = museum('bake', 'room', join(dir, 'models', 'atelier.glb'), '--room', '3', '--out', join(dir, 'data'), '--json');
    expect(run.status, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout) as { files: Record<string, unknown> };
    expect(Object.keys(report.files).length).toBeGreaterThan(0);
  }, 120_000);

  it('bake room <url> refuses a loopback host unless BAKE_ALLOW_HOSTS names it', async () => {
    const server = await startModelServer({ '/m.glb': { body: await smallRoomGlb() } });
    // Async: the fake server in this process must answer while the CLI runs.
    const run = (env: Record<string, string>) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
        const { BAKE_ALLOW_HOSTS: _a, CONTENT_UPSTREAM_URL: _c, ...base } = process.env;
        execFile(
          process.execPath,
          [join(ROOT, 'bin/museum.js'), 'bake', 'room', `${server.url}/m.glb`, '--room', '1', '--out', tmp('museum-cli-url-'), '--json'],
          { cwd: ROOT, env: { ...base, ...env } },
          (err, stdout, stderr) => done({ code: err ? Number((err as { code?: number }).code) : 0, stdout, stderr }),
        );
      });
    try {
      const refused = await run({});
      expect(refused.code).toBe(1);
      const lastLine = (text: string) => text.trimEnd().split('\n').at(-1); // after the steps of `bake room`
      expect(lastLine(refused.stderr)).toBe(
        `museum: ${server.url}/m.glb refused: ${new URL(server.url).host} is a loopback address (allow the host with BAKE_ALLOW_HOSTS)`,
      );
      expect(server.requests.size).toBe(0);
      const allowed = await run({ BAKE_ALLOW_HOSTS: new URL(server.url).host });
      expect(allowed.code, allowed.stderr).toBe(0);
      expect(JSON.parse(allowed.stdout)).toMatchObject({ room: 1, slot_summary: { authored: 2 } });
      const badList = await run({ BAKE_ALLOW_HOSTS: 'http://nope/' });
      expect([badList.code, lastLine(badList.stderr)]).toEqual([1, 'museum: BAKE_ALLOW_HOSTS: "http://nope/" is not host or host:port']);
    } finally {
      await server.close();
    }
  });

  it(
    'bake room --previous keeps the published anchors still valid and reports what changed; an unreadable one is a usage error, said ' +
      'in one line',
    async () => {
      const dir = tmp('museum-cli-previous-');
      const hall = async (east: number, file: string) => {
        const b = new RoomBuilder('Hall');
        b.floorAndCeiling('Hall', [0, 0], [east, 8], 4, b.material('Floor'), b.material('Ceiling'));
        b.innerWalls(east, 8, 4, b.material('Wall'));
        await writeFile(join(dir, file), await writeGlb(b.document));
        return join(dir, file);
      };
      const bake = (model: string, slots: number, ...more: string[]) => {
        const run = museum('bake', 'room', model, '--room', '3', '--slots', String(slots), '--out', join(dir, 'data'), '--json', ...more);
        expect(run.status, run.stderr).toBe(0);
        const report = JSON.parse(run.stdout);
        return { report, data: RoomSlotData.parse(JSON.parse(readFileSync(report.files.slot_data.path, 'utf8'))) };
      };
      const pose = (s: RoomSlot) => [s.id, s.position, s.quaternion, s.width, s.height];
      const model = await hall(10, 'hall.glb');
      const first = bake(model, 4);
      expect(first.report.slot_changes).toMatchObject({ had_previous: false, added: 4 });
      const previous = join(dir, 'previous.json');
      await writeFile(previous, JSON.stringify(first.data));
      // More onchain slots: the published four stay exactly, two are added.
      const raised = bake(model, 6, '--previous', previous);
      expect(raised.report.slot_changes).toEqual({ had_previous: true, kept: 4, moved: 0, largest_move: 0, added: 2, removed: 0 });
      expect(raised.data.slots.slice(0, 4).map(pose)).toEqual(first.data.slots.map(pose));
      // The model changed (its east wall moved): the anchors on the other walls keep their ids and poses.
      const edited = bake(await hall(10.5, 'hall-edited.glb'), 4, '--previous', previous);
      const changes = edited.report.slot_changes;
      expect(changes.had_previous).toBe(true);
      expect(changes.kept).toBeGreaterThan(0);
      expect(changes.kept + changes.moved + changes.added).toBe(4);
      const before = new Map(first.data.slots.map((s) => [s.id, pose(s)]));
      expect(edited.data.slots.filter((s) => JSON.stringify(pose(s)) === JSON.stringify(before.get(s.id))).length).toBe(changes.kept);
      // People read the same facts without --json.
      const text = museum('bake', 'room', model, '--room', '3', '--slots', '6', '--out', join(dir, 'data'), '--previous', previous);
      expect(text.stdout).toMatch(/^anchors +4 kept.* against --previous$/m);
      await writeFile(join(dir, 'garbage.json'), '{"slots": 3}');
      const bad = museum('bake', 'room', model, '--room', '3', '--out', join(dir, 'data'), '--previous', join(dir, 'garbage.json'));
      expect([bad.status, bad.stderr]).toEqual([2, `error: --previous ${join(dir, 'garbage.json')} is not readable RoomSlotData\n`]);
    },
  );

  it('a usage error found by a command (bake gc --grace) is said, not only exit 2', () => {
    const run = museum('bake', 'gc', '--out', tmp('museum-cli-gc-'), '--grace', '5x');
    expect([run.status, run.stderr]).toEqual([2, 'error: --grace: not a duration: "5x" (e.g. 30m, 1h, 2d)\n']);
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
