import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { Agent, get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishFixtureBake } from '../test/helpers/artifacts.ts';
import { type MuseumServe, startMuseumServe } from './museum-serve.ts';
import { percentile } from './stats.ts';

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

function startServer(dataDir: string, logPath: string): Promise<MuseumServe> {
  // BENCH_NODE_ARGS: V8 flags for the server (e.g. --trace-gc, --cpu-prof); its stdout is then shown.
  const nodeFlags = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const env = { METRICS_TOKEN, DATA_DIR: dataDir, LOG_LEVEL: 'info' };
  return startMuseumServe({ root: ROOT, env, logPath, nodeFlags, stdout: nodeFlags.length > 0 ? 'inherit' : 'ignore' });
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
