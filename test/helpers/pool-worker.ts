// A WorkerPool entry for test/bake/workers.test.ts: answers jobs after a delay or once another job
// arrived on the same worker (which proves they run at once), fails or dies on request, or holds
// memory outside V8's heap (typed arrays), optionally blocking its thread meanwhile.
import { writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { serveJobs } from '../../bake/workers.ts';

export interface PoolTestJob {
  value: number;
  waitMs?: number;
  /** Answer only once the job with this value has arrived on this worker. */
  after?: number;
  fail?: string;
  die?: boolean;
  /** Write this worker's process id here when the job starts. */
  pidFile?: string;
  /** Allocate and touch this many MB of typed arrays (outside V8's heap) before answering. */
  allocMb?: number;
  /** Then block this worker's thread for this long (as a long synchronous wasm call does). */
  busyMs?: number;
}

/** Typed arrays the jobs hold: kept for the worker's life, as a wasm memory keeps its pages. */
const held: Float64Array[] = [];

const arrived = new Map<number, () => void>();
const arrival = new Map<number, Promise<void>>();
const arrivalOf = (value: number) => {
  if (!arrival.has(value)) arrival.set(value, new Promise<void>((resolve) => arrived.set(value, resolve)));
  return arrival.get(value)!;
};

serveJobs(async (job: PoolTestJob) => {
  void arrivalOf(job.value);
  arrived.get(job.value)!();
  if (job.pidFile) writeFileSync(job.pidFile, String(process.pid));
  if (job.after !== undefined) await arrivalOf(job.after);
  await sleep(job.waitMs ?? 0);
  for (let mb = 0; mb < (job.allocMb ?? 0); mb += 64) held.push(new Float64Array((64 << 20) / 8).fill(1));
  if (job.busyMs) {
    const until = performance.now() + job.busyMs;
    while (performance.now() < until);
  }
  if (job.die) process.exit(3); // ends this worker process
  if (job.fail) throw new Error(`${job.fail}\nsecond line`);
  return { value: job.value, thread: process.pid };
});
