/**
 * What the tests' real servers (redis-server, PostgreSQL) share: a free loopback port, a TCP
 * readiness probe, and a child process that can be stopped and started again on the same port to
 * play an outage.
 */
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** A real server a test started: its URL, and an outage on demand. */
export interface TestService {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stop for good and remove its directory. */
  close(): Promise<void>;
}

export interface ServiceProcess {
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ServiceOptions {
  /** For error messages: `redis-server`, `postgres`. */
  name: string;
  port: number;
  spawn(): ChildProcess;
  /** True once the service answers (called until it does, or the deadline passes). */
  ready(): Promise<boolean>;
  startTimeoutMs: number;
  /** How the service is stopped: SIGKILL plays a crash, SIGINT a fast shutdown. */
  stopSignal: NodeJS.Signals;
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

/** True once something accepts TCP on the port — and, given a greeting, answers it with `expect`. */
export const answersTcp = (port: number, greeting?: { send: string; expect: string }) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.setTimeout(500, () => socket.destroy());
    socket.once('error', () => resolve(false));
    socket.once('close', () => resolve(false));
    socket.once('connect', () => {
      if (greeting) return void socket.write(greeting.send);
      socket.destroy();
      resolve(true);
    });
    socket.once('data', (data) => {
      resolve(data.toString().startsWith(greeting?.expect ?? ''));
      socket.destroy();
    });
  });

/** Start and stop one service process; `start` resolves once it is ready, `stop` once it exited. */
export function superviseService(options: ServiceOptions): ServiceProcess {
  let child: ChildProcess | null = null;
  const start = async () => {
    if (child && child.exitCode === null) return;
    const spawned = options.spawn();
    child = spawned;
    const failed = new Promise<never>((_, reject) =>
      spawned.once('error', (err) => reject(new Error(`${options.name} did not start (${err.message}); run scripts/system-deps.sh`))),
    );
    const deadline = Date.now() + options.startTimeoutMs;
    while (!(await Promise.race([options.ready(), failed]))) {
      if (Date.now() > deadline) throw new Error(`${options.name} did not answer on port ${options.port}`);
      await sleep(50);
    }
  };
  const stop = async () => {
    const running = child;
    child = null;
    if (!running || running.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once('exit', () => resolve());
      running.kill(options.stopSignal);
    });
  };
  return { start, stop };
}

/** The TestService of a supervised process whose files live in `dir` (removed on close). */
export const testService = (url: string, port: number, service: ServiceProcess, dir: string): TestService => ({
  url,
  port,
  start: service.start,
  stop: service.stop,
  close: async () => {
    await service.stop();
    rmSync(dir, { recursive: true, force: true });
  },
});
