/**
 * A fixed-size pool of worker threads (one process tree): the bake runs rooms in parallel without
 * a process per room or per step. A worker loads its entry module, which serves jobs when loaded:
 * a bundled `.mjs` directly, a TypeScript source through worker-bootstrap.mjs (which registers tsx).
 * A worker that dies (uncaught error, memory limit) fails only the job it was running and is replaced.
 */
import { parentPort, Worker } from 'node:worker_threads';

type Reply<R> = { ok: true; result: R } | { ok: false; error: string };

interface Task<J, R> {
  job: J;
  resolve: (result: R) => void;
  reject: (error: Error) => void;
}

export interface WorkerPoolSpec {
  /** The module each worker loads; it calls serveJobs when loaded. */
  entry: URL;
  size: number;
  workerData?: Record<string, unknown>;
}

const BOOTSTRAP = new URL('./worker-bootstrap.mjs', import.meta.url);
const oneLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!;

export class WorkerPool<J, R> {
  private readonly idle: Worker[] = [];
  private readonly running = new Map<Worker, Task<J, R>>();
  private readonly queue: Array<Task<J, R>> = [];
  private size = 0;
  private closed = false;

  constructor(private readonly spec: WorkerPoolSpec) {}

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
    while (!this.closed && this.size < this.spec.size) this.idle.push(this.spawn());
  }

  get workers(): number {
    return this.spec.size;
  }

  private dispatch(): void {
    while (this.queue.length) {
      let worker = this.idle.pop();
      if (!worker) {
        if (this.size >= this.spec.size) return;
        worker = this.spawn();
      }
      const task = this.queue.shift()!;
      this.running.set(worker, task);
      worker.postMessage(task.job);
    }
  }

  private spawn(): Worker {
    const { entry } = this.spec;
    const worker = entry.pathname.endsWith('.ts')
      ? new Worker(BOOTSTRAP, { workerData: { ...this.spec.workerData, entry: entry.href } })
      : new Worker(entry, { workerData: this.spec.workerData });
    this.size++;
    worker.on('message', (reply: Reply<R>) => {
      const task = this.running.get(worker);
      this.running.delete(worker);
      this.idle.push(worker);
      if (task) {
        if (reply.ok) task.resolve(reply.result);
        else task.reject(new Error(reply.error));
      }
      this.dispatch();
    });
    const lose = (reason: string) => {
      if (!this.running.has(worker) && !this.idle.includes(worker)) return; // already handled
      const task = this.running.get(worker);
      this.running.delete(worker);
      const at = this.idle.indexOf(worker);
      if (at >= 0) this.idle.splice(at, 1);
      this.size--;
      task?.reject(new Error(`bake worker stopped: ${reason}`));
      if (!this.closed) this.dispatch();
    };
    worker.on('error', (err) => lose(oneLine(err)));
    worker.on('exit', (code) => lose(`exit code ${code}`));
    return worker;
  }

  /** Stop every worker (after the queued jobs finished, when awaited after them). */
  async close(): Promise<void> {
    this.closed = true;
    const workers = [...this.idle, ...this.running.keys()];
    this.idle.length = 0;
    for (const task of this.queue.splice(0)) task.reject(new Error('worker pool closed'));
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** Worker side: answer every job posted by the pool with the handler's result or its one-line error. */
export function serveJobs<J, R>(handler: (job: J) => Promise<R>): void {
  const port = parentPort;
  if (!port) throw new Error('serveJobs must run in a worker thread');
  port.on('message', (job: J) => {
    handler(job).then(
      (result) => port.postMessage({ ok: true, result } satisfies Reply<R>),
      (err: unknown) => port.postMessage({ ok: false, error: oneLine(err) } satisfies Reply<R>),
    );
  });
}
