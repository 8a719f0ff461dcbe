/**
 * A fixed-size pool of worker threads (one process tree): the bake runs rooms in parallel without
 * a process per room or per step. Each worker runs up to `jobsPerWorker` jobs at once (their
 * awaits interleave, as rooms do on the main thread). A worker loads its entry module, which serves
 * jobs when loaded: a bundled `.mjs` directly, a TypeScript source through worker-bootstrap.mjs
 * (which registers tsx). A worker that dies (uncaught error, memory limit) fails only the jobs it
 * was running and is replaced.
 */
import { parentPort, Worker } from 'node:worker_threads';

interface Request<J> {
  id: number;
  job: J;
}
type Reply<R> = { id: number } & ({ ok: true; result: R } | { ok: false; error: string });

interface Task<J, R> {
  job: J;
  resolve: (result: R) => void;
  reject: (error: Error) => void;
}

export interface WorkerPoolSpec {
  /** The module each worker loads; it calls serveJobs when loaded. */
  entry: URL;
  size: number;
  /** Jobs a worker runs at once (default 1). */
  jobsPerWorker?: number;
  workerData?: Record<string, unknown>;
}

const BOOTSTRAP = new URL('./worker-bootstrap.mjs', import.meta.url);
const oneLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!;

export class WorkerPool<J, R> {
  /** Every live worker and the jobs it runs, by request id. */
  private readonly workers = new Map<Worker, Map<number, Task<J, R>>>();
  private readonly queue: Array<Task<J, R>> = [];
  private readonly jobsPerWorker: number;
  private nextId = 0;
  private closed = false;

  constructor(private readonly spec: WorkerPoolSpec) {
    this.jobsPerWorker = spec.jobsPerWorker ?? 1;
  }

  /** Run a job on the next free worker. Rejects with the job's one-line error. */
  run(job: J): Promise<R> {
    if (this.closed) return Promise.reject(new Error('worker pool is closed'));
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  /** Start every worker now (idle), so that their start-up overlaps the caller's work. */
  prestart(): void {
    while (!this.closed && this.workers.size < this.spec.size) this.spawn();
  }

  get size(): number {
    return this.spec.size;
  }

  /** Jobs go to the least busy worker; a new worker starts only while every live one is busy. */
  private dispatch(): void {
    while (this.queue.length) {
      let worker: Worker | undefined;
      let least = this.jobsPerWorker;
      for (const [candidate, running] of this.workers) {
        if (running.size < least) [worker, least] = [candidate, running.size];
      }
      if (least > 0 && this.workers.size < this.spec.size) worker = this.spawn();
      if (!worker) return;
      const task = this.queue.shift()!;
      const id = this.nextId++;
      this.workers.get(worker)!.set(id, task);
      worker.postMessage({ id, job: task.job } satisfies Request<J>);
    }
  }

  private spawn(): Worker {
    const { entry } = this.spec;
    const worker = entry.pathname.endsWith('.ts')
      ? new Worker(BOOTSTRAP, { workerData: { ...this.spec.workerData, entry: entry.href } })
      : new Worker(entry, { workerData: this.spec.workerData });
    const running = new Map<number, Task<J, R>>();
    this.workers.set(worker, running);
    worker.on('message', (reply: Reply<R>) => {
      const task = running.get(reply.id);
      running.delete(reply.id);
      if (task) {
        if (reply.ok) task.resolve(reply.result);
        else task.reject(new Error(reply.error));
      }
      this.dispatch();
    });
    const lose = (reason: string) => {
      if (!this.workers.delete(worker)) return; // already handled ('error' is followed by 'exit')
      for (const task of running.values()) task.reject(new Error(`bake worker stopped: ${reason}`));
      running.clear();
      if (!this.closed) this.dispatch();
    };
    worker.on('error', (err) => lose(oneLine(err)));
    worker.on('exit', (code) => lose(`exit code ${code}`));
    return worker;
  }

  /** Stop every worker (after the queued jobs finished, when awaited after them). */
  async close(): Promise<void> {
    this.closed = true;
    const workers = [...this.workers.keys()];
    for (const task of this.queue.splice(0)) task.reject(new Error('worker pool closed'));
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** Worker side: answer every job posted by the pool with the handler's result or its one-line error. */
export function serveJobs<J, R>(handler: (job: J) => Promise<R>): void {
  const port = parentPort;
  if (!port) throw new Error('serveJobs must run in a worker thread');
  port.on('message', ({ id, job }: Request<J>) => {
    handler(job).then(
      (result) => port.postMessage({ id, ok: true, result } satisfies Reply<R>),
      (err: unknown) => port.postMessage({ id, ok: false, error: oneLine(err) } satisfies Reply<R>),
    );
  });
}
