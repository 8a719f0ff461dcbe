/**
 * `make bench-serve`: the museum server as shipped — `museum serve` itself (bin/museum, from the dist/
 * bundle `make bench-serve` builds first), default configuration: access log on, request ids, CORS —
 * beside what a user would pick instead, each doing the same work (bench/serve-rivals.ts):
 *
 *   slots, slots 304   GET /v1/rooms/{id}/slots and its revalidation, against a minimal Koa 3 +
 *                      @koa/router app doing the same work (the museum is a Koa app), fastify 5,
 *                      Express 5 and bare node:http doing the spec's work (the spec floor);
 *                      target: the museum ≥ 0.9× the minimal Koa app (the others reported)
 *   files GLB          GET /files/<sha256>.glb (~240 KB), against a bare node:http floor (no target)
 *   slots, 12 KB A-E   slots with the third attack round's 12 KB `*,*,…` Accept-Encoding, against the
 *                      museum itself sent the same bytes in X-Pad; target ≥ 0.8× (issue 43's bound)
 *   artworks (keyed)   GET /v1/artworks?page=2 with a key (key lookup + limiter), against the floor
 *
 * The figure is server CPU time per request (utime + stime of the server process, every thread, from
 * /proc around each run, ÷ requests answered) and its ratio rival ÷ museum (above 1: the museum is
 * cheaper). Servers run pinned to CPU 0 (taskset), the load generator (autocannon, this process) on
 * CPU 1. Each round starts fresh processes (a process keeps a cost offset of its own all its life)
 * and measures every side back to back, rotating which goes first; ratios are medians of per-round
 * ratios. Every process gets the museum's node flags (SERVER_NODE_FLAGS). Before measuring, the
 * bench checks that every rival sends the museum's bytes (headers and body, less Date and the id).
 *
 * Settings: BENCH_ROUNDS (3), BENCH_DURATION s per run (4), BENCH_CONNECTIONS (32),
 * BENCH_PIPELINING (1), BENCH_ONLY (a regex of row names). The default run takes about 4 minutes.
 * BENCH_PROFILE=1 measures no ratios: it runs the museum and the minimal Koa app under V8's profiler
 * through slots and slots 304 and prints what each middleware costs per request (bench/serve-profile.ts).
 */
import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import { createReadStream, existsSync, mkdirSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { get as httpGet } from 'node:http';
import { createConnection } from 'node:net';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Document } from '@gltf-transform/core';
import autocannon from 'autocannon';
import { fileUrl } from '../artifacts/format.ts';
import { putContentFile } from '../artifacts/store.ts';
import { getIO } from '../bake/gltf-io.ts';
import { SERVER_NODE_FLAGS } from '../server/cli.ts';
import { openStateDb } from '../server/state/db.ts';
import { SqliteKeyStore } from '../server/state/keys.ts';
import { publishFixtureBake } from '../test/helpers/artifacts.ts';
import { freshBundle } from '../bin/fresh-bundle.js';
import { startMuseumServe } from './museum-serve.ts';
import { hottestFunctions, ProfileReader, profileTable, type Window } from './serve-profile.ts';
import { headerOf, type Rival, type RivalBytes, serveRival, type WireResponse } from './serve-rivals.ts';
import { median } from './stats.ts';

const SELF = fileURLToPath(import.meta.url);
const ROOT = resolve(SELF, '../..');
const DURATION_S = Number(process.env.BENCH_DURATION ?? 4);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PIPELINING = Number(process.env.BENCH_PIPELINING ?? 1);
const ARTWORKS_PATH = '/v1/artworks?page=2';
const SLOTS_PATH = '/v1/rooms/1/slots';
/** The third attack round's Accept-Encoding: 12 KB of `*,` (2–3 ms of CPU per request before its bound). */
const HOSTILE_ACCEPT_ENCODING = '*,'.repeat(6_000).slice(0, -1);

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

/** `museum serve` as an operator starts it, its stderr (the access log) written to `logPath`. */
async function startMuseum(env: Record<string, string>, logPath: string, profileFlags: string[] = []): Promise<ServerProcess> {
  const { child, url } = await startMuseumServe({ root: ROOT, env, logPath, nodeFlags: profileFlags });
  return { child, url };
}

/**
 * The museum's response to `url`, less what node adds to every response itself (Date, Connection,
 * Keep-Alive) and the request id: what the floors send back.
 */
function wireResponse(url: string, headers: Record<string, string> = {}): Promise<WireResponse> {
  const own = new Set(['date', 'connection', 'keep-alive', 'x-request-id']);
  return new Promise((done, fail) =>
    httpGet(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const list: string[] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2)
          if (!own.has(res.rawHeaders[i]!.toLowerCase())) list.push(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
        done({ status: res.statusCode!, headers: list, body: Buffer.concat(chunks) });
      });
    }).on('error', fail),
  );
}

async function museumBytes(museumUrl: string, probeKey: string, glbPath: string): Promise<RivalBytes> {
  const ok = async (path: string, headers: Record<string, string> = {}) => {
    const response = await wireResponse(museumUrl + path, headers);
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}`);
    return response;
  };
  const slots = await ok(SLOTS_PATH);
  const slotsNotModified = await wireResponse(museumUrl + SLOTS_PATH, { 'If-None-Match': headerOf(slots, 'etag')! });
  return { slots, slotsNotModified, glb: await ok(glbPath), artworks: await ok(ARTWORKS_PATH, { 'X-API-Key': probeKey }) };
}

/** Headers as a comparable set: lower-case names, sorted. */
const headerSet = (response: WireResponse) => {
  const pairs: string[] = [];
  for (let i = 0; i < response.headers.length; i += 2) pairs.push(`${response.headers[i]!.toLowerCase()}: ${response.headers[i + 1]}`);
  return pairs.sort().join('\n');
};

/** A rival must send the museum's bytes for slots and its 304, and echo a sane request id. */
async function checkSameBytes(rival: string, url: string, bytes: RivalBytes): Promise<void> {
  const etag = headerOf(bytes.slots, 'etag')!;
  for (const [expected, headers] of [
    [bytes.slots, {}],
    [bytes.slotsNotModified, { 'If-None-Match': etag }],
  ] as const) {
    const got = await wireResponse(url + SLOTS_PATH, headers);
    if (got.status !== expected.status || headerSet(got) !== headerSet(expected) || !got.body.equals(expected.body)) {
      throw new Error(
        `${rival} does not send the museum's bytes for ${SLOTS_PATH} (${expected.status}):\n${headerSet(got)}\n` +
          `--- the museum's:\n${headerSet(expected)}`,
      );
    }
  }
  const echoed = await new Promise<string | undefined>((done, fail) =>
    httpGet(url + SLOTS_PATH, { headers: { 'X-Request-Id': 'bench-echo' } }, (res) => {
      res.resume();
      done(res.headers['x-request-id'] as string | undefined);
    }).on('error', fail),
  );
  if (echoed !== 'bench-echo') throw new Error(`${rival} does not echo the caller's request id`);
}

interface Scenario {
  name: string;
  child: ChildProcess;
  url: string;
  headers?: Record<string, string>;
  /** Large responses: driven by fetchMany rather than autocannon. */
  largeBody?: boolean;
  /** Per-request headers cycled by each connection (the keyed row's keys). */
  requests?: Array<{ headers: Record<string, string> }>;
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
 * every body chunk on its one thread and tops out near 340 responses of 235 KB a second here, so the
 * servers' CPU per response measured under it swung 80–220 µs for the same work, with the client's
 * pace; this client keeps the servers busy instead.
 */
async function fetchMany(
  target: URL,
  connections: number,
  durationS: number,
): Promise<{ answered: number; statuses: Map<number, number>; errors: number }> {
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
    requests: scenario.requests?.map((r) => ({
      method: 'GET',
      path: url.pathname + url.search,
      headers: { ...scenario.headers, ...r.headers },
    })),
  });
  instance.on('response', (_client: unknown, status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1));
  const result = await instance;
  const cpuUs = (await serverCpu(scenario.child)) - cpuBefore;
  // A 304 is the expected response of the revalidation scenario, not a failure.
  const notModified = (result as unknown as Record<string, number>)['3xx'] ?? 0;
  const unexpected = scenario.name.includes('304') ? result.non2xx - notModified : result.non2xx;
  if (unexpected || result.errors || result.timeouts) {
    const byStatus = [...statuses].map(([status, count]) => `${count} × ${status}`).join(', ');
    throw new Error(
      `${scenario.name}: ${unexpected} unexpected statuses (${byStatus}), ${result.errors} errors, ${result.timeouts} timeouts`,
    );
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

/** A rival server in a process of its own (the museum's node flags), logging to `logPath`. */
function forkRival(
  rival: Rival,
  bytes: RivalBytes,
  logPath: string,
  extraFlags: string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  // `advanced`: the bytes go over as Buffers (structured clone), not as JSON arrays of numbers.
  const child = fork(SELF, ['--rival', rival], {
    execArgv: [...SERVER_NODE_FLAGS, ...extraFlags, '--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'advanced',
  });
  child.send({ bytes, logPath });
  return new Promise((done, fail) => {
    child.once('message', (m) => done({ child, url: (m as { url: string }).url }));
    child.once('exit', (code) => fail(new Error(`${rival} process exited (${code})`)));
  });
}

/** The rival process's side of forkRival. */
function rivalProcess(rival: Rival): void {
  process.once('message', (message: { bytes: RivalBytes; logPath: string }) => {
    // Structured clone hands Buffers over as plain Uint8Arrays.
    const asBuffer = (body: Uint8Array) => Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const entries = Object.entries(message.bytes).map(([name, response]) => [name, { ...response, body: asBuffer(response.body) }]);
    void serveRival(rival, Object.fromEntries(entries) as unknown as RivalBytes, message.logPath).then(({ url, close }) => {
      process.on('disconnect', () => void close().then(() => process.exit(0)));
      process.send!({ url });
    });
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

/** Access lines in the log, read as a stream: a quiet machine writes more than a string can hold. */
async function countAccessLines(path: string): Promise<number> {
  let count = 0;
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity }))
    if (line.includes('"msg":"request"')) count++;
  return count;
}

/** The run's server processes: each `museum serve` with a log file of its own, each rival; stopped on demand or all at the end. */
class ServerProcesses {
  /** Every museum process's log (its stderr: the access log). */
  readonly logPaths: string[] = [];
  private readonly live = new Set<ChildProcess>();
  private rivals = 0;

  constructor(private readonly dir: string) {}

  async museum(env: Record<string, string>, profileFlags: string[] = []): Promise<ServerProcess> {
    const logPath = join(this.dir, `museum-${this.logPaths.length}.log`);
    this.logPaths.push(logPath);
    const started = await startMuseum(env, logPath, profileFlags);
    this.live.add(started.child);
    return started;
  }

  async rival(rival: Rival, bytes: RivalBytes, extraFlags: string[] = []): Promise<{ child: ChildProcess; url: string }> {
    const started = await forkRival(rival, bytes, join(this.dir, `${rival}-${this.rivals++}.log`), extraFlags);
    this.live.add(started.child);
    return started;
  }

  async stop(child: ChildProcess): Promise<void> {
    await stopProcess(child);
    this.live.delete(child);
  }

  stopAll(): Promise<unknown> {
    return Promise.all([...this.live].map((child) => this.stop(child)));
  }
}

/** A row: the museum's request and the rivals that make the same one (their path on their server), with their targets. */
interface Row {
  name: string;
  path: string;
  headers?: Record<string, string>;
  largeBody?: boolean;
  requests?: (round: number) => Array<{ headers: Record<string, string> }>;
  rivals: Array<{ rival: Rival; path: string; target: number | null }>;
  /** The museum itself, same process and path, with other request headers (the hostile header's control). */
  controls?: Array<{ name: string; headers: Record<string, string>; target: number | null }>;
}

/** Per row and rival: the per-round CPU ratios rival ÷ museum; per side, its figures. */
interface Results {
  ratios: Map<string, number[]>;
  figures: Map<string, Figures[]>;
}

const RIVAL_NAMES: Record<Rival, string> = {
  spec: 'spec floor',
  fastify: 'fastify 5',
  koa: 'Koa + @koa/router',
  express: 'Express 5',
  floor: 'bare floor',
};

/** The result table: per row the museum's CPU, then each rival's and its ratio; how many targets were missed. */
function summaryTable(rows: Row[], results: Results): { lines: string[]; missed: number } {
  const lines = [
    '',
    `${'row'.padEnd(18)} ${'server'.padEnd(18)} ${'CPU µs/req'.padStart(10)} ${'÷ museum'.padStart(8)}  ` +
      `${'target'.padEnd(12)} ${'req/s'.padStart(8)}  per round`,
  ];
  let missed = 0;
  for (const row of rows) {
    const museum = results.figures.get(`${row.name}/museum`) ?? [];
    if (museum.length === 0) continue;
    const figureLine = (server: string, figures: Figures[], ratio: string, verdict: string, rounds: string) =>
      [
        row.name.padEnd(18),
        server.padEnd(18),
        median(figures.map((x) => x.cpuUs))
          .toFixed(1)
          .padStart(10),
        ratio.padStart(8),
        ` ${verdict.padEnd(12)}`,
        Math.round(median(figures.map((x) => x.rps)))
          .toString()
          .padStart(8),
        ` ${rounds}`,
      ].join(' ');
    lines.push(figureLine('museum', museum, '', '', museum.map((x) => x.cpuUs.toFixed(1)).join(' ')));
    const others = [
      ...row.rivals.map(({ rival, target }) => ({ key: rival as string, label: RIVAL_NAMES[rival], target })),
      ...(row.controls ?? []).map(({ name, target }) => ({ key: name, label: `museum, ${name}`, target })),
    ];
    for (const { key, label, target } of others) {
      const ratios = results.ratios.get(`${row.name}/${key}`)!;
      const ratio = median(ratios);
      let verdict = '';
      if (target !== null) {
        verdict = `≥ ${target.toFixed(2)} ${ratio >= target ? 'ok' : 'MISSED'}`;
        if (ratio < target) missed++;
      }
      lines.push(
        figureLine(label, results.figures.get(`${row.name}/${key}`)!, ratio.toFixed(2), verdict, ratios.map((r) => r.toFixed(2)).join(' ')),
      );
    }
  }
  return { lines, missed };
}

/**
 * BENCH_PROFILE=1: the museum and the minimal Koa app under `--cpu-prof` through the slots and slots
 * 304 runs (fresh processes each round, alternating which goes first), their samples charged per
 * middleware (bench/serve-profile.ts).
 */
async function profileRows(
  processes: ServerProcesses,
  dir: string,
  env: Record<string, string>,
  bytes: RivalBytes,
  revalidate: Record<string, string>,
): Promise<string[]> {
  const reader = new ProfileReader(ROOT);
  const rows = [
    { name: 'slots', headers: undefined },
    { name: 'slots 304', headers: revalidate },
  ];
  const lines: string[] = [];
  let profiles = 0;
  for (const row of rows) {
    const side = () => ({ samples: new Map<string, number>(), self: new Map<string, number>(), cpu: [] as number[] });
    const sides = { museum: side(), koa: side() };
    for (let round = 0; round < ROUNDS; round++) {
      const museumDir = join(dir, `prof-${profiles++}`);
      const koaDir = join(dir, `prof-${profiles++}`);
      const flags = (at: string) => ['--cpu-prof', `--cpu-prof-dir=${at}`, '--cpu-prof-interval=250'];
      const [museum, koa] = await Promise.all([processes.museum(env, flags(museumDir)), processes.rival('koa', bytes, flags(koaDir))]);
      pinCpus([museum.child.pid!, koa.child.pid!]);
      const runs = [
        { side: sides.museum, child: museum.child, url: museum.url, name: `${row.name} museum (profiled)`, profile: museumDir },
        { side: sides.koa, child: koa.child, url: koa.url, name: `${row.name} Koa + @koa/router (profiled)`, profile: koaDir },
      ];
      if (round % 2 === 1) runs.reverse();
      const windows = new Map<string, Window[]>();
      for (const run of runs) {
        const scenario: Scenario = { name: run.name, child: run.child, url: run.url + SLOTS_PATH, headers: row.headers };
        await measure(scenario, 1);
        const fromUs = Number(process.hrtime.bigint() / 1000n);
        const figures = await measure(scenario, DURATION_S);
        windows.set(run.profile, [{ fromUs, toUs: Number(process.hrtime.bigint() / 1000n) }]);
        run.side.cpu.push(figures.cpuUs);
        process.stderr.write(
          `  round ${round + 1} ${run.name.padEnd(44)} ${Math.round(figures.rps)} req/s, ${figures.cpuUs.toFixed(1)} µs CPU/req\n`,
        );
      }
      await Promise.all([museum, koa].map((p) => processes.stop(p.child)));
      for (const run of runs) reader.read(run.profile, windows.get(run.profile)!, run.side.samples, run.side.self);
    }
    lines.push(
      ...profileTable(`${row.name}: CPU per request by middleware (median CPU/request of ${ROUNDS} profiled rounds × sample share)`, [
        { name: 'museum', samples: sides.museum.samples, cpuUs: median(sides.museum.cpu) },
        { name: 'Koa app', samples: sides.koa.samples, cpuUs: median(sides.koa.cpu) },
      ]),
      ...hottestFunctions(`${row.name}: the museum's hottest functions (self time)`, sides.museum.self, median(sides.museum.cpu)),
      ...hottestFunctions(`${row.name}: the Koa app's hottest functions (self time)`, sides.koa.self, median(sides.koa.cpu)),
    );
  }
  return lines;
}

/** What every row measures against: the fixture bake's environment, the museum's bytes, the keys. */
interface Setup {
  env: Record<string, string>;
  bytes: RivalBytes;
  revalidate: Record<string, string>;
  glbPath: string;
  glbBytes: number;
  keys: string[];
  perRound: number;
  /** Requests the museum answered so far (checked against its access lines at the end). */
  museumRequests: number;
}

async function prepare(dir: string, processes: ServerProcesses): Promise<Setup> {
  // As shipped means from the bundle; a stale one would run the sources through tsx (slower).
  if (!freshBundle())
    throw new Error('dist/ is missing or older than the sources: run `make build` (make bench-serve does) so museum serve runs as shipped');
  process.stderr.write('bench-serve: publishing the fixture bake and creating keys…\n');
  await publishFixtureBake(join(dir, 'data'), { extraArtworks: 500 });
  const glbRef = await putContentFile(join(dir, 'data'), await benchGlb(), 'glb');
  const glbPath = new URL(fileUrl('http://x', glbRef)).pathname;
  // Enough keys that none nears 120 requests a minute (autocannon walks them in lockstep over its
  // connections), few enough per round that a running instance remembers them all (10,000).
  const db = openStateDb(join(dir, 'state.db'));
  const keys = await new SqliteKeyStore(db).createMany(Array.from({ length: 6_000 * ROUNDS + 1 }, (_, i) => `bench-${i}`));
  const probeKey = keys.pop()!;
  db.close();
  const env = { DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'state.db') };
  // The rivals serve the museum's own bytes, fetched once from a museum started for it.
  const first = await processes.museum(env);
  const bytes = await museumBytes(first.url, probeKey, glbPath);
  await processes.stop(first.child);
  // Same work, same bytes: checked once per rival before anything is measured.
  for (const rival of ['spec', 'fastify', 'koa', 'express'] as const) {
    const started = await processes.rival(rival, bytes);
    await checkSameBytes(rival, started.url, bytes);
    await processes.stop(started.child);
  }
  const revalidate = { 'If-None-Match': headerOf(bytes.slots, 'etag')! };
  const perRound = Math.floor(keys.length / ROUNDS);
  return { env, bytes, revalidate, glbPath, glbBytes: glbRef.bytes, keys, perRound, museumRequests: 4 };
}

/** The rows `BENCH_ONLY` selects (a pattern on their names; all by default). */
function benchRows(setup: Setup): Row[] {
  const { perRound, keys } = setup;
  const keyed = (round: number) => keys.slice(round * perRound, (round + 1) * perRound).map((key) => ({ headers: { 'X-API-Key': key } }));
  const frameworks = (['koa', 'fastify', 'express', 'spec'] as const).map((rival) => ({
    rival,
    path: SLOTS_PATH,
    target: rival === 'koa' ? 0.9 : null,
  }));
  const rows: Row[] = [
    { name: 'slots', path: SLOTS_PATH, rivals: frameworks },
    { name: 'slots 304', path: SLOTS_PATH, headers: setup.revalidate, rivals: frameworks },
    {
      name: `files GLB ${Math.round(setup.glbBytes / 1024)} KB`,
      path: setup.glbPath,
      largeBody: true,
      rivals: [{ rival: 'floor', path: '/glb', target: null }],
    },
    // Issue 43: a 12 KB `*,*,…` Accept-Encoding against the same bytes in a header nobody reads.
    {
      name: 'slots, 12 KB A-E',
      path: SLOTS_PATH,
      headers: { 'Accept-Encoding': HOSTILE_ACCEPT_ENCODING },
      rivals: [],
      controls: [{ name: '12 KB X-Pad', headers: { 'X-Pad': HOSTILE_ACCEPT_ENCODING }, target: 0.8 }],
    },
    // The same request stream for both (keys included, ignored by the floor).
    { name: 'artworks (keyed)', path: ARTWORKS_PATH, requests: keyed, rivals: [{ rival: 'floor', path: '/artworks', target: null }] },
  ];
  const only = new RegExp(process.env.BENCH_ONLY ?? '');
  return rows.filter((row) => only.test(row.name));
}

/** One side's warm-up and run, its figures kept under `key`. */
async function runSide(
  scenario: Scenario,
  round: number,
  key: string,
  museumSide: boolean,
  setup: Setup,
  results: Results,
): Promise<Figures> {
  const warm = await measure(scenario, 1); // warm-up (JIT, caches, connections)
  const figures = await measure(scenario, DURATION_S);
  // autocannon stops with a request in flight on each connection, answered (and logged) but not counted.
  const inFlightAtStop = scenario.largeBody ? 0 : 2 * CONNECTIONS * PIPELINING;
  if (museumSide) setup.museumRequests += warm.requests + figures.requests + inFlightAtStop;
  results.figures.set(key, [...(results.figures.get(key) ?? []), figures]);
  process.stderr.write(
    `  round ${round + 1} ${scenario.name.padEnd(36)} ${Math.round(figures.rps)} req/s, ${figures.cpuUs.toFixed(1)} µs CPU/req\n`,
  );
  return figures;
}

/** One round of a row: fresh processes, every side back to back, the ratios to the museum. Whether all were pinned. */
async function runRound(row: Row, round: number, processes: ServerProcesses, setup: Setup, results: Results): Promise<boolean> {
  const [museum, ...rivals] = await Promise.all([
    processes.museum(setup.env),
    ...row.rivals.map((r) => processes.rival(r.rival, setup.bytes)),
  ]);
  const pinned = pinCpus([museum.child.pid!, ...rivals.map((r) => r.child.pid!)]);
  const side = (name: string, child: ChildProcess, url: string, headers = row.headers): Scenario => ({
    name,
    child,
    url,
    headers,
    largeBody: row.largeBody,
    requests: row.requests?.(round),
  });
  const sides = [
    { key: `${row.name}/museum`, scenario: side(`${row.name} museum`, museum.child, museum.url + row.path) },
    ...row.rivals.map((r, i) => ({
      key: `${row.name}/${r.rival}`,
      scenario: side(`${row.name} ${RIVAL_NAMES[r.rival]}`, rivals[i]!.child, rivals[i]!.url + r.path),
    })),
    ...(row.controls ?? []).map((c) => ({
      key: `${row.name}/${c.name}`,
      scenario: side(`${row.name} museum, ${c.name}`, museum.child, museum.url + row.path, c.headers),
    })),
  ];
  // Back to back, rotating which goes first, so a change in the machine's load hits all alike.
  const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
  const cpu = new Map<string, number>();
  for (const { key, scenario } of order) {
    cpu.set(key, (await runSide(scenario, round, key, scenario.child === museum.child, setup, results)).cpuUs);
  }
  await Promise.all([museum, ...rivals].map((p) => processes.stop(p.child)));
  for (const other of [...row.rivals.map((r) => r.rival), ...(row.controls ?? []).map((c) => c.name)]) {
    const key = `${row.name}/${other}`;
    results.ratios.set(key, [...(results.ratios.get(key) ?? []), cpu.get(key)! / cpu.get(`${row.name}/museum`)!]);
  }
  return pinned;
}

/** What the table's figures mean, and whether the museum wrote one access line per request. */
async function footer(processes: ServerProcesses, setup: Setup): Promise<string[]> {
  // Give the buffered access log a moment, then count its lines against the requests answered.
  await new Promise((done) => setTimeout(done, 500));
  let accessLines = 0;
  for (const path of processes.logPaths) if (existsSync(path)) accessLines += await countAccessLines(path);
  return [
    '',
    `Medians of ${ROUNDS} rounds of ${DURATION_S} s. CPU µs/req: the server process's CPU time per request answered;`,
    "÷ museum: that server's CPU per request ÷ the museum's (above 1.00: the museum is cheaper), the median of",
    "per-round ratios — the targets apply to it. Every slots server sends the museum's bytes (checked) and writes one",
    "pino access line per request through the museum's destination settings; the spec floor is bare node:http doing",
    'just that. The bare floor (GLB, keyed rows) sends the same bytes and nothing else.',
    `Museum: default configuration, access log on (${accessLines} lines written for ${setup.museumRequests} requests answered` +
      `${accessLines === setup.museumRequests ? ', one each' : ': NOT one each'}).`,
    `Keyed rows rotate over ${setup.keys.length} real keys (${setup.perRound} per round) with the real 120/60 s limiter.`,
    '',
  ];
}

async function main(): Promise<void> {
  const dir = join(ROOT, '.bench', `serve-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const processes = new ServerProcesses(dir);
  try {
    const setup = await prepare(dir, processes);
    const rows = benchRows(setup);
    if (process.env.BENCH_PROFILE === '1') {
      const table = await profileRows(processes, dir, setup.env, setup.bytes, setup.revalidate);
      process.stdout.write(`${table.join('\n')}\n`);
      return;
    }
    process.stderr.write(
      `bench-serve: ${CONNECTIONS} connections, ${DURATION_S} s per run, ${ROUNDS} rounds, fresh server processes every round\n`,
    );
    const results: Results = { ratios: new Map(), figures: new Map() };
    let pinned = true;
    for (const row of rows) {
      for (let round = 0; round < ROUNDS; round++) pinned = (await runRound(row, round, processes, setup, results)) && pinned;
    }
    process.stderr.write(
      pinned
        ? 'bench-serve: servers were pinned to CPU 0, the load generator to CPU 1\n'
        : 'bench-serve: NOT pinned (taskset missing or one core)\n',
    );
    const { lines, missed } = summaryTable(rows, results);
    lines.push(...(await footer(processes, setup)));
    process.stdout.write(lines.join('\n'));
    if (missed) process.exitCode = 1;
  } finally {
    await processes.stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--rival') rivalProcess(process.argv[3] as Rival);
else await main();
