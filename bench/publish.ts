/**
 * `make bench-publish`: does a server keep answering while it picks up a large bake (issue 43, the
 * publish stall)? `museum serve` (bin/museum, the dist/ bundle) runs on a small fixture bake; a
 * manifest of 200,000 artworks, written beforehand into a staging directory, is then renamed over
 * the published one, and this process asks GET /healthz every few ms until the server's log says the
 * new snapshot is loaded (and 2 s more). Figures: /healthz p50 / p99 / max over that window, and
 * how long the pickup took. A healthy server answers /healthz within a few ms throughout.
 *
 * Settings: BENCH_ROOT (the checkout whose bin/museum serves, default this one: point it at an
 * export of main for the "before"), BENCH_ARTWORKS (200000), BENCH_INTERVAL_MS (5), BENCH_NODE_ARGS (V8
 * flags for the server, e.g. --trace-gc; its stdout is then shown).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { Agent, get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishFixtureBake } from '../test/helpers/artifacts.ts';

const ROOT = resolve(process.env.BENCH_ROOT ?? resolve(fileURLToPath(import.meta.url), '../..'));
const ARTWORKS = Number(process.env.BENCH_ARTWORKS ?? 200_000);
const INTERVAL_MS = Number(process.env.BENCH_INTERVAL_MS ?? 5);
const LOADED = /content snapshot loaded/g;

const METRICS_TOKEN = 'bench-publish-metrics-token';

/** The server's own event-loop delay since the last scrape (prom-client's, reset by each scrape), in ms. */
async function loopDelay(url: string): Promise<{ max: number; p99: number }> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]) * 1000;
  return { max: gauge('nodejs_eventloop_lag_max_seconds'), p99: gauge('nodejs_eventloop_lag_p99_seconds') };
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const loads = (logPath: string) => readFileSync(logPath, 'utf8').match(LOADED)?.length ?? 0;

async function startServer(dataDir: string, logPath: string): Promise<{ child: ChildProcess; url: string }> {
  const logFd = openSync(logPath, 'w');
  // BENCH_NODE_ARGS: V8 flags for the server (e.g. --trace-gc, --cpu-prof), as bin/museum starts it.
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn('node', ['--no-memory-reducer', ...nodeArgs, join(ROOT, 'bin/museum.js'), 'serve'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      METRICS_TOKEN,
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', process.env.BENCH_NODE_ARGS ? 'inherit' : 'ignore', logFd],
  });
  closeSync(logFd);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const port = /museum: serving .* at http:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(logPath, 'utf8'))?.[1];
    if (port) return { child, url: `http://127.0.0.1:${port}` };
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`museum serve did not start: ${readFileSync(logPath, 'utf8').slice(-500)}`);
    await sleep(50);
  }
}

/** One GET /healthz on a kept-alive connection: its latency in ms. */
function healthz(url: string, agent: Agent): Promise<number> {
  const started = performance.now();
  return new Promise((done, fail) =>
    httpGet(`${url}/healthz`, { agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? done(performance.now() - started) : fail(new Error(`/healthz ${res.statusCode}`))));
    }).on('error', fail),
  );
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'bench-publish-'));
  const dataDir = join(work, 'data');
  const staging = join(work, 'staging');
  try {
    await publishFixtureBake(dataDir);
    // The same fixture (same content files) with 200,000 more artworks: only its manifest is taken.
    await publishFixtureBake(staging, { extraArtworks: ARTWORKS });
    copyFileSync(join(staging, 'manifest.json'), join(dataDir, 'manifest.next.json'));
    const logPath = join(work, 'server.log');
    const { child, url } = await startServer(dataDir, logPath);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      await sleep(3_000); // the first snapshot and its answers settle
      const before = loads(logPath);
      await loopDelay(url); // resets the server's event-loop delay figures
      const latencies: number[] = [];
      const started = performance.now();
      renameSync(join(dataDir, 'manifest.next.json'), join(dataDir, 'manifest.json'));
      let loadedAt: number | null = null;
      while (loadedAt === null || performance.now() - loadedAt < 2_000) {
        latencies.push(await healthz(url, agent));
        if (loadedAt === null && loads(logPath) > before) loadedAt = performance.now();
        if (performance.now() - started > 120_000) throw new Error('the server did not pick the bake up within 120 s');
        await sleep(INTERVAL_MS);
      }
      const loop = await loopDelay(url);
      const sorted = [...latencies].sort((a, b) => a - b);
      const ms = (n: number) => n.toFixed(1);
      console.log(`root: ${ROOT}`);
      console.log(`bake of ${ARTWORKS} artworks picked up in ${ms(loadedAt - started)} ms; ${latencies.length} /healthz requests`);
      console.log(`/healthz p50 ${ms(percentile(sorted, 50))} ms, p99 ${ms(percentile(sorted, 99))} ms, max ${ms(sorted.at(-1)!)} ms`);
      console.log(`the server's event loop (its own monitor): delay p99 ${ms(loop.p99)} ms, max ${ms(loop.max)} ms (bound: 50 ms)`);
    } finally {
      agent.destroy();
      child.kill('SIGTERM');
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
