/**
 * `make bench-serve`: the museum server as shipped — its default configuration (`museum serve`: the
 * access log on, request ids, CORS) — against a bare node:http server sending the same bytes with the
 * same Content-Type and ETag and nothing else (the floor), in one run. Settings: BENCH_DURATION s per
 * run, BENCH_ROUNDS, BENCH_CONNECTIONS, BENCH_PIPELINING, BENCH_KEYS, BENCH_ONLY (a regex of scenario names),
 * BENCH_CALIBRATE (also measure what the bench charges for extra server work: see `calibrate`).
 *
 *   slots        GET /v1/rooms/{id}/slots                 (public)          target ≥ 0.85× the floor
 *   slots 304    the same with If-None-Match               (revalidation)    target ≥ 0.8×
 *                both also against the spec floor: bare node:http that writes what the spec asks of
 *                every answer (the museum's headers, a request id, an access line) and nothing else —
 *                the ceiling of those two ratios, and the yardstick of the museum's own overhead
 *   files GLB    GET /files/<sha256>.glb (≥ 100 KB)        (public)          target ≥ 0.9×
 *                (driven by fetchMany: a client that skips bodies unparsed, so the servers are busy)
 *   artworks     GET /v1/artworks?page=2 with a key        (key + limiter)   target ≥ 0.6×
 *   artworks, Redis limiter  the same through a second server with REDIS_URL (a local
 *                redis-server, when installed)                              target ≥ 0.45×
 *   artworks, PostgreSQL keys  the same through a third server with DATABASE_URL (a local
 *                PostgreSQL started as the tests do; the round's keys used once before the run, as
 *                a running instance knows its clients' keys)                target ≥ 0.5×
 *
 * The museum is `museum serve` itself (bin/museum.js, from the dist/ bundle `make bench-serve` builds
 * first), as an operator starts it (`npx museum serve`): bin/museum, which passes node
 * `--no-memory-reducer`, and only environment variables. The
 * floor process runs with the same node flags, so both sides are at their best (without the flag, a
 * process that idled ~8 s after start met V8's memory-reducing GCs and stayed ~25 % dearer per
 * request: on either side, a run measured that state rather than the server).
 *
 * The headline figure is server CPU time per request (utime + stime of the server process, every
 * thread, from /proc around each run, divided by the requests answered) and its ratio floor ÷
 * museum: the efficiency of the server relative to the floor, which a busy shared machine disturbs
 * least. req/s and its ratio are printed beside it. The servers and the floor run pinned to CPU 0
 * (taskset), the load generator (autocannon, this process) on CPU 1. Scenario after scenario, each
 * round starts a fresh museum process and a fresh floor process and measures them back to back,
 * alternating which goes first; ratios are medians of the per-round ratios. (Fresh processes: each
 * process carries a cost offset of its own for its whole life, a few per cent, see `main`.)
 *
 * The access log goes where `museum serve` writes it, stderr, here redirected to a file as an
 * operator would; the run checks it holds one line per request answered.
 *
 * Rate limit: the keyed scenarios rotate over thousands of real keys, each used well under 120 times
 * per minute, so every request runs the real key lookup and the real limiter with production limits.
 */
import { type ChildProcess, fork, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, createReadStream, existsSync, mkdirSync, openSync, readFileSync, rmSync, write as fsWrite } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { createServer, get as httpGet } from 'node:http';
import { type AddressInfo, createConnection } from 'node:net';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Document } from '@gltf-transform/core';
import autocannon from 'autocannon';
import { fileUrl } from '../artifacts/format.ts';
import { putContentFile } from '../artifacts/store.ts';
import { getIO } from '../bake/gltf-io.ts';
import { missingServerFlags, SERVER_NODE_FLAGS } from '../server/cli.ts';
import { openStateDb } from '../server/state/db.ts';
import { SqliteKeyStore } from '../server/state/keys.ts';
import { publishFixtureBake } from '../test/helpers/artifacts.ts';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.ts';
import { startRedis } from '../test/helpers/redis.ts';
import { openStateStore } from '../server/state/store.ts';
import pino from 'pino';
import { freshBundle } from '../bin/fresh-bundle.js';

const SELF = fileURLToPath(import.meta.url);
const ROOT = resolve(SELF, '../..');
const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PIPELINING = Number(process.env.BENCH_PIPELINING ?? 1);
const ARTWORKS_PATH = '/v1/artworks?page=2';
const SLOTS_PATH = '/v1/rooms/1/slots';

/** A GLB of ~240 KB (one mesh of 20,000 vertices): a realistic /files download above 100 KB. */
async function benchGlb(): Promise<Uint8Array> {
  const doc = new Document();
  const buffer = doc.createBuffer();
  const positions = new Float32Array(20_000 * 3).map((_, i) => Math.sin(i * 0.7) * 10);
  const accessor = doc.createAccessor().setType('VEC3').setArray(positions).setBuffer(buffer);
  const mesh = doc.createMesh('bench').addPrimitive(doc.createPrimitive().setAttribute('POSITION', accessor).setMode(0));
  doc.createScene().addChild(doc.createNode('bench').setMesh(mesh));
  return (await getIO()).writeBinary(doc);
}

/** A server process to measure: its pid (for its CPU time) and URL. */
interface ServerProcess {
  child: ChildProcess;
  url: string;
}

/**
 * `museum serve` as an operator starts it (bin/museum, as npx runs it), its stderr (the access log)
 * written to `logPath`; resolves once it says where it serves.
 */
async function startMuseum(env: Record<string, string>, logPath: string): Promise<ServerProcess> {
  const logFd = openSync(logPath, 'w');
  const child = spawn(join(ROOT, 'bin/museum'), ['serve'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'ignore', logFd],
  });
  closeSync(logFd);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const port = /museum: serving .* at http:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(logPath, 'utf8'))?.[1];
    if (port) {
      // Measuring a server without its node flags would measure a configuration nobody ships.
      const missing = missingServerFlags(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0'));
      if (missing.length > 0) throw new Error(`museum serve runs without ${missing.join(' ')}`);
      return { child, url: `http://127.0.0.1:${port}` };
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`museum serve did not start: ${readFileSync(logPath, 'utf8').slice(-500)}`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

/** An answer as it is on the wire: its status, raw header list (names as sent) and body. */
interface WireAnswer {
  status: number;
  headers: string[];
  body: Buffer;
}

/**
 * The museum's answer to `url`, less what node adds to every answer itself (Date, Connection,
 * Keep-Alive) and the request id: what the floors send back.
 */
function wireAnswer(url: string, headers: Record<string, string> = {}): Promise<WireAnswer> {
  const own = new Set(['date', 'connection', 'keep-alive', 'x-request-id']);
  return new Promise((done, fail) =>
    httpGet(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const list: string[] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) if (!own.has(res.rawHeaders[i]!.toLowerCase())) list.push(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
        done({ status: res.statusCode!, headers: list, body: Buffer.concat(chunks) });
      });
    }).on('error', fail),
  );
}

/** The museum's answers the floors serve, fetched once by the parent (every floor process gets the same bytes). */
interface FloorBytes {
  slots: WireAnswer;
  slotsNotModified: WireAnswer;
  glb: WireAnswer;
  artworks: WireAnswer;
}

async function floorBytes(museumUrl: string, probeKey: string, glbPath: string): Promise<FloorBytes> {
  const ok = async (path: string, headers: Record<string, string> = {}) => {
    const answer = await wireAnswer(museumUrl + path, headers);
    if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}`);
    return answer;
  };
  const slots = await ok(SLOTS_PATH);
  const slotsNotModified = await wireAnswer(museumUrl + SLOTS_PATH, { 'If-None-Match': headerOf(slots, 'etag')! });
  return { slots, slotsNotModified, glb: await ok(glbPath), artworks: await ok(ARTWORKS_PATH, { 'X-API-Key': probeKey }) };
}

const headerOf = (answer: WireAnswer, name: string): string | null => {
  const at = answer.headers.findIndex((n) => n.toLowerCase() === name);
  return at < 0 ? null : answer.headers[at + 1]!;
};

/**
 * The spec floor: what any server that keeps the spec pays on the slots route, and nothing more —
 * bare node:http writing the museum's very headers (CORS, Cache-Control, ETag…), a fresh request id
 * (a prefix and a counter), and one access line per request in the museum's format, batched 1 MB
 * at a time (as the museum's log does: a write's hand-off to the thread pool is dear here) into one
 * asynchronous write(2) to `logPath` (its own few lines, not the museum's log
 * writer: a slow product logger must show as overhead, not move the yardstick). Where it stands against the floor is the
 * ceiling of the slots targets; where the museum stands against it is the museum's own overhead.
 */
async function serveSpecFloor(bytes: FloorBytes, logPath: string): Promise<{ url: string; close: () => void }> {
  const ok = bytes.slots;
  const etag = headerOf(ok, 'etag')!;
  const notModified = bytes.slotsNotModified;
  const prefix = randomBytes(9).toString('base64url');
  let sequence = 0;
  const fd = openSync(logPath, 'w');
  let batch: Buffer = Buffer.allocUnsafe(1024 * 1024);
  let used = 0;
  let writing = false;
  let timeMs = -1;
  let time = '';
  /** Filled batches waiting for the write in flight; a written batch is reused (one spare). */
  const queue: Array<{ batch: Buffer; used: number }> = [];
  let spare: Buffer | null = null;
  const pump = (): void => {
    if (writing || queue.length === 0) return;
    writing = true;
    const chunk = queue.shift()!;
    fsWrite(fd, chunk.batch, 0, chunk.used, null, () => {
      writing = false;
      spare ??= chunk.batch;
      pump();
    });
  };
  const logLine = (requestId: string, path: string, status: number, started: number): void => {
    const ms = Math.round((performance.now() - started) * 100) / 100;
    // The epoch millisecond formatted once per millisecond, as the museum's log does.
    const now = Date.now();
    if (now !== timeMs) {
      timeMs = now;
      time = String(now);
    }
    const line = `{"level":30,"time":${time},"requestId":"${requestId}","method":"GET","path":"${path}","status":${status},"ms":${ms},"fast":true,"msg":"request"}\n`;
    if (used + line.length * 3 > batch.length) {
      queue.push({ batch, used });
      batch = spare ?? Buffer.allocUnsafe(batch.length);
      spare = null;
      used = 0;
      pump();
    }
    used += batch.write(line, used);
  };
  // Each answer's header list built once with the request id's slot first, filled per request (node
  // reads the list synchronously and keeps none of it): no per-request copy, as a careful bare server
  // would write it — a slower spec floor would understate the ceiling and flatter spec÷us.
  const withId = (answer: typeof ok) => ({ ...answer, list: ['X-Request-Id', '', ...answer.headers] });
  const [okAnswer, notModifiedAnswer] = [withId(ok), withId(notModified)];
  // Calibration (BENCH_CALIBRATE): a busy-wait per request, set by the parent — 0 in every measured pair.
  let extraMs = 0;
  process.on('message', (message: { specExtraUs?: number }) => {
    if (typeof message.specExtraUs === 'number') extraMs = message.specExtraUs / 1000;
  });
  const server = createServer((req, res) => {
    const started = performance.now();
    if (extraMs > 0) while (performance.now() - started < extraMs); // calibrating only
    const requestId = `${prefix}-${(++sequence).toString(36)}`;
    const answer = req.headers['if-none-match'] === etag ? notModifiedAnswer : okAnswer;
    answer.list[1] = requestId;
    res.writeHead(answer.status, answer.list);
    res.end(answer.status === 304 ? undefined : answer.body);
    logLine(requestId, SLOTS_PATH, answer.status, started);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}

/** The floor (a child process): bare node:http with the museum's bytes, Content-Type and ETag, nothing else; and the spec floor. */
async function serveFloor(bytes: FloorBytes, specLogPath: string): Promise<FloorReady> {
  // Each answer's header lists built once, as a careful bare server would (a per-request object
  // spread would make the floor slower than plain node:http, and every ratio look better than it is).
  const prepared = (answer: WireAnswer) => {
    const etag = headerOf(answer, 'etag');
    const type = headerOf(answer, 'content-type')!;
    return {
      body: answer.body,
      etag,
      ok: ['Content-Type', type, 'Content-Length', String(answer.body.length), ...(etag ? ['ETag', etag] : [])],
      notModified: etag ? ['ETag', etag] : [],
    };
  };
  const answers = new Map([['/slots', prepared(bytes.slots)], ['/glb', prepared(bytes.glb)]]);
  const keyedAnswer = prepared(bytes.artworks);
  const floor = createServer((req, res) => {
    const answer = answers.get(req.url!) ?? keyedAnswer;
    if (answer.etag !== null && req.headers['if-none-match'] === answer.etag) {
      res.writeHead(304, answer.notModified);
      res.end();
      return;
    }
    res.writeHead(200, answer.ok);
    res.end(answer.body);
  });
  floor.keepAliveTimeout = 65_000;
  await new Promise<void>((done) => floor.listen(0, '127.0.0.1', done));
  const spec = await serveSpecFloor(bytes, specLogPath);
  process.on('disconnect', () => {
    spec.close();
    floor.closeAllConnections();
    floor.close(() => process.exit(0));
  });
  return { floor: `http://127.0.0.1:${(floor.address() as AddressInfo).port}`, spec: spec.url };
}

interface Scenario {
  name: string;
  /** Keys used once before the run, one request each (the PostgreSQL scenario). */
  verifyFirst?: string[];
  child: ChildProcess;
  url: string;
  headers?: Record<string, string>;
  /** Large answers: driven by fetchMany rather than autocannon. */
  largeBody?: boolean;
  /** Per-request headers cycled by each connection (the keyed scenarios' keys). */
  requests?: Array<{ headers: Record<string, string> }>;
}

/** Which `museum serve` a pair measures: the default configuration, the Redis limiter, PostgreSQL keys. */
type MuseumConfig = 'default' | 'redis' | 'pg';

/** A side of a pair before its round's processes exist: the path on its server. */
type Side = Omit<Scenario, 'child' | 'url'> & { path: string };

/** A museum scenario, its floor (and on the slots routes the spec floor), and its target. */
interface Pair {
  target: number;
  config: MuseumConfig;
  floor: Side;
  spec?: Side;
  museum: Side;
}

interface Figures {
  rps: number;
  p99: number;
  /** Server process CPU time per request, µs. */
  cpuUs: number;
  requests: number;
}

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU time (user + system, every thread) a process has used so far, µs. */
async function serverCpu(child: ChildProcess): Promise<number> {
  // Fields after the command name, whose parentheses may hold spaces: utime and stime are 14 and 15.
  const stat = await readFile(`/proc/${child.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
}

/**
 * A load generator for large bodies: keep-alive connections that each send a GET, read the status
 * line and headers, then skip Content-Length bytes unparsed, and send the next. autocannon parses
 * every body chunk on its one thread and tops out near 340 answers of 235 KB a second here, so the
 * servers' CPU per answer measured under it swung 80–220 µs for the same work, with the client's
 * pace; this client keeps the servers busy instead.
 */
async function fetchMany(target: URL, connections: number, durationS: number): Promise<{ answered: number; statuses: Map<number, number>; errors: number }> {
  const request = Buffer.from(`GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n\r\n`);
  const statuses = new Map<number, number>();
  let answered = 0;
  let errors = 0;
  const deadline = Date.now() + durationS * 1000;
  const connection = () =>
    new Promise<void>((done) => {
      const socket = createConnection({ host: target.hostname, port: Number(target.port) });
      let head = Buffer.alloc(0);
      let bodyLeft = -1; // -1: reading a head
      const next = () => (Date.now() < deadline ? socket.write(request) : socket.end());
      socket.on('connect', next);
      socket.on('data', (chunk: Buffer) => {
        let at = 0;
        while (at < chunk.length) {
          if (bodyLeft < 0) {
            head = Buffer.concat([head, chunk.subarray(at)]);
            const end = head.indexOf('\r\n\r\n');
            if (end < 0) return;
            const text = head.subarray(0, end).toString('latin1');
            const status = Number(text.slice(9, 12));
            statuses.set(status, (statuses.get(status) ?? 0) + 1);
            bodyLeft = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? 0);
            at = chunk.length - (head.length - end - 4);
            head = Buffer.alloc(0);
          }
          const take = Math.min(bodyLeft, chunk.length - at);
          bodyLeft -= take;
          at += take;
          if (bodyLeft === 0) {
            bodyLeft = -1;
            answered++;
            next();
          }
        }
      });
      socket.on('error', () => {
        errors++;
        done();
      });
      socket.on('close', () => done());
    });
  await Promise.all(Array.from({ length: connections }, connection));
  return { answered, statuses, errors };
}

async function measure(scenario: Scenario, durationS: number): Promise<Figures> {
  if (scenario.largeBody) {
    const cpuBefore = await serverCpu(scenario.child);
    const started = performance.now();
    const { answered, statuses, errors } = await fetchMany(new URL(scenario.url), CONNECTIONS, durationS);
    const cpuUs = (await serverCpu(scenario.child)) - cpuBefore;
    const seconds = (performance.now() - started) / 1000;
    if (errors || [...statuses.keys()].some((status) => status !== 200)) {
      throw new Error(`${scenario.name}: ${errors} errors, statuses ${JSON.stringify([...statuses])}`);
    }
    return { rps: answered / seconds, p99: Number.NaN, cpuUs: cpuUs / Math.max(1, answered), requests: answered };
  }
  const cpuBefore = await serverCpu(scenario.child);
  const url = new URL(scenario.url);
  const statuses = new Map<number, number>();
  const instance = autocannon({
    url: scenario.url,
    connections: CONNECTIONS,
    pipelining: PIPELINING,
    duration: durationS,
    headers: scenario.headers,
    requests: scenario.requests?.map((r) => ({ method: 'GET', path: url.pathname + url.search, headers: { ...scenario.headers, ...r.headers } })),
  });
  instance.on('response', (_client: unknown, status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1));
  const result = await instance;
  const cpuUs = (await serverCpu(scenario.child)) - cpuBefore;
  // A 304 is the expected answer of the revalidation scenario, not a failure.
  const notModified = (result as unknown as Record<string, number>)['3xx'] ?? 0;
  const unexpected = scenario.name.includes('304') ? result.non2xx - notModified : result.non2xx;
  if (unexpected || result.errors || result.timeouts) {
    const byStatus = [...statuses].map(([status, count]) => `${count} × ${status}`).join(', ');
    throw new Error(`${scenario.name}: ${unexpected} unexpected statuses (${byStatus}), ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  const requests = result.requests.total;
  return { rps: result.requests.average, p99: result.latency.p99, cpuUs: cpuUs / Math.max(1, requests), requests };
}

/** Read before this process pins itself to one core (then it sees one). */
const CORES = availableParallelism();

/**
 * On a machine with at least two cores, run the servers on CPU 0 and the load generator on CPU 1
 * (taskset): they no longer steal time slices from each other. Floor and museum share the same core
 * and the same client, so the ratios stay like for like.
 */
function pinCpus(serverPids: number[]): boolean {
  if (CORES < 2) return false;
  // `-a`: every thread. A thread that ends while taskset walks them fails the call (a process that
  // has just started is still starting and ending threads): try again.
  const pin = (cpu: number, pid: number) => {
    for (let attempt = 1; ; attempt++) {
      const result = spawnSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { encoding: 'utf8' });
      if (result.status === 0) return true;
      if (attempt === 5) {
        process.stderr.write(`bench-serve: taskset ${pid}: ${result.stderr}`);
        return false;
      }
    }
  };
  return serverPids.every((pid) => pin(0, pid)) && pin(1, process.pid);
}

interface FloorReady {
  floor: string;
  spec: string;
}

/** A floor process: the floor and the spec floor, serving `bytes`; the spec floor logs to `specLogPath`. */
function forkFloor(bytes: FloorBytes, specLogPath: string): Promise<{ child: ChildProcess; ready: FloorReady }> {
  // The museum's node flags (SERVER_NODE_FLAGS), so the floor is at its best too. `advanced`: the
  // bytes go over as Buffers (structured clone), not as JSON arrays of numbers.
  const child = fork(SELF, ['--floor'], { execArgv: [...SERVER_NODE_FLAGS, '--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
  child.send({ bytes, specLogPath });
  return new Promise((done, fail) => {
    child.once('message', (m) => done({ child, ready: m as FloorReady }));
    child.once('exit', (code) => fail(new Error(`floor process exited (${code})`)));
  });
}

/** The floor process's side of forkFloor. */
function floorProcess(): void {
  process.once('message', (message: { bytes: FloorBytes; specLogPath: string }) => {
    // Structured clone hands Buffers over as plain Uint8Arrays.
    const asBuffer = (body: Uint8Array) => Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const bytes = Object.fromEntries(Object.entries(message.bytes).map(([name, answer]) => [name, { ...answer, body: asBuffer(answer.body) }])) as unknown as FloorBytes;
    void serveFloor(bytes, message.specLogPath).then((ready) => process.send!(ready));
  });
}

/** A process to stop, and when it has exited (a museum flushes its access log on SIGTERM). */
async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  if (child.connected) child.disconnect();
  else child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(killer);
}

/** Each key used once, in order, on one connection: the server knows them before the run. */
async function useKeysOnce(url: string, keys: string[]): Promise<number> {
  const target = new URL(url);
  const result = await autocannon({
    url,
    connections: 1,
    amount: keys.length,
    requests: keys.map((key) => ({ method: 'GET', path: target.pathname + target.search, headers: { 'X-API-Key': key } })),
  });
  if (result.non2xx || result.errors) throw new Error(`using the keys once: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  return result.requests.total;
}

/** `count` keys in a fresh PostgreSQL state store. */
async function keysInPostgres(url: string, count: number): Promise<string[]> {
  const store = await openStateStore({ stateDb: ':memory:', databaseUrl: url, exhibitionTtlMs: 86_400_000 }, pino({ level: 'warn' }));
  try {
    return await store.keys.createMany(Array.from({ length: count }, (_, i) => `bench-pg-${i}`));
  } finally {
    await store.close();
  }
}

/** Access lines in the log, read as a stream: a quiet machine writes more than a string can hold. */
async function countAccessLines(path: string): Promise<number> {
  let count = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity })) if (line.includes('"msg":"request"')) count++;
  return count;
}

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

/** Busy-waits (µs per request) the calibration adds to the spec floor. */
const CALIBRATION_EXTRA_US = [0, 0.75, 1.5, 3];

/**
 * BENCH_CALIBRATE=1: what this machine and this client charge for extra server work. The spec floor
 * runs the slots scenario again with a busy-wait of 0, 0.75, 1.5 and 3 µs per request, each against
 * the floor, round by round as the pairs are. Its measured cost should grow by the wait; where it
 * grows by more, a server's own overhead shows amplified in every ratio of the run (on the 2-vCPU VM
 * of 2026-11-27, +1.5 µs of work measured +2 to +4.4 µs while the processes ran with V8's memory
 * reducer; with `--no-memory-reducer`, +1.5).
 */
async function calibrate(floorChild: ChildProcess, floorUrl: string, specUrl: string, run: (scenario: Scenario, round: number) => Promise<Figures>): Promise<string[]> {
  const lines = ['', 'Calibration: the spec floor with a busy-wait per request (slots), against the floor.', `${'busy-wait µs'.padEnd(14)} ${'CPU µs/req'.padStart(10)} ${'growth'.padStart(7)} ${'floor÷us'.padStart(8)}`];
  let base = Number.NaN;
  for (const extraUs of CALIBRATION_EXTRA_US) {
    floorChild.send({ specExtraUs: extraUs });
    const own: number[] = [];
    const ratios: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const sides: Scenario[] = [
        { name: `floor slots (cal.)`, child: floorChild, url: `${floorUrl}/slots` },
        { name: `spec +${extraUs} µs`, child: floorChild, url: specUrl + SLOTS_PATH },
      ];
      const [first, second] = round % 2 === 0 ? sides : [...sides].reverse();
      const a = await run(first!, round);
      const b = await run(second!, round);
      const [fl, sp] = first === sides[0] ? [a, b] : [b, a];
      own.push(sp.cpuUs);
      ratios.push(fl.cpuUs / sp.cpuUs);
    }
    const cost = median(own);
    if (extraUs === 0) base = cost;
    lines.push(`${`+${extraUs}`.padEnd(14)} ${cost.toFixed(1).padStart(10)} ${`+${(cost - base).toFixed(1)}`.padStart(7)} ${median(ratios).toFixed(2).padStart(8)}`);
  }
  floorChild.send({ specExtraUs: 0 });
  return lines;
}

/** The run's server processes: each `museum serve` with a log file of its own, each floor; stopped on demand or all at the end. */
class ServerProcesses {
  /** Every museum process's log (its stderr: the access log). */
  readonly logPaths: string[] = [];
  private readonly live = new Set<ChildProcess>();
  private floors = 0;

  constructor(private readonly dir: string) {}

  /** `museum serve` with `env`; `name` names its log file. */
  async museum(name: string, env: Record<string, string>): Promise<ServerProcess> {
    const logPath = join(this.dir, `museum-${this.logPaths.length}-${name}.log`);
    this.logPaths.push(logPath);
    const started = await startMuseum(env, logPath);
    this.live.add(started.child);
    return started;
  }

  async floor(bytes: FloorBytes): Promise<{ child: ChildProcess; ready: FloorReady }> {
    const floor = await forkFloor(bytes, join(this.dir, `spec-floor-${this.floors++}.log`));
    this.live.add(floor.child);
    return floor;
  }

  async stop(child: ChildProcess): Promise<void> {
    await stopProcess(child);
    this.live.delete(child);
  }

  stopAll(): Promise<unknown> {
    return Promise.all([...this.live].map((child) => this.stop(child)));
  }
}

/** Per measured side: its ratios to the floor (rps, CPU) and, for the museum, the spec floor's CPU ÷ its own. */
type Ratios = Map<string, { rps: number[]; cpu: number[]; spec: number[] }>;

/** The result table: a row per scenario (a floor shared by pairs once), and how many targets were missed. */
function summaryTable(pairs: Pair[], runs: Map<string, Figures[]>, ratios: Ratios): { lines: string[]; missed: number } {
  const lines = [
    '',
    `${'scenario'.padEnd(18)} ${'CPU µs/req'.padStart(10)} ${'floor÷us'.padStart(8)}  ${'target'.padEnd(15)} ${'spec÷us'.padStart(7)} ${'req/s'.padStart(9)} ${'× floor'.padStart(7)} ${'p99 ms'.padStart(7)}  floor÷us per round`,
  ];
  let missed = 0;
  const printed = new Set<string>();
  for (const { target, floor: fs, spec: ss, museum: ms } of pairs) {
    for (const scenario of [fs, ...(ss ? [ss] : []), ms]) {
      if (printed.has(scenario.name)) continue; // a floor shared by two pairs
      printed.add(scenario.name);
      const figures = runs.get(scenario.name)!;
      const own = scenario === fs ? null : ratios.get(scenario.name)!;
      let verdict = '';
      if (scenario === ms) {
        const ok = median(own!.cpu) >= target;
        verdict = `≥ ${target} ${ok ? 'ok' : 'MISSED'}`;
        if (!ok) missed++;
      } else if (scenario === ss) verdict = '(the ceiling)';
      lines.push(
        [
          scenario.name.padEnd(18),
          median(figures.map((x) => x.cpuUs)).toFixed(1).padStart(10),
          (own ? median(own.cpu).toFixed(2) : '').padStart(8),
          ' ' + verdict.padEnd(15),
          (own?.spec.length ? median(own.spec).toFixed(2) : '').padStart(7),
          Math.round(median(figures.map((x) => x.rps))).toString().padStart(9),
          (own ? median(own.rps).toFixed(2) : '').padStart(7),
          median(figures.map((x) => x.p99)).toFixed(1).padStart(7),
          // The spread: on a shared VM one round can move by ±10 %, so a median near its target says little alone.
          own ? ` ${own.cpu.map((r) => r.toFixed(2)).join(' ')}` : '',
        ].join(' '),
      );
    }
  }
  return { lines, missed };
}

async function main(): Promise<void> {
  const dir = join(ROOT, '.bench', `serve-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const processes = new ServerProcesses(dir);
  let stopRedis: () => Promise<void> | undefined = () => undefined;
  let postgres: TestPostgres | null = null;
  try {
    // As shipped means from the bundle; a stale one would run the sources through tsx (slower).
    if (!freshBundle()) throw new Error('dist/ is missing or older than the sources: run `make build` (make bench-serve does) so museum serve runs as shipped');
    process.stderr.write('bench-serve: publishing the fixture bake and creating keys…\n');
    await publishFixtureBake(join(dir, 'data'), { extraArtworks: 500 });
    const glbRef = await putContentFile(join(dir, 'data'), await benchGlb(), 'glb');
    const glbPath = new URL(fileUrl('http://x', glbRef)).pathname;
    // Enough keys that no key nears 120 requests a minute across every keyed run (autocannon walks
    // the keys in lockstep over its connections: a key gets up to CONNECTIONS hits per pass), and
    // few enough per round (6,000) that they stay within the server's 10,000 remembered verified
    // keys, as a running instance's regular clients do (more would time key lookups in SQLite).
    const keyCount = Number(process.env.BENCH_KEYS ?? 6_000 * ROUNDS);
    const db = openStateDb(join(dir, 'state.db'));
    const keys = await new SqliteKeyStore(db).createMany(Array.from({ length: keyCount + 1 }, (_, i) => `bench-${i}`));
    const probeKey = keys.pop()!;
    db.close();

    const redis = spawnSync('redis-server', ['--version']).status === 0 ? await startRedis() : null;
    stopRedis = () => redis?.close();
    if (!redis) process.stderr.write('bench-serve: no redis-server here (scripts/system-deps.sh installs it): skipping the Redis limiter run\n');
    postgres = await startPostgres().catch((err: Error) => {
      process.stderr.write(`bench-serve: no PostgreSQL here (${err.message}): skipping the PostgreSQL keys run\n`);
      return null;
    });
    const pgKeys = postgres ? await keysInPostgres(postgres.url, keyCount) : [];
    const env = { DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'state.db') };
    /** Each configuration's environment, null where its store (Redis, PostgreSQL) is missing here. */
    const envs: Record<MuseumConfig, Record<string, string> | null> = {
      default: env,
      redis: redis ? { ...env, REDIS_URL: redis.url } : null,
      pg: postgres ? { ...env, DATABASE_URL: postgres.url } : null,
    };
    // The floors serve the museum's own bytes, fetched once from a museum started for it.
    const first = await processes.museum('default', env);
    const bytes = await floorBytes(first.url, probeKey, glbPath);
    let museumRequests = 4; // the four answers of floorBytes
    await processes.stop(first.child);
    const slotsEtag = headerOf(bytes.slots, 'etag')!;

    const perRound = Math.floor(keys.length / ROUNDS);
    const roundKeys = (round: number, from = keys) => from.slice(round * perRound, (round + 1) * perRound);
    const keyed = (round: number, from = keys) => roundKeys(round, from).map((key) => ({ headers: { 'X-API-Key': key } }));
    const revalidate = { 'If-None-Match': slotsEtag };
    const only = new RegExp(process.env.BENCH_ONLY ?? '');
    const everyPair = (round: number): Pair[] => [
      {
        target: 0.85,
        config: 'default',
        floor: { name: 'floor slots', path: '/slots' },
        spec: { name: 'spec floor slots', path: SLOTS_PATH },
        museum: { name: 'slots', path: SLOTS_PATH },
      },
      {
        target: 0.8,
        config: 'default',
        floor: { name: 'floor 304', path: '/slots', headers: revalidate },
        spec: { name: 'spec floor 304', path: SLOTS_PATH, headers: revalidate },
        museum: { name: 'slots 304', path: SLOTS_PATH, headers: revalidate },
      },
      {
        target: 0.9,
        config: 'default',
        floor: { name: `floor GLB`, path: '/glb', largeBody: true },
        museum: { name: `files GLB ${Math.round(glbRef.bytes / 1024)} KB`, path: glbPath, largeBody: true },
      },
      {
        target: 0.6,
        config: 'default',
        // The same request stream (keys included, ignored by the floor): autocannon is slower cycling
        // through thousands of distinct requests, and both sides must pay that alike.
        floor: { name: 'floor artworks', path: '/artworks', requests: keyed(round) },
        museum: { name: 'artworks (keyed)', path: ARTWORKS_PATH, requests: keyed(round) },
      },
      {
        target: 0.45,
        config: 'redis',
        floor: { name: 'floor artworks', path: '/artworks', requests: keyed(round) },
        museum: { name: 'artworks (Redis)', path: ARTWORKS_PATH, requests: keyed(round) },
      },
      {
        target: 0.5,
        config: 'pg',
        floor: { name: 'floor artworks', path: '/artworks', requests: keyed(round, pgKeys) },
        museum: { name: 'artworks (PG keys)', path: ARTWORKS_PATH, requests: keyed(round, pgKeys), verifyFirst: roundKeys(round, pgKeys) },
      },
    ];
    const pairs = (round: number): Pair[] => everyPair(round).filter((pair) => envs[pair.config] !== null && only.test(pair.museum.name));

    process.stderr.write(`bench-serve: ${CONNECTIONS} connections, ${DURATION_S} s per run, ${ROUNDS} rounds, ${keys.length} keys, fresh server processes every round\n`);
    const runs = new Map<string, Figures[]>();
    const ratios: Ratios = new Map();
    const run = async (scenario: Scenario, round: number, museumSide: boolean): Promise<Figures> => {
      if (scenario.verifyFirst) museumRequests += await useKeysOnce(scenario.url, scenario.verifyFirst);
      const warm = await measure(scenario, 1); // warm-up (JIT, caches, connections)
      const figures = await measure(scenario, DURATION_S);
      // autocannon stops with a request in flight on each connection, answered (and logged) but not counted.
      const inFlightAtStop = scenario.largeBody ? 0 : 2 * CONNECTIONS * PIPELINING;
      if (museumSide) museumRequests += warm.requests + figures.requests + inFlightAtStop;
      runs.set(scenario.name, [...(runs.get(scenario.name) ?? []), figures]);
      process.stderr.write(`  round ${round + 1} ${scenario.name.padEnd(18)} ${Math.round(figures.rps)} req/s, ${figures.cpuUs.toFixed(1)} µs CPU/req\n`);
      return figures;
    };
    let pinned = true;
    // Pair by pair, its rounds in a row, each round on a fresh museum process and a fresh floor
    // process. Fresh: a process keeps a cost offset of its own all its life — two identical
    // `museum serve` processes measured 4–5 % apart over 12–20 alternating rounds (bench/RESULTS.md)
    // — so one pair of long-lived processes made a whole run's ratios one draw of those offsets;
    // rounds on fresh processes average them out. In a row: no server idles
    // before its runs (an idle server shrinks its young generation).
    for (const index of pairs(0).keys()) {
      for (let round = 0; round < ROUNDS; round++) {
        const pair = pairs(round)[index]!;
        const [museum, floor] = await Promise.all([processes.museum(pair.config, envs[pair.config]!), processes.floor(bytes)]);
        pinned = pinCpus([museum.child.pid!, floor.child.pid!]) && pinned;
        const scenario = (side: Side, child: ChildProcess, base: string): Scenario => ({ ...side, child, url: base + side.path });
        const fs = scenario(pair.floor, floor.child, floor.ready.floor);
        const ss = pair.spec ? scenario(pair.spec, floor.child, floor.ready.spec) : null;
        const ms = scenario(pair.museum, museum.child, museum.url);
        // Back to back, alternating which goes first, so a change in the machine's load hits all alike.
        const sides = [fs, ...(ss ? [ss] : []), ms];
        const order = round % 2 === 0 ? sides : [...sides].reverse();
        const figures = new Map<Scenario, Figures>();
        for (const side of order) figures.set(side, await run(side, round, side === ms));
        await Promise.all([processes.stop(museum.child), processes.stop(floor.child)]);
        const fl = figures.get(fs)!;
        for (const side of [ss, ms]) {
          if (!side) continue;
          const own = figures.get(side)!;
          const entry = ratios.get(side.name) ?? { rps: [], cpu: [], spec: [] };
          entry.rps.push(own.rps / fl.rps);
          entry.cpu.push(fl.cpuUs / own.cpuUs);
          if (side === ms && ss) entry.spec.push(figures.get(ss)!.cpuUs / own.cpuUs);
          ratios.set(side.name, entry);
        }
      }
    }
    process.stderr.write(pinned ? 'bench-serve: servers were pinned to CPU 0, the load generator to CPU 1\n' : 'bench-serve: NOT pinned (taskset missing or one core)\n');

    let calibration: string[] = [];
    if (process.env.BENCH_CALIBRATE) {
      const floor = await processes.floor(bytes);
      pinCpus([floor.child.pid!]);
      calibration = await calibrate(floor.child, floor.ready.floor, floor.ready.spec, (scenario, round) => run(scenario, round, false));
      await processes.stop(floor.child);
    }

    const { lines, missed } = summaryTable(pairs(0), runs, ratios);
    // Give the buffered access log a moment, then count its lines against the requests answered.
    await new Promise((done) => setTimeout(done, 500));
    let accessLines = 0;
    for (const path of processes.logPaths) if (existsSync(path)) accessLines += await countAccessLines(path);
    lines.push(...calibration);
    lines.push(
      '',
      `Medians of ${ROUNDS} rounds. CPU µs/req: server process CPU time per request answered; floor÷us: the floor's`,
      'CPU per request ÷ the museum\'s (1.00 = as cheap as bare node:http), the median of per-round ratios — the',
      'targets apply to it. req/s and × floor beside it (throughput on a shared machine is the noisier figure).',
      'spec floor: bare node:http that keeps the spec on the slots route — the museum\'s very headers, a fresh request',
      'id, one access line per request (batched writes) — and nothing else: its floor÷us is the most any server that',
      'keeps the spec can reach; spec÷us is its CPU per request ÷ the museum\'s (1.00 = no overhead of our own).',
      `Default configuration: access log on (${accessLines} lines written for ${museumRequests} requests answered${accessLines === museumRequests ? ', one each' : ': NOT one each'}), request ids, CORS.`,
      `Keyed runs rotate over ${keys.length} real keys (${perRound} per round) with the real 120/60 s limiter; the floor`,
      'receives the very same request stream (it ignores the keys). artworks (Redis): a second server whose',
      'limiter is Redis (REDIS_URL, a local redis-server, not pinned): one round trip to Redis per request.',
      'artworks (PG keys): a third server whose keys are in PostgreSQL (DATABASE_URL, a local server, not pinned),',
      'the round\'s keys used once before the run: keyed requests are then answered from memory.',
      '',
    );
    process.stdout.write(lines.join('\n'));
    if (missed) process.exitCode = 1;
  } finally {
    await processes.stopAll();
    await stopRedis();
    await postgres?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--floor') floorProcess();
else await main();
