/**
 * A fixed-size pool of worker threads (one process tree): the bake runs rooms in parallel without
 * a process per room or per step. Each worker runs up to `jobsPerWorker` jobs at once (their
 * awaits interleave, as rooms do on the main thread). A worker loads its entry module, which serves
 * jobs when loaded: a bundled `.mjs` directly, a TypeScript source through worker-bootstrap.mjs
 * (which registers tsx).
 *
 * Jobs are hostile input, so a job may kill its worker (uncaught error, heap limit) or overrun its
 * time (the pool then terminates the worker). Only the guilty job fails: a job that overran, or that
 * ran alone on a worker that died. Jobs that shared a dying worker are retried, each alone on a
 * fresh worker, since which of them killed it is unknown; jobs that shared an overrunning one are
 * simply retried.
 */
import { parentPort, type ResourceLimits, Worker } from 'node:worker_threads';

interface Request<J> {
  id: number;
  job: J;
}
type Reply<R> = { id: number } & ({ started: true } | { ok: true; result: R } | { ok: false; error: string });

interface Task<J, R> {
  job: J;
  resolve: (result: R) => void;
  reject: (error: Error) => void;
  /** Retried after its worker died under several jobs: runs with no other job on its worker. */
  alone?: boolean;
  timer?: NodeJS.Timeout;
}

export interface WorkerPoolSpec {
  /** The module each worker loads; it calls serveJobs when loaded. */
  entry: URL;
  size: number;
  /** Jobs a worker runs at once (default 1). */
  jobsPerWorker?: number;
  workerData?: Record<string, unknown>;
  /** V8 heap caps of each worker; a worker over them dies (ERR_WORKER_OUT_OF_MEMORY). */
  resourceLimits?: ResourceLimits;
  /** A job still running this long after its worker took it fails, and its worker is terminated. */
  jobTimeoutMs?: number;
}

const BOOTSTRAP = new URL('./worker-bootstrap.mjs', import.meta.url);
const oneLine = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0]!;
const seconds = (ms: number) => `${Number((ms / 1000).toPrecision(3))} s`;

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

  /** Jobs go out in order, each to the least busy worker that may take it. */
  private dispatch(): void {
    while (this.queue.length) {
      const worker = this.workerFor(this.queue[0]!);
      if (!worker) return;
      const task = this.queue.shift()!;
      const id = this.nextId++;
      this.workers.get(worker)!.set(id, task);
      worker.postMessage({ id, job: task.job } satisfies Request<J>);
    }
  }

  /** A new worker starts only while every live one is busy; a job retried alone needs an idle one. */
  private workerFor(task: Task<J, R>): Worker | undefined {
    let worker: Worker | undefined;
    let least = task.alone ? 1 : this.jobsPerWorker;
    for (const [candidate, running] of this.workers) {
      const soloed = [...running.values()].some((t) => t.alone);
      if (running.size < least && !soloed) [worker, least] = [candidate, running.size];
    }
    if (least > 0 && this.workers.size < this.spec.size) worker = this.spawn();
    return worker;
  }

  private spawn(): Worker {
    const { entry, resourceLimits } = this.spec;
    const worker = entry.pathname.endsWith('.ts')
      ? new Worker(BOOTSTRAP, { workerData: { ...this.spec.workerData, entry: entry.href }, resourceLimits })
      : new Worker(entry, { workerData: this.spec.workerData, resourceLimits });
    const running = new Map<number, Task<J, R>>();
    this.workers.set(worker, running);
    worker.on('message', (reply: Reply<R>) => this.answer(worker, running, reply));
    worker.on('error', (err) => this.lose(worker, this.deathReason(err)));
    worker.on('exit', (code) => this.lose(worker, `exit code ${code}`));
    return worker;
  }

  private answer(worker: Worker, running: Map<number, Task<J, R>>, reply: Reply<R>): void {
    const task = running.get(reply.id);
    if (!task) return;
    if ('started' in reply) return this.startClock(worker, reply.id, task);
    running.delete(reply.id);
    clearTimeout(task.timer);
    if (reply.ok) task.resolve(reply.result);
    else task.reject(new Error(reply.error));
    this.dispatch();
  }

  /** The limit counts from when the worker takes the job: not its start-up, not the queue. */
  private startClock(worker: Worker, id: number, task: Task<J, R>): void {
    const limit = this.spec.jobTimeoutMs;
    if (!limit) return;
    task.timer = setTimeout(() => this.overrun(worker, id, limit), limit);
    task.timer.unref();
  }

  /** A job over its time: it fails; its worker is terminated; the worker's other jobs are retried. */
  private overrun(worker: Worker, id: number, limit: number): void {
    const running = this.workers.get(worker);
    const task = running?.get(id);
    if (!running || !task) return;
    this.workers.delete(worker);
    running.delete(id);
    task.reject(new Error(`took longer than ${seconds(limit)} (stopped)`));
    this.requeue([...running.values()], false);
    running.clear();
    void worker.terminate();
    this.dispatch();
  }

  private deathReason(err: Error & { code?: string }): string {
    if (err.code !== 'ERR_WORKER_OUT_OF_MEMORY') return oneLine(err);
    const mb = this.spec.resourceLimits?.maxOldGenerationSizeMb;
    return `out of memory${mb ? ` (over the ${mb} MB heap limit)` : ''}`;
  }

  /** A worker died ('error' is followed by 'exit': the first one counts). */
  private lose(worker: Worker, reason: string): void {
    const running = this.workers.get(worker);
    if (!running || !this.workers.delete(worker)) return;
    const tasks = [...running.values()];
    running.clear();
    for (const task of tasks) clearTimeout(task.timer);
    const guilty = (task: Task<J, R>) => this.closed || tasks.length === 1 || task.alone;
    for (const task of tasks.filter(guilty)) task.reject(new Error(`bake worker stopped: ${reason}`));
    this.requeue(tasks.filter((t) => !guilty(t)), true);
    if (!this.closed) this.dispatch();
  }

  /** Back to the head of the queue, in their order. */
  private requeue(tasks: Array<Task<J, R>>, alone: boolean): void {
    for (const task of tasks) clearTimeout(task.timer);
    this.queue.unshift(...tasks.map((task) => ({ ...task, alone: task.alone || alone, timer: undefined })));
  }

  /** Stop every worker (after the queued jobs finished, when awaited after them). */
  async close(): Promise<void> {
    this.closed = true;
    const workers = [...this.workers.keys()];
    for (const task of this.queue.splice(0)) task.reject(new Error('worker pool closed'));
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** Worker side: acknowledge each job (its time starts), then answer with its result or one-line error. */
export function serveJobs<J, R>(handler: (job: J) => Promise<R>): void {
  const port = parentPort;
  if (!port) throw new Error('serveJobs must run in a worker thread');
  port.on('message', ({ id, job }: Request<J>) => {
    port.postMessage({ id, started: true } satisfies Reply<R>);
    handler(job).then(
      (result) => port.postMessage({ id, ok: true, result } satisfies Reply<R>),
      (err: unknown) => port.postMessage({ id, ok: false, error: oneLine(err) } satisfies Reply<R>),
    );
  });
}
