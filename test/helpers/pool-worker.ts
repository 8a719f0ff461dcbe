// A WorkerPool entry for test/bake/workers.test.ts: answers jobs after a delay or once another job
// arrived on the same thread (which proves they run at once), fails or dies on request.
import { threadId } from 'node:worker_threads';
import { serveJobs } from '../../bake/workers.ts';

export interface PoolTestJob {
  value: number;
  waitMs?: number;
  /** Answer only once the job with this value has arrived on this worker. */
  after?: number;
  fail?: string;
  die?: boolean;
}

const arrived = new Map<number, () => void>();
const arrival = new Map<number, Promise<void>>();
const arrivalOf = (value: number) => {
  if (!arrival.has(value)) arrival.set(value, new Promise<void>((resolve) => arrived.set(value, resolve)));
  return arrival.get(value)!;
};

serveJobs(async (job: PoolTestJob) => {
  void arrivalOf(job.value);
  arrived.get(job.value)!();
  if (job.after !== undefined) await arrivalOf(job.after);
  await new Promise((resolve) => setTimeout(resolve, job.waitMs ?? 0));
  if (job.die) process.exit(3); // in a worker: ends this thread only
  if (job.fail) throw new Error(`${job.fail}\nsecond line`);
  return { value: job.value, thread: threadId };
});
