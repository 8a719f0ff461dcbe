/**
 * Temp files of writes a kill interrupted (decisions.md, "Bounds decided after the third attack
 * round"): named for their writer's process, removed by the next bake (under the lock) and by
 * `bake gc` at once once that process is gone; a live writer's stay. Writes never go through a link
 * planted in the data directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { lstat, mkdir, readFile, readdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { artifactPaths } from '../../artifacts/format.ts';
import { TEMP_FILE_PATTERN, writeFileAtomic } from '../../artifacts/store.ts';
import { collectGarbage } from '../../bake/gc.ts';
import { bakeRooms } from '../../bake/pipeline.ts';
import { qaFactsDir } from '../../bake/qa-facts.ts';
import { smallRoomGlb } from './fixtures.ts';

const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), prefix));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/**
 * A real writer killed mid-write: a node process opens `<target>.<its pid>.<hex>.tmp` as
 * writeFileAtomic names it, writes half, and is killed with SIGKILL. Resolves with the temp's path.
 */
async function killedWrite(target: string): Promise<string> {
  const script = `
    const fs = require('node:fs');
    const path = process.argv[1] + '.' + process.pid + '.' + require('node:crypto').randomBytes(6).toString('hex') + '.tmp';
    fs.writeFileSync(path, Buffer.alloc(64 * 1024, 1), { flag: 'wx' });
    process.stdout.write(path + '\\n');
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['-e', script, target], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const path = await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  return path;
}

/** A writer still running (a live server's or worker's write in progress): its temp must stay. */
function liveWriterTemp(target: string): string {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  children.push(child);
  return `${target}.${child.pid}.0a1b2c3d4e5f.tmp`;
}

async function oneRoomContent(): Promise<string> {
  const content = tmp('museum-temp-content-');
  await writeFile(join(content, 'small.glb'), await smallRoomGlb());
  await writeFile(
    join(content, 'rooms.json'),
    JSON.stringify([{ id: 1, title: 'Small', slots: 2, token_id: 1, model: 'small.glb', image: null }]),
  );
  return content;
}

describe('temp files of killed writes', () => {
  it('the next bake removes those of writers no longer running (files/ and the QA facts), and keeps a live writer’s', async () => {
    const data = tmp('museum-temp-data-');
    await mkdir(artifactPaths(data).files, { recursive: true });
    await mkdir(qaFactsDir(data), { recursive: true });
    const killed = [
      await killedWrite(join(artifactPaths(data).files, `${'e'.repeat(64)}.glb`)),
      await killedWrite(join(qaFactsDir(data), '1.json')),
    ];
    const live = liveWriterTemp(join(artifactPaths(data).files, `${'f'.repeat(64)}.glb`));
    await writeFile(live, 'in progress');
    expect(killed.every((path) => TEMP_FILE_PATTERN.test(path.split('/').pop()!))).toBe(true);

    const summary = await bakeRooms({ contentDir: await oneRoomContent(), dataDir: data, concurrency: 1 });
    expect(summary.published).toBe(true);
    expect(killed.filter((path) => existsSync(path))).toEqual([]);
    expect(existsSync(live)).toBe(true);
  }, 120_000);

  it('bake gc removes them without waiting for its grace period; a live writer’s waits for it', async () => {
    const data = tmp('museum-temp-gc-');
    await mkdir(artifactPaths(data).files, { recursive: true });
    const killed = await killedWrite(join(artifactPaths(data).files, `${'e'.repeat(64)}.glb`));
    const live = liveWriterTemp(join(artifactPaths(data).files, `${'f'.repeat(64)}.glb`));
    await writeFile(live, 'in progress');

    const run = await collectGarbage(data); // default grace: 1 h; both files are seconds old
    expect(run.removed.map((f) => f.name)).toEqual([killed.split('/').pop()]);
    expect(existsSync(killed)).toBe(false);
    expect(existsSync(live)).toBe(true);
  });
});

describe('writes in place', () => {
  it('a link planted at the target is replaced, never followed: the file it points at is untouched', async () => {
    const dir = tmp('museum-temp-link-');
    const outside = join(tmp('museum-temp-outside-'), 'victim');
    await writeFile(outside, 'outside');
    await symlink(outside, join(dir, 'target.json'));
    await writeFileAtomic(join(dir, 'target.json'), 'new', 0o600);
    expect(await readFile(outside, 'utf8')).toBe('outside');
    const written = await lstat(join(dir, 'target.json'));
    expect([written.isFile(), written.mode & 0o777]).toEqual([true, 0o600]);
    expect(await readdir(dir)).toEqual(['target.json']);
  });
});
