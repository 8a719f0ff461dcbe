import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WorkerPool } from '../../bake/workers.ts';
import type { PoolTestJob } from '../helpers/pool-worker.ts';

const ENTRY = new URL('../helpers/pool-worker.ts', import.meta.url);
type Answer = { value: number; thread: number };

describe('WorkerPool', () => {
  it('runs jobsPerWorker jobs at once on one worker and routes each answer to its job', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1, jobsPerWorker: 2 });
    try {
      // Job 1 answers only once job 2 has arrived on its thread (one after the other would never
      // finish), so it answers last: answers must not be matched by order.
      const [first, second] = await Promise.all([pool.run({ value: 1, after: 2 }), pool.run({ value: 2, waitMs: 20 })]);
      expect([first.value, second.value]).toEqual([1, 2]);
      expect(first.thread).toBe(second.thread);
    } finally {
      await pool.close();
    }
  });

  it('spreads jobs over its workers before doubling up, and queues beyond its capacity', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 2, jobsPerWorker: 2 });
    try {
      const answers = await Promise.all([1, 2, 3, 4, 5].map((value) => pool.run({ value, waitMs: 50 })));
      expect(answers.map((a) => a.value)).toEqual([1, 2, 3, 4, 5]);
      expect(new Set(answers.slice(0, 2).map((a) => a.thread)).size).toBe(2);
      expect(new Set(answers.map((a) => a.thread)).size).toBe(2);
    } finally {
      await pool.close();
    }
  });

  it('a failing job rejects with its first line only', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1 });
    try {
      await expect(pool.run({ value: 1, fail: 'room 7: truncated GLB' })).rejects.toThrow(/^room 7: truncated GLB$/);
      expect((await pool.run({ value: 2 })).value).toBe(2);
    } finally {
      await pool.close();
    }
  });

  it('a worker that dies fails only the job that killed it: its co-runners are retried alone, the queue goes on', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1, jobsPerWorker: 2 });
    try {
      const runs = [pool.run({ value: 1, waitMs: 300 }), pool.run({ value: 2, waitMs: 20, die: true }), pool.run({ value: 3 })];
      const [first, second, third] = await Promise.allSettled(runs);
      // Which of jobs 1 and 2 killed the worker is unknown until each runs alone: 2 dies again.
      expect(first).toMatchObject({ status: 'fulfilled', value: { value: 1 } });
      expect(second).toMatchObject({ status: 'rejected', reason: { message: 'bake worker stopped: exit code 3' } });
      expect(third).toMatchObject({ status: 'fulfilled', value: { value: 3 } });
    } finally {
      await pool.close();
    }
  });

  it('a job over the time limit fails and its worker is stopped; the job sharing that worker is retried', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1, jobsPerWorker: 2, jobTimeoutMs: 1_000 });
    try {
      // Job 2 waits for job 3, which can only arrive once job 1 has left its worker.
      const runs = [pool.run({ value: 1, waitMs: 60_000 }), pool.run({ value: 2, after: 3 }), pool.run({ value: 3 })];
      const [slow, shared, queued] = await Promise.allSettled(runs);
      expect(slow).toMatchObject({ status: 'rejected', reason: { message: 'took longer than 1 s (stopped)' } });
      expect(shared).toMatchObject({ status: 'fulfilled', value: { value: 2 } });
      expect(queued).toMatchObject({ status: 'fulfilled', value: { value: 3 } });
    } finally {
      await pool.close();
    }
  }, 30_000);

  it('a job over the time limit leaves nothing running: its worker process is gone, native work and all', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1, jobTimeoutMs: 1_000 });
    const pidFile = join(mkdtempSync(join(tmpdir(), 'pool-')), 'pid');
    try {
      await expect(pool.run({ value: 1, waitMs: 60_000, pidFile })).rejects.toThrow('took longer than 1 s (stopped)');
      const pid = Number(readFileSync(pidFile, 'utf8'));
      expect(pid).not.toBe(process.pid); // a process of its own: the test process's threads ran none of its work
      await expect.poll(() => isAlive(pid), { timeout: 5_000 }).toBe(false);
    } finally {
      await pool.close();
    }
  });

  it('close rejects queued jobs and refuses new ones', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1 });
    const running = Promise.allSettled([pool.run({ value: 1, waitMs: 5_000 })]);
    const queued = Promise.allSettled([pool.run({ value: 2 })]);
    await pool.close();
    expect((await queued)[0]).toMatchObject({ status: 'rejected', reason: { message: 'worker pool closed' } });
    expect((await running)[0]).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(/^bake worker stopped/) } });
    await expect(pool.run({ value: 3 })).rejects.toThrow('worker pool is closed');
  });
});

// The resident bound (issue 43): typed arrays and wasm live outside V8's heap, so the pool reads each
// worker's resident memory from /proc and kills a worker over the bound.
describe.runIf(existsSync('/proc/self/status'))('WorkerPool resident memory bound', () => {
  const OVER = /^bake worker stopped: out of memory \(\d+ MB resident, over the 400 MB resident memory limit\)$/;

  it('kills a worker whose typed arrays pass the bound, even while its thread is blocked; the job fails with one line naming it', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1, rssMb: 400 });
    try {
      const started = performance.now();
      // 800 MB of Float64Arrays, then a minute of synchronous work (a long wasm decode): only the parent can stop it.
      await expect(pool.run({ value: 1, allocMb: 800, busyMs: 60_000 })).rejects.toThrow(OVER);
      expect(performance.now() - started).toBeLessThan(20_000);
      expect((await pool.run({ value: 2 })).value).toBe(2); // the pool goes on, on a new worker
    } finally {
      await pool.close();
    }
  }, 30_000);

  it('a job that shared the worker is retried alone on a fresh worker and succeeds; only the job that made the memory fails', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1, jobsPerWorker: 2, rssMb: 400 });
    try {
      const runs = [pool.run({ value: 1, waitMs: 1_000 }), pool.run({ value: 2, allocMb: 800, busyMs: 60_000 }), pool.run({ value: 3 })];
      const [shared, hog, queued] = await Promise.allSettled(runs);
      expect(shared).toMatchObject({ status: 'fulfilled', value: { value: 1 } });
      expect(hog).toMatchObject({ status: 'rejected', reason: { message: expect.stringMatching(OVER) } });
      expect(queued).toMatchObject({ status: 'fulfilled', value: { value: 3 } });
    } finally {
      await pool.close();
    }
  }, 60_000);

  it('memory an earlier job left resident does not fail the next one: it is retried on a fresh worker', async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1, rssMb: 400 });
    try {
      // Each job holds 192 MB for the worker's life (as a grown wasm memory does): alone each fits, the second on top does not.
      const first = await pool.run({ value: 1, allocMb: 192 });
      const second = await pool.run({ value: 2, allocMb: 192, busyMs: 500 });
      expect(second.value).toBe(2);
      expect(second.thread).not.toBe(first.thread);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it("reports the worker's peak resident memory with each result", async () => {
    const pool = new WorkerPool<PoolTestJob, Answer>({ entry: ENTRY, size: 1 });
    try {
      const small = await pool.runMeasured({ value: 1 });
      const big = await pool.runMeasured({ value: 2, allocMb: 256 });
      expect(small.peakRssMb).toBeGreaterThan(10);
      expect(big.peakRssMb! - small.peakRssMb!).toBeGreaterThan(240);
    } finally {
      await pool.close();
    }
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
