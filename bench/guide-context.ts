/**
 * Issue 43, "public answers compressed per request": CPU per GET /v1/guide/exhibitions/{id} with a
 * large context (1,250 artworks with long names, near the 512 KB cap), br accepted, each request from a fresh loopback
 * address (the 60/min per-address limit stays out of the way). The server runs in this process, so
 * the figure is this process's CPU (server and client) per request; /healthz requests sent the same
 * way give the client's and the connection's share, and their difference is the context's own cost.
 * Run it in a checkout of main for the "before": `npx tsx bench/guide-context.ts`.
 */
import { request } from 'node:http';
import { call, exhibitionDoc, freshIp, register, startGuideServer } from '../test/server/guide/helpers.ts';

/** One GET from a fresh loopback address, the body taken as bytes (it is br-encoded). */
function encodedGet(url: string, headers: Record<string, string>): Promise<{ status: number; bytes: number }> {
  return new Promise((done, fail) => {
    const req = request(url, { agent: false, localAddress: freshIp(), headers }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => void (bytes += c.length));
      res.on('end', () => done({ status: res.statusCode ?? 0, bytes }));
    });
    req.on('error', fail);
    req.end();
  });
}

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 400);
const long = (what: string, i: number) => `${what} ${i} `.padEnd(150, 'x');

/** 5 placements of 250 artworks each, names near their clamp: a context near its 512 KB cap. */
const largeDoc = () =>
  exhibitionDoc({
    placements: Array.from({ length: 5 }, (_, p) => ({
      uid: `p-${p}`,
      room: { id: (p % 3) + 1, title: long('Room', p) },
      artworks: Array.from({ length: 250 }, (_, i) => ({ id: 100_000 + p * 250 + i, name: long('Work', i), artist: long('Artist', i) })),
    })),
  });

async function cpuPerRequest(path: string, s: Awaited<ReturnType<typeof startGuideServer>>): Promise<{ ms: number; bytes: number }> {
  const headers = { 'accept-encoding': 'br, gzip' };
  for (let i = 0; i < 20; i++) await encodedGet(`${s.url}${path}`, headers); // warm up
  const started = process.cpuUsage();
  let bytes = 0;
  for (let i = 0; i < REQUESTS; i++) {
    const res = await encodedGet(`${s.url}${path}`, headers);
    if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
    bytes = res.bytes;
  }
  const used = process.cpuUsage(started);
  return { ms: (used.user + used.system) / 1000 / REQUESTS, bytes };
}

const s = await startGuideServer();
try {
  const registered = await register(s, largeDoc());
  if (registered.status >= 300) throw new Error(`register: ${registered.status} ${JSON.stringify(registered.json)}`);
  const context = `/v1/guide/exhibitions/${encodeURIComponent('spring-show:2025')}`;
  const raw = await call(s, 'GET', context);
  const ctx = await cpuPerRequest(context, s);
  const health = await cpuPerRequest('/healthz', s);
  console.log(`context: ${raw.bytes.length} bytes identity, ${ctx.bytes} bytes sent (br); ${REQUESTS} requests each`);
  console.log(
    `CPU per request: context ${ctx.ms.toFixed(2)} ms, /healthz ${health.ms.toFixed(2)} ms, context's own ${(ctx.ms - health.ms).toFixed(2)} ms`,
  );
} finally {
  await s.close();
}
