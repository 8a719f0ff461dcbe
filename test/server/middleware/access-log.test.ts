/**
 * The access log as shipped (`museum serve`, default configuration): buffered asynchronous writes
 * that still hold exactly one complete JSON line per request — snapshot responses, errors and streams alike — once the
 * server is stopped with SIGTERM.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../../helpers/artifacts.ts';
import { nodeRequest } from '../../helpers/raw-http.ts';

const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'museum-access-log-'));
  await publishFixtureBake(join(dir, 'data'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('access log of museum serve', () => {
  it('holds exactly one line per request after SIGTERM, with the same fields on both paths', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: join(dir, 'data'),
      STATE_DB: join(dir, 'state.db'),
    };
    delete env.LOG_LEVEL; // the default configuration
    const child = spawn(process.execPath, [join(ROOT, 'bin/museum.js'), 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    try {
      const deadline = Date.now() + 20_000;
      while (!/museum: serving .* at http:\/\/127\.0\.0\.1:(\d+)/.test(stderr) && Date.now() < deadline) await sleep(50);
      const port = Number(/at http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr)?.[1]);
      expect(port).toBeGreaterThan(0);
      // Snapshot responses (slots, 304), files 404 by name, a keyed 401, the index, a 404, concurrently.
      const paths = ['/v1/rooms/1/slots', '/v1/rooms/2/slots', '/v1', '/v1/nope', '/v1/rooms', `/files/${'a'.repeat(64)}.glb`];
      // Waves of 50 concurrent requests (well under the per-address connection cap).
      const statuses: number[] = [];
      for (let wave = 0; wave < 12; wave++) {
        const answers = await Promise.all(
          Array.from({ length: 50 }, (_, j) => {
            const i = wave * 50 + j;
            return nodeRequest(port, {
              path: paths[i % paths.length]!,
              method: i % 50 === 7 ? 'OPTIONS' : 'GET',
              headers: { 'X-Request-Id': `req-${i}` },
            });
          }),
        );
        statuses.push(...answers.map((r) => r.status));
      }
      expect(new Set(statuses)).toEqual(new Set([200, 204, 401, 404]));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    const lines = stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    expect(lines).toHaveLength(600);
    expect(new Set(lines.map((l) => l.requestId)).size).toBe(600);
    for (const line of lines) {
      expect(
        Object.keys(line)
          .filter((k) => k !== 'fast')
          .sort(),
      ).toEqual(['level', 'method', 'ms', 'msg', 'path', 'requestId', 'status', 'time']);
      expect(
        typeof line.ms === 'number' && line.ms >= 0 && Math.abs((line.ms as number) * 100 - Math.round((line.ms as number) * 100)) < 1e-6,
      ).toBe(true);
    }
  }, 60_000);
});
