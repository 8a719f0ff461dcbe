/**
 * Upstreams benchmark (`make bench-upstreams`):
 *
 *  1. Cached characters requests (keyed: auth + rate limiter + cache hit) against the baked slots
 *     route (GET /v1/rooms/1/slots: public, pre-serialized, a snapshot response) on the
 *     same server in the same run, with autocannon: one character (GET /v1/characters/{id}, ~1.6 KB,
 *     comparable to the ~1 KB slot body) and a default list page (GET /v1/characters, 25 summaries,
 *     ~22 KB). Target: characters ≥ 0.7× the slots throughput (on the comparable body).
 *  2. The latency added by streaming a Library answer through us: time to the first frame via
 *     POST /v1/library/ask/stream versus straight from the fake Library, interleaved request by
 *     request. Target: median first frame + < 5 ms.
 *
 * Processes: this orchestrator (autocannon, the clients, the fake upstreams) and our server (the
 * real `startServer`) in a child process, so the load generator does not share the server's loop.
 * Keys rotate over a pool so the real per-key limiter (120/min) admits every request.
 *
 * Env: DURATION (seconds per autocannon run, default 5), CONNECTIONS (default 32), STREAMS (default 200).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { median, percentile } from './stats.ts';

const SELF = fileURLToPath(import.meta.url);
const env = (name: string, def: number) => (process.env[name] ? Number(process.env[name]) : def);
const DURATION = env('DURATION', 5);
const CONNECTIONS = env('CONNECTIONS', 32);
const STREAMS = env('STREAMS', 200);
// The real limiter admits 120 requests a minute per key: every keyed run gets its own slice of keys,
// large enough that no key nears that budget even at tens of thousands of requests a second.
const KEYS_PER_RUN = 3_000;
const KEYED_RUNS = 4;
const KEY_POOL = KEYS_PER_RUN * (KEYED_RUNS + 1);

type Msg = Record<string, any>;

// ---------------------------------------------------------------------------------------------
// Role: our server

async function runServer(): Promise<void> {
  const { startServer } = await import('../server/app.ts');
  const { loadConfig } = await import('../server/config.ts');
  const { publishFixtureBake } = await import('../test/helpers/artifacts.ts');
  const pino = (await import('pino')).default;
  const upstreams = JSON.parse(process.env.BENCH_UPSTREAMS!) as { characters: string; library: string };
  const tmp = mkdtempSync(join(tmpdir(), 'museum-bench-upstreams-'));
  const dataDir = join(tmp, 'data');
  await publishFixtureBake(dataDir);
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    STATE_DB: join(tmp, 'state.db'),
    LOG_LEVEL: 'silent',
    CHARACTERS_UPSTREAM_URL: upstreams.characters,
    LIBRARY_UPSTREAM_URL: upstreams.library,
    MAX_CONNECTIONS_PER_IP: '0', // every bench client is on 127.0.0.1
  });
  const server = await startServer(config, { log: pino({ level: 'silent' }) });
  const keys = await server.services.keys.createMany(Array.from({ length: KEY_POOL }, (_, i) => `bench-${i}`));
  process.send!({ type: 'ready', url: server.url, keys });
  process.on('message', (m: Msg) => {
    if (m.type === 'stop')
      void server.close().then(() => {
        rmSync(tmp, { recursive: true, force: true });
        process.exit(0);
      });
  });
}

// ---------------------------------------------------------------------------------------------
// Orchestrator

/** Load `base` + one of `paths` (rotating), with a rotating key when `keys` is given. */
async function load(base: string, paths: string[], keys: string[] | null): Promise<autocannon.Result> {
  let next = 0;
  return autocannon({
    url: base,
    connections: CONNECTIONS,
    duration: DURATION,
    requests: [
      {
        method: 'GET',
        setupRequest: (req: autocannon.Request) => {
          const n = next++;
          req.path = paths[n % paths.length]!;
          if (keys) req.headers = { ...req.headers, 'x-api-key': keys[n % keys.length]! };
          return req;
        },
      },
    ],
  });
}

/** Milliseconds from sending the request until the first complete SSE frame arrived. */
async function firstFrameMs(url: string, headers: Record<string, string>, body: unknown): Promise<number> {
  const start = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  if (res.status !== 200 || !res.body) throw new Error(`${url} answered ${res.status}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let at = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (!at && text.includes('\n\n')) at = performance.now() - start;
  }
  if (!at) throw new Error(`${url}: no frame`);
  return at;
}

/** The routes compared, each with the paths a run rotates over. */
const ROUTES = {
  slots: ['/v1/rooms/1/slots'],
  character: Array.from({ length: 50 }, (_, i) => `/v1/characters/${i + 1}`),
  list: ['/v1/characters'],
};
type Route = keyof typeof ROUTES;
interface RouteSummary {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
}

/** Warm the characters cache and the JIT on every route. */
async function warmUp(url: string, spare: string[]): Promise<void> {
  for (let i = 0; i < 200; i++) {
    for (const [name, paths] of Object.entries(ROUTES)) {
      const headers: Record<string, string> = name === 'slots' ? {} : { 'x-api-key': spare[i % spare.length]! };
      await (await fetch(url + paths[i % paths.length]!, { headers })).arrayBuffer();
    }
  }
}

/** Two rounds of autocannon runs, routes alternating; keyed runs each take fresh keys. */
async function loadRoutes(url: string, keys: string[]): Promise<Record<Route, RouteSummary>> {
  let keyedRun = 0;
  const nextKeys = () => keys.slice(KEYS_PER_RUN * keyedRun, KEYS_PER_RUN * ++keyedRun);
  const runs: Record<Route, autocannon.Result[]> = { slots: [], character: [], list: [] };
  for (let round = 0; round < 2; round++) {
    for (const name of Object.keys(ROUTES) as Route[]) runs[name].push(await load(url, ROUTES[name], name === 'slots' ? null : nextKeys()));
  }
  const summarize = (r: autocannon.Result[]): RouteSummary => ({
    rps: r.reduce((s, x) => s + x.requests.average, 0) / r.length,
    p50: median(r.map((x) => x.latency.p50)),
    p99: median(r.map((x) => x.latency.p99)),
    non2xx: r.reduce((s, x) => s + x.non2xx + x.errors + x.timeouts, 0),
  });
  return { slots: summarize(runs.slots), character: summarize(runs.character), list: summarize(runs.list) };
}

/** Library first-frame latency, interleaved: direct, then through us (sorted, warm-up excluded). */
async function firstFrames(libraryUrl: string, url: string, spare: string[]): Promise<{ direct: number[]; proxied: number[] }> {
  const body = { question: 'Who drew the Atrium?' };
  for (let i = 0; i < 20; i++) {
    await firstFrameMs(`${libraryUrl}/api/ask/stream`, {}, body);
    await firstFrameMs(`${url}/v1/library/ask/stream`, { 'x-api-key': spare[i % spare.length]! }, body);
  }
  const direct: number[] = [];
  const proxied: number[] = [];
  for (let i = 0; i < STREAMS; i++) {
    direct.push(await firstFrameMs(`${libraryUrl}/api/ask/stream`, {}, body));
    proxied.push(await firstFrameMs(`${url}/v1/library/ask/stream`, { 'x-api-key': spare[(i + 100) % spare.length]! }, body));
  }
  return { direct: direct.sort((a, b) => a - b), proxied: proxied.sort((a, b) => a - b) };
}

function reportLines(routes: Record<Route, RouteSummary>, upstreamCalls: number, direct: number[], proxied: number[]): string[] {
  const { slots, character, list } = routes;
  const ratio = character.rps / slots.rps;
  const added = percentile(proxied, 50) - percentile(direct, 50);
  const fmt = (n: number) => n.toFixed(2);
  return [
    '',
    'cached characters vs slots (same server, same run)',
    ...(
      [
        ['slots', slots],
        ['character', character],
        ['list page', list],
      ] as const
    ).map(
      ([name, r]) =>
        `  ${name.padEnd(10)} ${Math.round(r.rps).toString().padStart(7)} req/s   p50 ${r.p50} ms   p99 ${r.p99} ms   ` +
        `non-2xx ${r.non2xx}   ${(r.rps / slots.rps).toFixed(2)}×`,
    ),
    `  ratio       ${ratio.toFixed(2)}× for one character (target ≥ 0.70)   upstream calls during the runs: ${upstreamCalls}`,
    '',
    `Library stream, time to first frame over ${STREAMS} requests`,
    `  direct      p50 ${fmt(percentile(direct, 50))} ms   p90 ${fmt(percentile(direct, 90))} ms`,
    `  through us  p50 ${fmt(percentile(proxied, 50))} ms   p90 ${fmt(percentile(proxied, 90))} ms`,
    `  added       p50 +${fmt(added)} ms (target < 5 ms)`,
    '',
    `result: characters ${ratio >= 0.7 ? 'PASS' : 'FAIL'}, stream ${added < 5 ? 'PASS' : 'FAIL'}`,
  ];
}

async function orchestrate(): Promise<void> {
  const { startFakeDirectus } = await import('../test/fakes/directus.ts');
  const { startFakeLibrary } = await import('../test/fakes/library.ts');
  const directus = await startFakeDirectus();
  const library = await startFakeLibrary();
  const child: ChildProcess = fork(SELF, ['server'], {
    env: { ...process.env, BENCH_UPSTREAMS: JSON.stringify({ characters: directus.url, library: library.url }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'advanced',
  });
  const ready = await new Promise<Msg>((resolve) => child.on('message', (m: Msg) => m.type === 'ready' && resolve(m)));
  const { url, keys } = ready as { url: string; keys: string[] };
  try {
    // The last slice of keys serves the warm-up and the stream measurements.
    const spare = keys.slice(KEYS_PER_RUN * KEYED_RUNS);
    await warmUp(url, spare);
    const upstreamBefore = directus.requestsTo(/^\/items\/codex/).length;
    process.stderr.write(`bench: ${DURATION} s × ${CONNECTIONS} connections per run, alternating routes\n`);
    const routes = await loadRoutes(url, keys);
    const upstreamCalls = directus.requestsTo(/^\/items\/codex/).length - upstreamBefore;
    const { direct, proxied } = await firstFrames(library.url, url, spare);
    process.stdout.write(`${reportLines(routes, upstreamCalls, direct, proxied).join('\n')}\n`);
  } finally {
    child.send({ type: 'stop' });
    await new Promise((resolve) => child.once('exit', resolve));
    await directus.close();
    await library.close();
  }
}

if (process.argv[2] === 'server') await runServer();
else await orchestrate();
