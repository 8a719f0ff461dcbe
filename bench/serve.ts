/**
 * `make bench-serve`: the museum server as shipped — its default configuration (`museum serve`: the
 * access log on, request ids, CORS) — against a bare node:http server sending the same bytes with the
 * same Content-Type and ETag and nothing else (the floor), in one run. Settings: BENCH_DURATION s per
 * run, BENCH_ROUNDS, BENCH_CONNECTIONS, BENCH_PIPELINING, BENCH_KEYS, BENCH_ONLY (a regex of scenario names).
 *
 *   slots        GET /v1/rooms/{id}/slots                 (public)          target ≥ 0.85× the floor
 *   slots 304    the same with If-None-Match               (revalidation)    target ≥ 0.8×
 *   files GLB    GET /files/<sha256>.glb (≥ 100 KB)        (public)          target ≥ 0.9×
 *   artworks     GET /v1/artworks?page=2 with a key        (key + limiter)   target ≥ 0.6×
 *   artworks, Redis limiter  the same through a second server with REDIS_URL (a local
 *                redis-server, when installed)                              target ≥ 0.45×
 *   artworks, PostgreSQL keys  the same through a third server with DATABASE_URL (a local
 *                PostgreSQL started as the tests do; the round's keys verified once before, as a
 *                running instance knows its clients' keys)                target ≥ 0.5×
 *
 * The headline figure is server CPU time per request (process.cpuUsage of the server process around
 * each run, divided by the requests answered) and its ratio floor ÷ museum: the efficiency of the
 * server relative to the floor, which a busy shared machine disturbs least. req/s and its ratio are
 * printed beside it. The museum servers and the floor run in two child processes pinned to CPU 0
 * (taskset), the load generator (autocannon, this process) on CPU 1. Each round measures floor and
 * museum back to back, alternating which goes first; ratios are medians of the per-round ratios.
 *
 * The access log goes where `museum serve` writes it, stderr, here redirected to a file as an
 * operator would; the run checks it holds one line per request answered.
 *
 * Rate limit: the keyed scenarios rotate over thousands of real keys, each used well under 120 times
 * per minute, so every request runs the real key lookup and the real limiter with production limits.
 */
import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import { closeSync, createReadStream, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Document } from '@gltf-transform/core';
import autocannon from 'autocannon';
import { fileUrl } from '../artifacts/format.ts';
import { putContentFile } from '../artifacts/store.ts';
import { getIO } from '../bake/gltf-io.ts';
import { startServer } from '../server/app.ts';
import { loadConfig } from '../server/config.ts';
import { openStateDb } from '../server/state/db.ts';
import { SqliteKeyStore } from '../server/state/keys.ts';
import { publishFixtureBake } from '../test/helpers/artifacts.ts';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.ts';
import { startRedis } from '../test/helpers/redis.ts';
import { openStateStore } from '../server/state/store.ts';
import pino from 'pino';

const SELF = fileURLToPath(import.meta.url);
const ROOT = resolve(SELF, '../..');
const DURATION_S = Number(process.env.BENCH_DURATION ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ARTWORKS_PATH = '/v1/artworks?page=2';
const SLOTS_PATH = '/v1/rooms/1/slots';

interface MuseumReady {
  museum: string;
  /** The same server with its rate limits in Redis (null without redis-server). */
  museumRedis: string | null;
  /** The same server with its keys in PostgreSQL (null without PostgreSQL). */
  museumPg: string | null;
  probeKey: string;
}

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

/** Child 1: the museum server(s) exactly as `museum serve` configures them (defaults, logs on stderr). */
async function serveMuseum(dir: string, redisUrl: string | undefined, databaseUrl: string | undefined): Promise<void> {
  const env = { PORT: '0', HOST: '127.0.0.1', DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'state.db') };
  const museum = await startServer(loadConfig(env));
  const museumRedis = redisUrl ? await startServer(loadConfig({ ...env, REDIS_URL: redisUrl })) : null;
  const museumPg = databaseUrl ? await startServer(loadConfig({ ...env, DATABASE_URL: databaseUrl })) : null;
  const probeKey = (await museum.services.keys.create('bench-probe')).key;
  const ready: MuseumReady = { museum: museum.url, museumRedis: museumRedis?.url ?? null, museumPg: museumPg?.url ?? null, probeKey };
  // `{ verify: keys }`: the PostgreSQL server verifies a round's keys once (no HTTP, no access lines).
  process.on('message', (m: unknown) => {
    const verify = (m as { verify?: string[] } | null)?.verify;
    if (!verify || !museumPg) return;
    void Promise.all(verify.map((key) => museumPg.services.keys.verify(key))).then(
      (ids) => process.send!({ verified: ids.filter((id) => id !== null).length }),
      (err: Error) => process.send!({ verified: -1, error: err.message }),
    );
  });
  answerCpuQueries(() => Promise.all([museum.close(), museumRedis?.close(), museumPg?.close()]));
  process.send!(ready);
}

/** Child 2: the floor — bare node:http with the museum's bytes, Content-Type and ETag, nothing else. */
async function serveFloor(museumUrl: string, probeKey: string, glbPath: string): Promise<void> {
  const fetchBytes = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(museumUrl + path, { headers });
    if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
    return { body: Buffer.from(await res.arrayBuffer()), type: res.headers.get('content-type')!, etag: res.headers.get('etag') };
  };
  const slots = await fetchBytes(SLOTS_PATH);
  const glb = await fetchBytes(glbPath);
  const artworks = await fetchBytes(ARTWORKS_PATH, { 'X-API-Key': probeKey });
  const floor = createServer((req, res) => {
    const [answer, etag] = req.url === '/slots' ? [slots, slots.etag!] : req.url === '/glb' ? [glb, glb.etag!] : [artworks, null];
    if (etag && req.headers['if-none-match'] === etag) {
      res.writeHead(304, { ETag: etag });
      res.end();
      return;
    }
    res.writeHead(200, { 'Content-Type': answer.type, 'Content-Length': answer.body.length, ...(etag ? { ETag: etag } : {}) });
    res.end(answer.body);
  });
  floor.keepAliveTimeout = 65_000;
  await new Promise<void>((done) => floor.listen(0, '127.0.0.1', done));
  answerCpuQueries(() => new Promise<void>((done) => floor.close(() => done())));
  process.send!({ floor: `http://127.0.0.1:${(floor.address() as AddressInfo).port}`, slotsEtag: slots.etag });
}

/** The parent asks a child for its CPU time around each run; disconnecting ends it. */
function answerCpuQueries(close: () => Promise<unknown>): void {
  process.on('message', (m: unknown) => {
    if (m === 'cpu') process.send!(process.cpuUsage());
  });
  process.on('disconnect', () => void close().then(() => process.exit(0)));
}

interface Scenario {
  name: string;
  /** Keys the server verifies once before the run (the PostgreSQL scenario). */
  verifyFirst?: string[];
  child: ChildProcess;
  url: string;
  headers?: Record<string, string>;
  /** Per-request headers cycled by each connection (the keyed scenarios' keys). */
  requests?: Array<{ headers: Record<string, string> }>;
}

interface Figures {
  rps: number;
  p99: number;
  /** Server process CPU time per request, µs. */
  cpuUs: number;
  requests: number;
}

function serverCpu(child: ChildProcess): Promise<number> {
  return new Promise((done) => {
    child.once('message', (usage) => done((usage as NodeJS.CpuUsage).user + (usage as NodeJS.CpuUsage).system));
    child.send('cpu');
  });
}

async function measure(scenario: Scenario, durationS: number): Promise<Figures> {
  const cpuBefore = await serverCpu(scenario.child);
  const url = new URL(scenario.url);
  const result = await autocannon({
    url: scenario.url,
    connections: CONNECTIONS,
    pipelining: Number(process.env.BENCH_PIPELINING ?? 1),
    duration: durationS,
    headers: scenario.headers,
    requests: scenario.requests?.map((r) => ({ method: 'GET', path: url.pathname + url.search, headers: { ...scenario.headers, ...r.headers } })),
  });
  const cpuUs = (await serverCpu(scenario.child)) - cpuBefore;
  // A 304 is the expected answer of the revalidation scenario, not a failure.
  const notModified = (result as unknown as Record<string, number>)['3xx'] ?? 0;
  const unexpected = scenario.name.includes('304') ? result.non2xx - notModified : result.non2xx;
  if (unexpected || result.errors || result.timeouts) {
    throw new Error(`${scenario.name}: ${unexpected} unexpected statuses, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  const requests = result.requests.total;
  return { rps: result.requests.average, p99: result.latency.p99, cpuUs: cpuUs / Math.max(1, requests), requests };
}

/**
 * On a machine with at least two cores, run the servers on CPU 0 and the load generator on CPU 1
 * (taskset): they no longer steal time slices from each other. Floor and museum share the same core
 * and the same client, so the ratios stay like for like.
 */
function pinCpus(serverPids: number[]): boolean {
  if (availableParallelism() < 2) return false;
  const pin = (cpu: number, pid: number) => spawnSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' }).status === 0;
  return serverPids.every((pid) => pin(0, pid)) && pin(1, process.pid);
}

function forkChild<T>(args: string[], stderrFd: number | 'inherit'): Promise<{ child: ChildProcess; ready: T }> {
  const child = fork(SELF, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', stderrFd, 'ipc'] });
  return new Promise((done, fail) => {
    child.once('message', (m) => done({ child, ready: m as T }));
    child.once('exit', (code) => fail(new Error(`${args[0]} process exited (${code})`)));
  });
}

/** Have the museum child's PostgreSQL server verify `keys` once. */
function verifyOnce(child: ChildProcess, keys: string[]): Promise<void> {
  return new Promise((done, fail) => {
    child.once('message', (m) => ((m as { verified?: number }).verified === keys.length ? done() : fail(new Error(`verified ${JSON.stringify(m)} of ${keys.length} keys`))));
    child.send({ verify: keys });
  });
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

async function main(): Promise<void> {
  const dir = join(ROOT, '.bench', `serve-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const children: ChildProcess[] = [];
  let stopRedis: () => Promise<void> | undefined = () => undefined;
  let postgres: TestPostgres | null = null;
  const logPath = join(dir, 'museum.log');
  const logFd = openSync(logPath, 'w');
  try {
    process.stderr.write('bench-serve: publishing the fixture bake and creating keys…\n');
    await publishFixtureBake(join(dir, 'data'), { extraArtworks: 500 });
    const glbRef = await putContentFile(join(dir, 'data'), await benchGlb(), 'glb');
    const glbPath = new URL(fileUrl('http://x', glbRef)).pathname;
    // Enough keys that no key nears 120 requests a minute across every keyed run (autocannon walks
    // the keys in lockstep over its connections: a key gets up to CONNECTIONS hits per pass).
    const keyCount = Number(process.env.BENCH_KEYS ?? 30_000);
    const db = openStateDb(join(dir, 'state.db'));
    const keys = await new SqliteKeyStore(db).createMany(Array.from({ length: keyCount }, (_, i) => `bench-${i}`));
    db.close();

    const redis = spawnSync('redis-server', ['--version']).status === 0 ? await startRedis() : null;
    stopRedis = () => redis?.close();
    if (!redis) process.stderr.write('bench-serve: no redis-server here (scripts/system-deps.sh installs it): skipping the Redis limiter run\n');
    postgres = await startPostgres().catch((err: Error) => {
      process.stderr.write(`bench-serve: no PostgreSQL here (${err.message}): skipping the PostgreSQL keys run\n`);
      return null;
    });
    const pgKeys = postgres ? await keysInPostgres(postgres.url, keyCount) : [];
    const museum = await forkChild<MuseumReady>(['--serve', dir, redis?.url ?? '', postgres?.url ?? ''], logFd);
    children.push(museum.child);
    const floor = await forkChild<{ floor: string; slotsEtag: string }>(['--floor', museum.ready.museum, museum.ready.probeKey, glbPath], 'inherit');
    children.push(floor.child);
    const pinned = pinCpus(children.map((c) => c.pid!));
    process.stderr.write(pinned ? 'bench-serve: servers pinned to CPU 0, load generator to CPU 1\n' : 'bench-serve: NOT pinned (taskset missing or one core)\n');
    const { museum: m, museumRedis, museumPg } = museum.ready;
    const { floor: f, slotsEtag } = floor.ready;

    const perRound = Math.floor(keys.length / ROUNDS);
    const roundKeys = (round: number, from = keys) => from.slice(round * perRound, (round + 1) * perRound);
    const keyed = (round: number, from = keys) => roundKeys(round, from).map((key) => ({ headers: { 'X-API-Key': key } }));
    const revalidate = { 'If-None-Match': slotsEtag };
    const only = new RegExp(process.env.BENCH_ONLY ?? '');
    const pairs = (round: number): Array<{ target: number; floor: Scenario; museum: Scenario }> => [
      { target: 0.85, floor: { name: 'floor slots', child: floor.child, url: `${f}/slots` }, museum: { name: 'slots', child: museum.child, url: m + SLOTS_PATH } },
      {
        target: 0.8,
        floor: { name: 'floor 304', child: floor.child, url: `${f}/slots`, headers: revalidate },
        museum: { name: 'slots 304', child: museum.child, url: m + SLOTS_PATH, headers: revalidate },
      },
      {
        target: 0.9,
        floor: { name: `floor GLB`, child: floor.child, url: `${f}/glb` },
        museum: { name: `files GLB ${Math.round(glbRef.bytes / 1024)} KB`, child: museum.child, url: m + glbPath },
      },
      {
        target: 0.6,
        // The same request stream (keys included, ignored by the floor): autocannon is slower cycling
        // through thousands of distinct requests, and both sides must pay that alike.
        floor: { name: 'floor artworks', child: floor.child, url: `${f}/artworks`, requests: keyed(round) },
        museum: { name: 'artworks (keyed)', child: museum.child, url: m + ARTWORKS_PATH, requests: keyed(round) },
      },
      ...(museumRedis
        ? [
            {
              target: 0.45,
              floor: { name: 'floor artworks', child: floor.child, url: `${f}/artworks`, requests: keyed(round) },
              museum: { name: 'artworks (Redis)', child: museum.child, url: museumRedis + ARTWORKS_PATH, requests: keyed(round) },
            },
          ]
        : []),
      ...(museumPg
        ? [
            {
              target: 0.5,
              floor: { name: 'floor artworks', child: floor.child, url: `${f}/artworks`, requests: keyed(round, pgKeys) },
              museum: { name: 'artworks (PG keys)', child: museum.child, url: museumPg + ARTWORKS_PATH, requests: keyed(round, pgKeys), verifyFirst: roundKeys(round, pgKeys) },
            },
          ]
        : []),
    ].filter((pair) => only.test(pair.museum.name));

    process.stderr.write(`bench-serve: ${CONNECTIONS} connections, ${DURATION_S} s per run, ${ROUNDS} rounds, ${keys.length} keys\n`);
    const runs = new Map<string, Figures[]>();
    const ratios = new Map<string, { rps: number[]; cpu: number[] }>();
    let museumRequests = 3; // the floor fetched its three bodies from the museum
    const run = async (scenario: Scenario, round: number): Promise<Figures> => {
      if (scenario.verifyFirst) await verifyOnce(scenario.child, scenario.verifyFirst);
      const warm = await measure(scenario, 1); // warm-up (JIT, caches, connections)
      const figures = await measure(scenario, DURATION_S);
      if (scenario.child === museum.child) museumRequests += warm.requests + figures.requests;
      runs.set(scenario.name, [...(runs.get(scenario.name) ?? []), figures]);
      process.stderr.write(`  round ${round + 1} ${scenario.name.padEnd(18)} ${Math.round(figures.rps)} req/s, ${figures.cpuUs.toFixed(1)} µs CPU/req\n`);
      return figures;
    };
    for (let round = 0; round < ROUNDS; round++) {
      for (const pair of pairs(round)) {
        // Back to back, alternating which goes first, so a change in the machine's load hits both.
        const order = round % 2 === 0 ? [pair.floor, pair.museum] : [pair.museum, pair.floor];
        const figures = new Map<Scenario, Figures>();
        for (const scenario of order) figures.set(scenario, await run(scenario, round));
        const [fl, mu] = [figures.get(pair.floor)!, figures.get(pair.museum)!];
        const entry = ratios.get(pair.museum.name) ?? { rps: [], cpu: [] };
        entry.rps.push(mu.rps / fl.rps);
        entry.cpu.push(fl.cpuUs / mu.cpuUs);
        ratios.set(pair.museum.name, entry);
      }
    }

    const lines = [
      '',
      `${'scenario'.padEnd(18)} ${'CPU µs/req'.padStart(10)} ${'floor÷us'.padStart(8)}  ${'target'.padEnd(11)} ${'req/s'.padStart(9)} ${'× floor'.padStart(7)} ${'p99 ms'.padStart(7)}`,
    ];
    let missed = 0;
    const printed = new Set<string>();
    for (const { target, floor: fs, museum: ms } of pairs(0)) {
      for (const scenario of [fs, ms]) {
        if (printed.has(scenario.name)) continue; // a floor shared by two pairs
        printed.add(scenario.name);
        const figures = runs.get(scenario.name)!;
        const own = scenario === ms ? ratios.get(ms.name)! : null;
        let verdict = '';
        if (own) {
          const ok = median(own.cpu) >= target;
          verdict = `≥ ${target} ${ok ? 'ok' : 'MISSED'}`;
          if (!ok) missed++;
        }
        lines.push(
          [
            scenario.name.padEnd(18),
            median(figures.map((x) => x.cpuUs)).toFixed(1).padStart(10),
            (own ? median(own.cpu).toFixed(2) : '').padStart(8),
            ' ' + verdict.padEnd(11),
            Math.round(median(figures.map((x) => x.rps))).toString().padStart(9),
            (own ? median(own.rps).toFixed(2) : '').padStart(7),
            median(figures.map((x) => x.p99)).toFixed(1).padStart(7),
          ].join(' '),
        );
      }
    }
    // Give the buffered access log a moment, then count its lines against the requests answered.
    await new Promise((done) => setTimeout(done, 500));
    const accessLines = await countAccessLines(logPath);
    lines.push(
      '',
      `Medians of ${ROUNDS} rounds. CPU µs/req: server process CPU time per request answered; floor÷us: the floor's`,
      'CPU per request ÷ the museum\'s (1.00 = as cheap as bare node:http), the median of per-round ratios — the',
      'targets apply to it. req/s and × floor beside it (throughput on a shared machine is the noisier figure).',
      `Default configuration: access log on (${accessLines} lines written for ${museumRequests} requests answered), request ids, CORS.`,
      `Keyed runs rotate over ${keys.length} real keys (${perRound} per round) with the real 120/60 s limiter; the floor`,
      'receives the very same request stream (it ignores the keys). artworks (Redis): a second server whose',
      'limiter is Redis (REDIS_URL, a local redis-server, not pinned): one round trip to Redis per request.',
      'artworks (PG keys): a third server whose keys are in PostgreSQL (DATABASE_URL, a local server, not pinned),',
      'the round\'s keys verified once before: keyed requests are then answered from memory.',
      '',
    );
    process.stdout.write(lines.join('\n'));
    if (missed) process.exitCode = 1;
  } finally {
    for (const child of children) child.disconnect();
    await new Promise((done) => setTimeout(done, 500));
    await stopRedis();
    await postgres?.close();
    closeSync(logFd);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--serve') await serveMuseum(process.argv[3]!, process.argv[4] || undefined, process.argv[5] || undefined);
else if (process.argv[2] === '--floor') await serveFloor(process.argv[3]!, process.argv[4]!, process.argv[5]!);
else await main();
