/**
 * Presence benchmark (`make bench-presence`): hold as many SSE listeners as possible on our
 * server (target 10,000) while pinging, and compare with a bare node:http broadcaster measured
 * with the same client processes in the same run.
 *
 * Processes: this orchestrator; our server (the real `startServer`, `--expose-gc`); a bare
 * node:http broadcaster; CLIENTS client processes, each holding its share of listeners on BOTH
 * servers (raw TCP sockets, minimal parsing). Pings alternate between the two servers so both see
 * the same machine load. Latency of a broadcast to a listener = receive time in the client minus
 * the time the ping was sent, both on the system-wide monotonic clock (process.hrtime).
 *
 * Prints: listeners held, memory per listener (RSS and heap growth after GC, divided by the
 * listeners held), broadcast latency p50/p99 over every (ping, listener) delivery, and the p50/p99
 * of the time until the last listener had a ping. Targets: 10,000 held, p99 ≤ 1.25× bare,
 * < 20 KB per listener.
 *
 * Env: LISTENERS (10000), CLIENTS (4), PINGS (40 per server), PING_GAP_MS (300); BENCH_REDIS=1 runs
 * our server with REDIS_URL (a local redis-server): every event goes through Redis pub/sub.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { percentile } from './stats.ts';

const SELF = fileURLToPath(import.meta.url);
const env = (name: string, def: number) => (process.env[name] ? Number(process.env[name]) : def);
const LISTENERS = env('LISTENERS', 10_000);
const CLIENTS = env('CLIENTS', 4);
const PINGS = env('PINGS', 40);
const PING_GAP_MS = env('PING_GAP_MS', 300);
const WARMUP_PINGS = 3;

const nowUs = () => Number(process.hrtime.bigint() / 1000n);

type Msg = Record<string, any>;

/** Send a message to a child and wait for its reply of type `reply`. */
function ask(child: ChildProcess, msg: Msg, reply: string): Promise<Msg> {
  return new Promise((resolve) => {
    const onMessage = (m: Msg) => {
      if (m.type !== reply) return;
      child.off('message', onMessage);
      resolve(m);
    };
    child.on('message', onMessage);
    child.send(msg);
  });
}

function spawnRole(role: string, extraExecArgv: string[] = []): ChildProcess {
  return fork(SELF, [role], {
    execArgv: [...process.execArgv, ...extraExecArgv],
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

// ---------------------------------------------------------------------------------------------
// Role: our server

async function runOurServer(): Promise<void> {
  const { startServer } = await import('../server/app.ts');
  const { loadConfig } = await import('../server/config.ts');
  const pino = (await import('pino')).default;
  const tmp = mkdtempSync(join(tmpdir(), 'museum-bench-presence-'));
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: join(tmp, 'data'),
    STATE_DB: join(tmp, 'state.db'),
    LOG_LEVEL: 'silent',
    PRESENCE_CAPACITY: String(LISTENERS * 2),
    // Every bench client is on 127.0.0.1: lift the per-IP caps.
    PRESENCE_MAX_PER_IP: String(LISTENERS * 2),
    MAX_CONNECTIONS_PER_IP: '0',
    // The default, half the descriptor limit, would be the listeners themselves (10,000 of 20,000 here).
    MAX_CONNECTIONS: String(LISTENERS + 1_000),
    REDIS_URL: process.env.REDIS_URL ?? '',
  });
  const server = await startServer(config, { log: pino({ level: 'silent' }) });
  serveRole(server.port, async () => {
    await server.close();
    rmSync(tmp, { recursive: true, force: true });
  });
}

// ---------------------------------------------------------------------------------------------
// Role: the bare node:http broadcaster (what "no framework, no policy" costs)

async function runBareServer(): Promise<void> {
  const listeners = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stream') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
      res.write(`data: ${JSON.stringify({ type: 'hello', here: listeners.size + 1 })}\n\n`);
      listeners.add(res);
      res.on('close', () => listeners.delete(res));
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const { handle } = JSON.parse(body || '{}') as { handle?: string };
      const frame = Buffer.from(`data: ${JSON.stringify({ type: 'library-search', handle, at: Date.now() })}\n\n`);
      for (const listener of listeners) listener.write(frame);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ data: { ok: true, here: listeners.size } }));
    });
  });
  server.requestTimeout = 0;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  serveRole((server.address() as AddressInfo).port, async () => {
    server.closeAllConnections();
    server.close();
  });
}

/** Shared child protocol for both servers: report the port, answer memory probes, stop. */
function serveRole(port: number, stop: () => Promise<void>): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  process.on('message', async (m: Msg) => {
    if (m.type === 'mem') {
      for (let i = 0; i < 3; i++) gc?.();
      const { rss, heapUsed, external } = process.memoryUsage();
      process.send!({ type: 'mem', rss, heapUsed, external });
    } else if (m.type === 'stop') {
      await stop();
      process.send!({ type: 'stopped' });
      process.exit(0);
    }
  });
  process.send!({ type: 'ready', port });
}

// ---------------------------------------------------------------------------------------------
// Role: a client process holding listeners on both servers

interface Target {
  name: string;
  port: number;
  path: string;
}

async function runClient(): Promise<void> {
  // Receive times per target per ping sequence number (µs, NaN = not received).
  const received = new Map<string, Map<number, Float64Array>>();
  const sockets = new Map<string, Array<{ socket: Socket; greeted: boolean; open: boolean }>>();

  const hold = async (target: Target, count: number): Promise<number> => {
    const conns: Array<{ socket: Socket; greeted: boolean; open: boolean }> = [];
    sockets.set(target.name, conns);
    const times = new Map<number, Float64Array>();
    received.set(target.name, times);
    const open = (index: number) =>
      new Promise<void>((resolve) => {
        const socket = connect({ port: target.port, host: '127.0.0.1' });
        const conn = { socket, greeted: false, open: true };
        conns[index] = conn;
        socket.setNoDelay(true);
        socket.on('connect', () => socket.write(`GET ${target.path} HTTP/1.1\r\nHost: bench\r\n\r\n`));
        socket.on('data', (buf: Buffer) => {
          const t = nowUs();
          if (!conn.greeted) {
            if (buf.indexOf('"hello"') >= 0) {
              conn.greeted = true;
              resolve();
            } else if (buf.indexOf('HTTP/1.1 200') < 0) {
              socket.destroy();
              resolve();
              return;
            }
          }
          // Every ping carries the handle `bench-<seq>`.
          let at = buf.indexOf('bench-');
          while (at >= 0) {
            let seq = 0;
            let i = at + 6;
            for (; i < buf.length && buf[i]! >= 48 && buf[i]! <= 57; i++) seq = seq * 10 + buf[i]! - 48;
            let row = times.get(seq);
            if (!row) times.set(seq, (row = new Float64Array(count).fill(NaN)));
            row[index] = t;
            at = buf.indexOf('bench-', i);
          }
        });
        socket.on('error', () => resolve());
        socket.on('close', () => {
          conn.open = false;
          resolve();
        });
      });
    // Ramp in small waves so the listen backlog never overflows.
    const wave = 100;
    for (let start = 0; start < count; start += wave) {
      await Promise.all(Array.from({ length: Math.min(wave, count - start) }, (_, k) => open(start + k)));
    }
    return conns.filter((c) => c.greeted && c.open).length;
  };

  process.on('message', async (m: Msg) => {
    if (m.type === 'hold') {
      const held = await hold(m.target as Target, m.count as number);
      process.send!({ type: 'held', held });
    } else if (m.type === 'report') {
      const out: Record<string, Array<[number, Float64Array]>> = {};
      for (const [name, times] of received) out[name] = [...times.entries()];
      const open: Record<string, number> = {};
      for (const [name, conns] of sockets) open[name] = conns.filter((c) => c.greeted && c.open).length;
      process.send!({ type: 'report', times: out, open });
    } else if (m.type === 'stop') {
      for (const conns of sockets.values()) for (const c of conns) c.socket.destroy();
      process.send!({ type: 'stopped' });
      process.exit(0);
    }
  });
  process.send!({ type: 'ready' });
}

// ---------------------------------------------------------------------------------------------
// Orchestrator

function ping(port: number, path: string, seq: number, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ handle: `bench-${seq}` });
    const sent = nowUs();
    const req = request({
      host: '127.0.0.1',
      port,
      path,
      method: 'POST',
      agent: false,
      localAddress,
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(sent) : reject(new Error(`ping answered ${res.statusCode}`))));
    });
    req.end(body);
  });
}

async function main(): Promise<void> {
  // The server role inherits REDIS_URL from this process's environment.
  const redis = process.env.BENCH_REDIS === '1' ? await (await import('../test/helpers/redis.ts')).startRedis() : null;
  if (redis) process.env.REDIS_URL = redis.url;
  try {
    await compare(redis !== null);
  } finally {
    await redis?.close();
  }
}

type ServerTarget = Target & { server: ChildProcess; pingPath: string };

/** What holding the listeners cost each server: memory before and after, how many it held, how long connecting took. */
interface Holding {
  memBefore: Map<string, Msg>;
  memAfter: Map<string, Msg>;
  held: Map<string, number>;
  connectMs: Map<string, number>;
}

/** Every client process opens its share of the listeners on each server in turn. */
async function holdListeners(targets: ServerTarget[], clients: ChildProcess[]): Promise<Holding> {
  const holding: Holding = { memBefore: new Map(), memAfter: new Map(), held: new Map(), connectMs: new Map() };
  for (const t of targets) {
    holding.memBefore.set(t.name, await ask(t.server, { type: 'mem' }, 'mem'));
    const started = Date.now();
    const per = Math.ceil(LISTENERS / CLIENTS);
    const results = await Promise.all(
      clients.map((c, i) =>
        ask(c, { type: 'hold', target: { name: t.name, port: t.port, path: t.path }, count: Math.min(per, LISTENERS - i * per) }, 'held'),
      ),
    );
    holding.connectMs.set(t.name, Date.now() - started);
    holding.held.set(
      t.name,
      results.reduce((n, r) => n + (r.held as number), 0),
    );
    console.log(`  ${t.name}: ${holding.held.get(t.name)} listeners connected in ${holding.connectMs.get(t.name)} ms`);
  }
  await sleep(1000); // let coalesced arrivals settle
  for (const t of targets) holding.memAfter.set(t.name, await ask(t.server, { type: 'mem' }, 'mem'));
  return holding;
}

/**
 * Alternate the servers ping by ping; each ping comes from its own loopback address (our server
 * limits pings per client IP, as it should). When each ping was sent, per server and sequence number.
 */
async function sendPings(targets: ServerTarget[]): Promise<Map<string, Map<number, number>>> {
  const sentAt = new Map<string, Map<number, number>>(targets.map((t) => [t.name, new Map()]));
  for (let seq = 0; seq < WARMUP_PINGS + PINGS; seq++) {
    for (const t of targets) {
      const address = `127.0.${10 + Math.floor(seq / 200)}.${1 + (seq % 200)}`;
      sentAt.get(t.name)!.set(seq, await ping(t.port, t.pingPath, seq, address));
      await sleep(PING_GAP_MS);
    }
  }
  await sleep(1000);
  return sentAt;
}

/** One server's row of the table, from the clients' receive times, and its broadcast p99. */
function latencyRow(t: ServerTarget, reports: Msg[], sent: Map<number, number>, holding: Holding, throughRedis: boolean) {
  const all: number[] = [];
  const lastPerPing: number[] = [];
  let missing = 0;
  for (let seq = WARMUP_PINGS; seq < WARMUP_PINGS + PINGS; seq++) {
    let last = 0;
    for (const r of reports) {
      const row = (r.times[t.name] as Array<[number, Float64Array]>).find(([s]) => s === seq)?.[1];
      if (!row) {
        missing += r.open[t.name] as number;
        continue;
      }
      for (const recv of row) {
        if (Number.isNaN(recv)) continue;
        const latency = (recv - sent.get(seq)!) / 1000;
        all.push(latency);
        last = Math.max(last, latency);
      }
    }
    lastPerPing.push(last);
  }
  all.sort((a, b) => a - b);
  lastPerPing.sort((a, b) => a - b);
  const stillOpen = reports.reduce((n, r) => n + (r.open[t.name] as number), 0);
  const heldCount = holding.held.get(t.name)!;
  const before = holding.memBefore.get(t.name)!;
  const after = holding.memAfter.get(t.name)!;
  const row = {
    server: t.name === 'ours' ? `ours (Koa route + hub${throughRedis ? ' + Redis' : ''})` : 'bare node:http',
    held: stillOpen,
    'connect s': (holding.connectMs.get(t.name)! / 1000).toFixed(1),
    'rss KB/listener': ((after.rss - before.rss) / heldCount / 1024).toFixed(1),
    'heap KB/listener': ((after.heapUsed + after.external - before.heapUsed - before.external) / heldCount / 1024).toFixed(1),
    'p50 ms': percentile(all, 50).toFixed(1),
    'p99 ms': percentile(all, 99).toFixed(1),
    'last p50 ms': percentile(lastPerPing, 50).toFixed(1),
    'last p99 ms': percentile(lastPerPing, 99).toFixed(1),
    delivered: `${all.length}/${stillOpen * PINGS}${missing ? ` (${missing} missing)` : ''}`,
  };
  return { row, p99: percentile(all, 99) };
}

async function compare(throughRedis: boolean): Promise<void> {
  const redisNote = throughRedis ? '; ours with REDIS_URL (events through a local redis-server)' : '';
  console.log(`presence bench: ${LISTENERS} listeners per server, ${CLIENTS} client processes, ${PINGS} pings per server${redisNote}`);
  const ours = spawnRole('server-ours', ['--expose-gc']);
  const bare = spawnRole('server-bare', ['--expose-gc']);
  const clients = Array.from({ length: CLIENTS }, () => spawnRole('client'));
  const onceReady = (c: ChildProcess) => new Promise<Msg>((r) => c.once('message', r));
  const [oursReady, bareReady] = await Promise.all([onceReady(ours), onceReady(bare), ...clients.map(onceReady)]);
  const targets: ServerTarget[] = [
    { name: 'ours', port: oursReady!.port, path: '/v1/presence/stream', pingPath: '/v1/presence/ping', server: ours },
    { name: 'bare', port: bareReady!.port, path: '/stream', pingPath: '/ping', server: bare },
  ];
  const holding = await holdListeners(targets, clients);
  const sentAt = await sendPings(targets);
  const reports = await Promise.all(clients.map((c) => ask(c, { type: 'report' }, 'report')));
  const [oursResult, bareResult] = targets.map((t) => latencyRow(t, reports, sentAt.get(t.name)!, holding, throughRedis));
  console.table([oursResult!.row, bareResult!.row]);
  const ratio = oursResult!.p99 / bareResult!.p99;
  const oursRow = oursResult!.row;
  const heldOk = Number(oursRow.held) >= 10_000;
  const memOk = Number(oursRow['rss KB/listener']) < 20;
  console.log(
    `targets: held ${oursRow.held} (≥ 10000: ${heldOk ? 'yes' : 'no'}), ` +
      `p99 ours/bare ${ratio.toFixed(2)}× (≤ 1.25: ${ratio <= 1.25 ? 'yes' : 'no'}), ` +
      `${oursRow['rss KB/listener']} KB per listener (< 20: ${memOk ? 'yes' : 'no'})`,
  );

  await Promise.all([...clients, ours, bare].map((c) => ask(c, { type: 'stop' }, 'stopped')));
}

const role = process.argv[2];
const run = role === 'server-ours' ? runOurServer : role === 'server-bare' ? runBareServer : role === 'client' ? runClient : main;
run().catch((err: unknown) => {
  console.error(`bench-presence failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
