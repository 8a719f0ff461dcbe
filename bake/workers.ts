/**
 * A fixed-size pool of worker processes: the bake runs rooms in parallel without a process per room
 * or per step. Each worker runs up to `jobsPerWorker` jobs at once (their awaits interleave, as rooms
 * do on the main thread). A worker loads its entry module, which serves jobs when loaded: a bundled
 * `.mjs` directly, a TypeScript source through worker-bootstrap.mjs (which registers tsx).
 *
 * Workers are child processes, not threads, so that stopping one stops all of its work: native
 * work (sharp/libvips jobs) runs on the process's shared thread pools, where a terminated worker
 * thread's queued jobs ran on for tens of seconds and delayed every room behind them (decisions:
 * the room time limit bounds the room's whole work). A killed process leaves nothing behind.
 *
 * Jobs are hostile input, so a job may kill its worker (uncaught error, heap limit), overrun its
 * time or its worker's resident memory bound (the pool then kills the worker). Only the guilty job
 * fails: a job that overran, or that ran alone on a worker that died. Jobs that shared a dying worker
 * are retried, each alone on a fresh worker, since which of them killed it is unknown; jobs that
 * shared an overrunning one are simply retried.
 *
 * The resident bound (`rssMb`) counts the whole process: V8's heap, typed arrays, wasm memories
 * (Draco, meshopt, recast, Basis) and native buffers (libvips). The parent reads each live worker's
 * resident memory every RSS_POLL_MS, so a worker stuck in a long synchronous wasm call is stopped
 * all the same (its own timers could not fire). A worker over the bound is killed; a job it ran
 * alone, on a worker that had run no job before, fails; any other job it ran is retried alone on a
 * fresh worker (wasm memory never shrinks: what an earlier room left resident is not the next one's
 * fault). Address-space limits (RLIMIT_AS) are no option: V8 reserves many GB for each wasm memory.
 * Without /proc (not Linux) the resident bound is not enforced and no peak is reported; the heap cap
 * and the time limit still are.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { oneLine } from '../common/errors.ts';

interface Request<J> {
  id: number;
  job: J;
}
type Reply<R> = { id: number } & ({ started: true } | { ok: true; result: R } | { ok: false; error: string });

/** A job's result and what its worker measured. */
export interface Measured<R> {
  result: R;
  /**
   * The worker's peak resident memory (VmHWM) when the job ended, in MB: over its whole life, so it
   * includes the jobs it ran before and beside this one. Null without /proc.
   */
  peakRssMb: number | null;
}

interface Task<J, R> {
  job: J;
  resolve: (value: Measured<R>) => void;
  reject: (error: Error) => void;
  /** Retried after its worker died under several jobs: runs with no other job on its worker. */
  alone?: boolean;
  /** Retried after its worker went over the resident bound: runs alone on a worker that ran no job before. */
  fresh?: boolean;
  timer?: NodeJS.Timeout;
}

export interface WorkerPoolSpec {
  /** The module each worker loads; it calls serveJobs when loaded. */
  entry: URL;
  size: number;
  /** Jobs a worker runs at once (default 1). */
  jobsPerWorker?: number;
  workerData?: Record<string, unknown>;
  /** V8 old-generation heap cap of each worker, in MB; a worker over it dies ("out of memory"). */
  heapMb?: number;
  /** Resident memory bound of each worker as a whole, in MB; a worker over it is killed. None: unbounded. */
  rssMb?: number;
  /** How often each live worker's resident memory is read against rssMb, ms (default RSS_POLL_MS). */
  rssPollMs?: number;
  /** A job still running this long after its worker took it fails, and its worker is terminated. */
  jobTimeoutMs?: number;
}

const BOOTSTRAP = new URL('./worker-bootstrap.mjs', import.meta.url);
/** What V8 prints on stderr when a process dies at its heap limit. */
const OUT_OF_MEMORY = /heap out of memory|Reached heap limit/;
/** The end of a worker's stderr kept to tell why it died (its stderr is not shown otherwise). */
const STDERR_TAIL = 4096;
const seconds = (ms: number) => `${Number((ms / 1000).toPrecision(3))} s`;

/**
 * How often the pool reads each live worker's resident memory. A worker touches fresh memory at
 * 1.5–2.5 GB/s here (a typed array filled, pages faulted in), so a worker can pass the bound by about
 * 100–150 MB before it is seen (with the parent's event loop free); one read of /proc/<pid>/status takes
 * 20–70 µs, so two workers cost the parent under 0.3 % of a core.
 */
export const RSS_POLL_MS = 50;
/** Linux: every process's memory is readable under /proc. */
const PROC = existsSync('/proc/self/status');

/** A process's resident memory now and its peak (VmRSS, VmHWM), in MB; null without /proc or once it is gone. */
function residentMb(pid: number | undefined): { rss: number; peak: number } | null {
  if (!PROC || pid === undefined) return null;
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    return null;
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s*(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  const [rss, peak] = [kb('VmRSS'), kb('VmHWM')];
  // A zombie (exited, not yet reaped) has no VmRSS line.
  return Number.isFinite(rss) ? { rss: rss / 1024, peak: (Number.isFinite(peak) ? Math.max(peak, rss) : rss) / 1024 } : null;
}

export class WorkerPool<J, R> {
  /** Every live worker and the jobs it runs, by request id. */
  private readonly workers = new Map<ChildProcess, Map<number, Task<J, R>>>();
  private readonly queue: Array<Task<J, R>> = [];
  /** Workers whose process has ended but whose 'close' (the end of their stderr) has not come yet. */
  private readonly exited = new WeakSet<ChildProcess>();
  /** Jobs each worker has been given over its life. */
  private readonly taken = new WeakMap<ChildProcess, number>();
  /** The highest peak resident memory read from each worker, MB. */
  private readonly peaks = new WeakMap<ChildProcess, number>();
  private watcher: NodeJS.Timeout | undefined;
  private readonly jobsPerWorker: number;
  private nextId = 0;
  private closed = false;

  /** A process that exits (also on an uncaught error) takes its workers with it. */
  private readonly killAll = () => {
    for (const worker of this.workers.keys()) worker.kill('SIGKILL');
  };

  constructor(private readonly spec: WorkerPoolSpec) {
    this.jobsPerWorker = spec.jobsPerWorker ?? 1;
    process.on('exit', this.killAll);
  }

  /** Run a job on the next free worker. Rejects with the job's one-line error. */
  run(job: J): Promise<R> {
    return this.runMeasured(job).then((measured) => measured.result);
  }

  /** run(), with what the worker measured. */
  runMeasured(job: J): Promise<Measured<R>> {
    if (this.closed) return Promise.reject(new Error('worker pool is closed'));
    return new Promise<Measured<R>>((resolve, reject) => {
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
      this.taken.set(worker, (this.taken.get(worker) ?? 0) + 1);
      // A worker that died meanwhile fails its jobs through 'close'.
      worker.send({ id, job: task.job } satisfies Request<J>, (err) => err && this.exited.add(worker));
    }
  }

  /** A new worker starts only while every live one is busy; a job retried alone needs an idle one. */
  private workerFor(task: Task<J, R>): ChildProcess | undefined {
    if (task.fresh) return this.freshWorker();
    let worker: ChildProcess | undefined;
    let least = task.alone ? 1 : this.jobsPerWorker;
    for (const [candidate, running] of this.workers) {
      if (this.exited.has(candidate)) continue;
      const soloed = [...running.values()].some((t) => t.alone);
      if (running.size < least && !soloed) [worker, least] = [candidate, running.size];
    }
    if (least > 0 && this.workers.size < this.spec.size) worker = this.spawn();
    return worker;
  }

  /** An idle worker that has run no job, else a new one (an idle used worker makes way when the pool is full). */
  private freshWorker(): ChildProcess | undefined {
    for (const [candidate, running] of this.workers)
      if (!this.exited.has(candidate) && running.size === 0 && !this.taken.get(candidate)) return candidate;
    if (this.workers.size >= this.spec.size) {
      const idle = [...this.workers].find(([candidate, running]) => running.size === 0 && !this.exited.has(candidate));
      if (!idle) return undefined;
      this.workers.delete(idle[0]);
      idle[0].kill('SIGKILL');
    }
    return this.spawn();
  }

  private spawn(): ChildProcess {
    const { entry, heapMb } = this.spec;
    const script = fileURLToPath(entry.pathname.endsWith('.ts') ? BOOTSTRAP : entry);
    const worker = fork(script, [entry.href, JSON.stringify(this.spec.workerData ?? {})], {
      // Nothing of the parent's flags (a test runner's, a loader's): only the heap cap.
      execArgv: heapMb ? [`--max-old-space-size=${heapMb}`] : [],
      serialization: 'advanced', // structured clone, as worker threads had: buffers and typed arrays travel as such
      // Results travel over IPC; a worker's stdout (e.g. the Basis encoder's per-slice chatter) is not the CLI's output.
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    const running = new Map<number, Task<J, R>>();
    this.workers.set(worker, running);
    let stderr = '';
    worker.stderr!.setEncoding('utf8').on('data', (text: string) => void (stderr = (stderr + text).slice(-STDERR_TAIL)));
    worker.on('message', (reply: Reply<R>) => this.answer(worker, running, reply));
    worker.on('error', (err) => this.lose(worker, oneLine(err)));
    worker.on('exit', () => this.exited.add(worker));
    // 'close': its stderr has been read to the end, so an out-of-memory death is told as such.
    worker.on('close', (code, signal) => this.lose(worker, this.deathReason(code, signal, stderr)));
    this.watchMemory();
    return worker;
  }

  /** Start reading the workers' resident memory (once, when there is a bound and /proc). */
  private watchMemory(): void {
    if (this.watcher || !this.spec.rssMb || !PROC) return;
    this.watcher = setInterval(() => {
      for (const worker of [...this.workers.keys()]) {
        if (this.exited.has(worker)) continue;
        const memory = this.readMemory(worker);
        if (memory && memory.rss > this.spec.rssMb!) this.overMemory(worker, memory.rss);
      }
    }, this.spec.rssPollMs ?? RSS_POLL_MS);
    this.watcher.unref();
  }

  /** The worker's resident memory now, its peak noted. */
  private readMemory(worker: ChildProcess): { rss: number; peak: number } | null {
    const memory = residentMb(worker.pid);
    if (memory) this.peaks.set(worker, Math.max(memory.peak, this.peaks.get(worker) ?? 0));
    return memory;
  }

  /**
   * A worker over its resident bound: killed now. A job that ran alone on it, and was its first,
   * fails (it alone made that memory); any other is retried alone on a fresh worker.
   */
  private overMemory(worker: ChildProcess, rssMb: number): void {
    const running = this.workers.get(worker);
    if (!running) return;
    this.workers.delete(worker);
    worker.kill('SIGKILL');
    const tasks = [...running.values()];
    running.clear();
    for (const task of tasks) clearTimeout(task.timer);
    const first = this.taken.get(worker) === 1;
    const guilty = (task: Task<J, R>) => this.closed || task.fresh || (tasks.length === 1 && first);
    const limit = `${this.spec.rssMb} MB resident memory limit`;
    const reason = `bake worker stopped: out of memory (${Math.round(rssMb)} MB resident, over the ${limit})`;
    for (const task of tasks.filter(guilty)) task.reject(new Error(reason));
    this.requeue(
      tasks.filter((t) => !guilty(t)),
      true,
      true,
    );
    if (!this.closed) this.dispatch();
  }

  private answer(worker: ChildProcess, running: Map<number, Task<J, R>>, reply: Reply<R>): void {
    const task = running.get(reply.id);
    if (!task) return;
    if ('started' in reply) {
      this.startClock(worker, reply.id, task);
      return;
    }
    running.delete(reply.id);
    clearTimeout(task.timer);
    if (reply.ok) task.resolve({ result: reply.result, peakRssMb: this.readMemory(worker)?.peak ?? this.peaks.get(worker) ?? null });
    else task.reject(new Error(reply.error));
    this.dispatch();
  }

  /** The limit counts from when the worker takes the job: not its start-up, not the queue. */
  private startClock(worker: ChildProcess, id: number, task: Task<J, R>): void {
    const limit = this.spec.jobTimeoutMs;
    if (!limit) return;
    task.timer = setTimeout(() => this.overrun(worker, id, limit), limit);
    task.timer.unref();
  }

  /** A job over its time: it fails; its worker is terminated; the worker's other jobs are retried. */
  private overrun(worker: ChildProcess, id: number, limit: number): void {
    const running = this.workers.get(worker);
    const task = running?.get(id);
    if (!running || !task) return;
    this.workers.delete(worker);
    running.delete(id);
    task.reject(new Error(`took longer than ${seconds(limit)} (stopped)`));
    this.requeue([...running.values()], false);
    running.clear();
    worker.kill('SIGKILL'); // with it, every native job the room queued
    this.dispatch();
  }

  private deathReason(code: number | null, signal: NodeJS.Signals | null, stderr: string): string {
    if (OUT_OF_MEMORY.test(stderr)) return `out of memory${this.spec.heapMb ? ` (over the ${this.spec.heapMb} MB heap limit)` : ''}`;
    return signal ? `killed by ${signal}` : `exit code ${code}`;
  }

  /** A worker died or could not start (the first of 'error' and 'close' counts). */
  private lose(worker: ChildProcess, reason: string): void {
    const running = this.workers.get(worker);
    if (!running || !this.workers.delete(worker)) return;
    const tasks = [...running.values()];
    running.clear();
    for (const task of tasks) clearTimeout(task.timer);
    const guilty = (task: Task<J, R>) => this.closed || tasks.length === 1 || task.alone;
    for (const task of tasks.filter(guilty)) task.reject(new Error(`bake worker stopped: ${reason}`));
    this.requeue(
      tasks.filter((t) => !guilty(t)),
      true,
    );
    if (!this.closed) this.dispatch();
  }

  /** Back to the head of the queue, in their order. */
  private requeue(tasks: Array<Task<J, R>>, alone: boolean, fresh = false): void {
    for (const task of tasks) clearTimeout(task.timer);
    this.queue.unshift(
      ...tasks.map((task) => ({ ...task, alone: task.alone || alone || fresh, fresh: task.fresh || fresh, timer: undefined })),
    );
  }

  /** Stop every worker (after the queued jobs finished, when awaited after them). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watcher);
    process.off('exit', this.killAll);
    const workers = [...this.workers.keys()];
    for (const task of this.queue.splice(0)) task.reject(new Error('worker pool closed'));
    await Promise.all(workers.map((w) => stop(w)));
  }
}

/** Kill a worker process and wait until it is gone. */
function stop(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return Promise.resolve();
  const gone = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  worker.kill('SIGKILL');
  return gone;
}

/** Worker side: the pool's workerData (the entry's second argument). */
export function poolWorkerData<T extends Record<string, unknown>>(): Partial<T> {
  const json = process.argv[3];
  return json ? (JSON.parse(json) as Partial<T>) : {};
}

/** Worker side: acknowledge each job (its time starts), then answer with its result or one-line error. */
export function serveJobs<J, R>(handler: (job: J) => Promise<R>): void {
  if (!process.send) throw new Error('serveJobs must run in a pool worker process');
  const send = (reply: Reply<R>) => process.send!(reply);
  process.on('message', ({ id, job }: Request<J>) => {
    send({ id, started: true });
    handler(job).then(
      (result) => send({ id, ok: true, result }),
      (err: unknown) => send({ id, ok: false, error: oneLine(err) }),
    );
  });
  // The pool went away (its process ended, even by SIGKILL): nothing is left to answer to. A worker
  // busy in a synchronous step notices when that step ends.
  process.on('disconnect', () => process.exit(0));
}
