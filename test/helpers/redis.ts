/**
 * A real redis-server for a test (Debian's package, installed by scripts/system-deps.sh): its own
 * port and directory, nothing persisted; it can be stopped and started again on the same port to
 * play an outage.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { answersTcp, freePort, superviseService, testService, type TestService } from './service.ts';

export type TestRedis = TestService;

/** True once the server answers PING. */
const answers = (port: number) => answersTcp(port, { send: 'PING\r\n', expect: '+PONG' });

/** A redis:// URL on a loopback port nothing listens on. */
export const unreachableRedisUrl = async (): Promise<string> => `redis://127.0.0.1:${await freePort()}`;

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'museum-redis-'));
  const service = superviseService({
    name: 'redis-server',
    port,
    spawn: () =>
      spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
        stdio: 'ignore',
      }),
    ready: () => answers(port),
    startTimeoutMs: 10_000,
    stopSignal: 'SIGKILL',
  });
  await service.start();
  return testService(`redis://127.0.0.1:${port}`, port, service, dir);
}
