/**
 * `make bench-soak`: does what held in issue 43's attack round still hold? `museum serve` as shipped
 * (bin/museum.js, the dist/ bundle, default configuration, access log on) on the fixture bake plus an
 * 8 MB GLB, driven through its public HTTP API only (keys through `museum keys create`, the
 * operators' interface). Five checks, each a pass or a fail, then a table:
 *
 *   kill -9         exhibition registrations (POST /v1/guide/exhibitions, each from its own 127.x.y.z
 *                   address: the per-IP budgets stay the server's) and `museum keys create` run
 *                   concurrently; the server is SIGKILLed mid-load and restarted on the same DATA_DIR
 *                   and STATE_DB; every registration and key acknowledged (2xx / exit 0) must read back
 *                   through the API, and `PRAGMA integrity_check` on STATE_DB must say ok
 *   aborted GETs    downloads of the 8 MB /files GLB, each cut after its first bytes (socket
 *                   destroyed); the server's open descriptors (/proc/<pid>/fd) must come back to
 *                   their level before (± 5) within 10 s
 *   backpressure    presence listeners that never read (raw sockets, paused) beside one that reads;
 *                   pings (the largest handle) until the server drops every stalled one; the reader
 *                   must get every acknowledged ping's event, the stalled sockets must be closed
 *   hostile         malformed requests (overlong paths, encoded traversal, NUL, huge headers, bad
 *                   methods, malformed queries, invalid JSON, wrong content types; the lists of
 *                   test/helpers/bad-input.ts): each must get a 4xx with the error envelope
 *                   `{ errors: [{ message, extensions: { code } }] }`, none a 5xx
 *   soak            mixed GETs for BENCH_SOAK_S from 21 clients: slots, /v1, /files (a small GLB
 *                   whole and br, the 8 MB one ranged, whole and conditional), 304s; keyed reads
 *                   (rooms, artworks list and detail, search, collections, their 304s) with the kill's
 *                   keys and 24 more, and guide exhibition reads (context, 304, suggestions, tour)
 *                   from 40 addresses, each paced under its budget (120/min per key, 60/min per
 *                   address); no 5xx and no transport error; the server's VmRSS sampled every
 *                   second, the mean of the last 20 s at most 1.15× the mean of the 20 s before
 *
 * Settings: BENCH_ROOT (the checkout whose bin/museum serves, default this one), BENCH_SOAK_S (60),
 * BENCH_KILL_AFTER_S (5: registration load before the SIGKILL), BENCH_KEYS (12, created around the
 * kill), BENCH_ABORTS (600), BENCH_STALLED (4 stalled presence listeners). About 80 s by default.
 * Exit 1 when a check fails.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent, type IncomingHttpHeaders, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { createParser } from 'eventsource-parser';
import { putContentFile } from '../artifacts/store.ts';
import { publishFixtureBake } from '../test/helpers/artifacts.ts';
import { BAD_JSON, HOSTILE, METHODS_WRONG } from '../test/helpers/bad-input.ts';
import { rawRequest } from '../test/helpers/raw-http.ts';
import { startMuseumServe } from './museum-serve.ts';

const ROOT = resolve(process.env.BENCH_ROOT ?? resolve(fileURLToPath(import.meta.url), '../..'));
const SOAK_S = Number(process.env.BENCH_SOAK_S ?? 60);
const KILL_AFTER_S = Number(process.env.BENCH_KILL_AFTER_S ?? 5);
const KEYS = Number(process.env.BENCH_KEYS ?? 12);
const ABORTS = Number(process.env.BENCH_ABORTS ?? 600);
const STALLED = Number(process.env.BENCH_STALLED ?? 4);
/** Keys made for the soak's keyed reads besides the survivors of the kill (2 requests/s each). */
const SOAK_KEYS = 24;
const FD_SLACK = 5;
const RSS_GROWTH_MAX = 1.15;
const BIG_BYTES = 8 * 1024 * 1024;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const n = (x: number) => x.toLocaleString('en-US');

interface Row {
  check: string;
  ok: boolean;
  figures: string;
  before: string;
  seconds?: number;
}

// ---------------------------------------------------------------------------------------------
// The server, its process, and requests to it

interface Env {
  dataDir: string;
  stateDb: string;
  logDir: string;
}

interface Server {
  child: ChildProcess;
  port: number;
  pid: number;
}

async function startServer(env: Env, name: string): Promise<Server> {
  const started = await startMuseumServe({ root: ROOT, env: serverEnv(env), logPath: join(env.logDir, `${name}.log`) });
  return { child: started.child, port: started.port, pid: started.child.pid! };
}

const serverEnv = (env: Env) => ({ DATA_DIR: env.dataDir, STATE_DB: env.stateDb, LOG_LEVEL: 'info' });

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise<void>((done) => child.once('exit', () => done()));

const fdCount = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

interface WireResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

interface Send {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  agent?: Agent | false;
  localAddress?: string;
}

/** One request; rejects on a transport error (reset, refused). */
function send(port: number, o: Send): Promise<WireResponse> {
  const headers = { ...o.headers, ...(o.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(o.body)) }) };
  return new Promise((done, fail) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method: o.method ?? 'GET',
      path: o.path,
      headers,
      agent: o.agent,
      localAddress: o.localAddress,
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => done({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end(o.body);
  });
}

const json = (a: WireResponse) => JSON.parse(a.body.toString('utf8')) as { data?: Record<string, unknown> };

/**
 * Client addresses 127.<block>.x.y, each handed out once: the per-IP budgets (6 registrations and 60
 * guide reads a minute, 12 pings) are the server's, untouched; every address is another client.
 */
function addresses(block: number): () => string {
  let i = 0;
  return () => {
    const at = i++;
    return `127.${block}.${Math.floor(at / 254) % 256}.${(at % 254) + 1}`;
  };
}

/** `museum keys create` (the operators' interface); the key when it exited 0 with one. */
function createKey(env: Env, name: string): Promise<string | null> {
  return new Promise((done) => {
    const child = spawn(join(ROOT, 'bin/museum'), ['keys', 'create', '--name', name, '--json'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...serverEnv(env) },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d));
    child.on('exit', (code) => {
      const key = code === 0 ? (JSON.parse(out) as { key?: string }).key : undefined;
      done(key && /^museum_[0-9a-f]{48}$/.test(key) ? key : null);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// 1. Acknowledged writes survive kill -9

const exhibitionDoc = (id: string) =>
  JSON.stringify({
    format: 'museum-exhibition@1',
    id,
    name: `Soak ${id}`,
    generator: 'bench-soak',
    placements: [
      {
        uid: 'p1',
        room: { id: 1, title: 'The Atrium' },
        artworks: [
          { id: 101, name: 'Dead Host Study', artist: 'Ada Palette' },
          { id: 104, name: 'Trustworthy Landscape', artist: 'Chiara Voss' },
        ],
      },
    ],
  });

interface Load {
  acked: string[];
  other: Record<number, number>;
  errors: number;
  inFlightAtKill: number;
}

/** Registrations from 32 concurrent clients, each from a fresh address, until `stopped()`. */
async function registrationLoad(port: number, stopped: () => boolean, onKill: (inFlight: () => number) => void): Promise<Load> {
  const load: Load = { acked: [], other: {}, errors: 0, inFlightAtKill: 0 };
  const address = addresses(1);
  let next = 0;
  let inFlight = 0;
  onKill(() => inFlight);
  const worker = async () => {
    while (!stopped()) {
      const id = `soak-${next++}`;
      inFlight++;
      try {
        const headers = { 'content-type': 'application/json' };
        const a = await send(port, {
          method: 'POST',
          path: '/v1/guide/exhibitions',
          headers,
          body: exhibitionDoc(id),
          agent: false,
          localAddress: address(),
        });
        if (a.status === 200 && json(a).data?.id === id) load.acked.push(id);
        else load.other[a.status] = (load.other[a.status] ?? 0) + 1;
      } catch {
        load.errors++;
      } finally {
        inFlight--;
      }
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
  return load;
}

/** The acknowledged registrations the restarted server does not give back (60 reads per address). */
async function missingExhibitions(port: number, ids: string[]): Promise<string[]> {
  const address = addresses(2);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const missing: string[] = [];
  let next = 0;
  let local = address();
  const worker = async () => {
    while (next < ids.length) {
      const i = next++;
      if (i % 50 === 0) local = address();
      const a = await send(port, { path: `/v1/guide/exhibitions/${ids[i]}`, agent, localAddress: local }).catch(() => null);
      if (a?.status !== 200 || json(a).data?.name !== `Soak ${ids[i]}`) missing.push(`${ids[i]} (${a?.status ?? 'no answer'})`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  agent.destroy();
  return missing;
}

function integrity(stateDb: string): string {
  const db = new Database(stateDb, { fileMustExist: true });
  try {
    return (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join('; ');
  } finally {
    db.close();
  }
}

/** Check 1; resolves with the restarted server, the surviving keys and exhibitions for the checks after. */
async function checkKillNine(env: Env): Promise<{ row: Row; server: Server; keys: string[]; exhibitions: string[] }> {
  const first = await startServer(env, 'before-kill');
  let killed = false;
  let inFlight = () => 0;
  const load = registrationLoad(
    first.port,
    () => killed,
    (count) => (inFlight = count),
  );
  const keyTimes: boolean[] = [];
  const keyChain = async (chain: number) => {
    const made: string[] = [];
    for (let i = chain; i < KEYS; i += 3) {
      const key = await createKey(env, `soak-kill-${i}`);
      if (!key) continue;
      made.push(key);
      keyTimes.push(!killed);
    }
    return made;
  };
  const keysMade = Promise.all([0, 1, 2].map(keyChain)).then((chains) => chains.flat());
  await sleep(KILL_AFTER_S * 1000);
  const atKill = inFlight();
  first.child.kill('SIGKILL');
  killed = true;
  const [registrations, keys] = await Promise.all([load, keysMade, exited(first.child)]);
  const server = await startServer(env, 'after-kill');
  const missing = await missingExhibitions(server.port, registrations.acked);
  const keysBack = await Promise.all(
    keys.map((key) =>
      send(server.port, { path: '/v1/rooms', headers: { 'x-api-key': key } }).then(
        (a) => a.status === 200,
        () => false,
      ),
    ),
  );
  const keysOk = keysBack.filter(Boolean).length;
  const check = integrity(env.stateDb);
  const ok = missing.length === 0 && keysOk === keys.length && keys.length === KEYS && check === 'ok' && registrations.acked.length > 0;
  const refused = Object.entries(registrations.other).map(([status, count]) => `${count}× ${status}`);
  const figures =
    `${n(registrations.acked.length - missing.length)} of ${n(registrations.acked.length)} acknowledged registrations, ` +
    `${keysOk} of ${keys.length} keys (${keyTimes.filter(Boolean).length} made before the kill) survived; integrity_check ${check}; ` +
    `killed at ${KILL_AFTER_S} s with ${atKill} registrations in flight (${registrations.errors} cut off${refused.length ? `, ${refused.join(', ')}` : ''})` +
    (missing.length ? `; missing: ${missing.slice(0, 5).join(', ')}` : '');
  const row = { check: 'acknowledged writes survive kill -9', ok, figures, before: '1,412 of 1,412 registrations, 12 of 12 keys' };
  return { row, server, keys: keys.filter((_, i) => keysBack[i]), exhibitions: registrations.acked };
}

// ---------------------------------------------------------------------------------------------
// 2. Aborted downloads leak no descriptor

/** One download cut after its first 64 KB: resolves with the status once the socket is destroyed. */
function abortedDownload(port: number, path: string): Promise<number> {
  return new Promise((done, fail) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, headers: { 'accept-encoding': 'identity' } });
    req.on('response', (res) => {
      let read = 0;
      res.on('data', (d: Buffer) => {
        read += d.length;
        if (read >= 64 * 1024) {
          req.destroy();
          done(res.statusCode!);
        }
      });
      res.on('end', () => done(-1)); // the whole file arrived: not an aborted download
    });
    req.on('error', (err) => (req.destroyed ? undefined : fail(err)));
    req.end();
  });
}

async function checkAbortedDownloads(server: Server, bigPath: string): Promise<Row> {
  await send(server.port, { path: bigPath, headers: { 'accept-encoding': 'identity' }, agent: false }); // warm the file's metadata
  await sleep(1_500);
  const before = fdCount(server.pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, fdCount(server.pid))), 20);
  const statuses: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next++ < ABORTS) statuses.push(await abortedDownload(server.port, bigPath));
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  clearInterval(sampler);
  const started = Date.now();
  await sleep(1_000); // the server notices the resets
  let after = fdCount(server.pid);
  while (after > before + FD_SLACK && Date.now() - started < 10_000) {
    await sleep(100);
    after = fdCount(server.pid);
  }
  const cut = statuses.filter((s) => s === 200).length;
  const ok = cut === ABORTS && after <= before + FD_SLACK;
  const figures =
    `${cut} of ${ABORTS} downloads of ${BIG_BYTES / 1024 / 1024} MB cut after 64 KB; descriptors ${before} before, ${peak} at peak, ` +
    `${after} after ${((Date.now() - started) / 1000).toFixed(1)} s (bound ${before + FD_SLACK})`;
  return { check: 'aborted downloads leak no descriptor', ok, figures, before: '600 aborted, no descriptor leaked' };
}

// ---------------------------------------------------------------------------------------------
// 3. Backpressure: presence listeners that never read are dropped, a reader gets every event

interface Reader {
  searches: number;
  here: number;
  close(): void;
}

/** A presence listener that reads: counts library-search events and keeps the last `here`. */
function presenceReader(port: number): Promise<Reader> {
  return new Promise((done, fail) => {
    const req = request({ host: '127.0.0.1', port, path: '/v1/presence/stream', agent: false });
    req.on('response', (res) => {
      const reader: Reader = { searches: 0, here: 0, close: () => req.destroy() };
      const parser = createParser({
        onEvent: ({ data }) => {
          const event = JSON.parse(data) as { type: string; here?: number };
          if (event.type === 'library-search') reader.searches++;
          else if (event.here !== undefined) reader.here = event.here;
        },
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => parser.feed(chunk));
      res.on('error', () => undefined);
      done(reader);
    });
    req.on('error', fail);
    req.end();
  });
}

/** A listener that never reads: a raw socket, paused after sending its request. */
function stalledListener(port: number): Socket {
  const socket = connect(port, '127.0.0.1');
  socket.pause();
  socket.on('error', () => undefined);
  socket.write('GET /v1/presence/stream HTTP/1.1\r\nHost: bench\r\n\r\n');
  return socket;
}

/** Whether the server closed `socket`: reading on (what the kernel held) reaches its end. */
const closedByServer = (socket: Socket) =>
  new Promise<boolean>((done) => {
    if (socket.destroyed) return done(true);
    socket.once('close', () => done(true));
    socket.resume();
    setTimeout(() => done(false), 5_000);
  });

async function until(test: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!test() && Date.now() < deadline) await sleep(20);
  return test();
}

/** Pings with the largest handle from 16 clients, 12 per address (its budget), until `stop()`. */
async function pingUntil(port: number, stop: () => boolean): Promise<{ acked: number; other: number; bytes: number }> {
  const body = JSON.stringify({ handle: '🎨'.repeat(48) });
  const address = addresses(3);
  const tally = { acked: 0, other: 0, bytes: 0 };
  const started = Date.now();
  const worker = async () => {
    while (!stop() && Date.now() - started < 90_000) {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const localAddress = address();
      for (let i = 0; i < 12 && !stop(); i++) {
        const a = await send(port, {
          method: 'POST',
          path: '/v1/presence/ping',
          headers: { 'content-type': 'application/json' },
          body,
          agent,
          localAddress,
        });
        if (a.status === 200) tally.acked++;
        else tally.other++;
      }
      agent.destroy();
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  // One event's frame as the listeners get it: `data: {...}\n\n`, in one chunk of the response.
  tally.bytes =
    tally.acked * (Buffer.byteLength(`data: {"type":"library-search","handle":${body.slice(10, -1)},"at":1764800000000}\n\n`) + 6);
  return tally;
}

async function checkBackpressure(server: Server): Promise<Row> {
  const reader = await presenceReader(server.port);
  const stalled = Array.from({ length: STALLED }, () => stalledListener(server.port));
  const attached = await until(() => reader.here === STALLED + 1, 10_000);
  let dropped = false;
  const pings = await pingUntil(server.port, () => (dropped ||= attached && reader.here === 1));
  const everyEvent = await until(() => reader.searches === pings.acked, 10_000);
  const closed = (await Promise.all(stalled.map(closedByServer))).filter(Boolean).length;
  reader.close();
  for (const socket of stalled) socket.destroy();
  const ok = attached && dropped && everyEvent && closed === STALLED && pings.other === 0;
  const figures =
    `${closed} of ${STALLED} stalled listeners dropped and closed after ${n(pings.acked)} pings ` +
    `(~${(pings.bytes / 1024 / 1024).toFixed(1)} MB of events each); the reader got ${n(reader.searches)} of ${n(pings.acked)}` +
    (pings.other ? `; ${pings.other} pings refused` : '');
  return { check: 'backpressure: stalled listeners dropped', ok, figures, before: 'held' };
}

// ---------------------------------------------------------------------------------------------
// 4. Hostile URLs, headers and bodies

interface Hostile {
  label: string;
  raw?: string;
  send?: Send;
}

/** The malformed requests, from bad-input.ts's lists: each must be refused with the error envelope. */
function hostileRequests(key: string): Hostile[] {
  const long = HOSTILE.filter((s) => s.length >= 400); // '9' × 400, 'a' × 6000
  const traversal = HOSTILE.filter((s) => /%2f|%2e|%c0%ae|\.\./i.test(s) && !s.includes('\\'));
  const keyed = { 'x-api-key': key };
  const json = { 'content-type': 'application/json' };
  const list: Hostile[] = [
    ...long.map((s) => ({ label: 'overlong path', send: { path: `/v1/artworks/${encodeURIComponent(s)}`, headers: keyed } })),
    { label: 'overlong path', send: { path: `/v1/${'x/'.repeat(12_000)}` } },
    ...traversal.map((s) => ({ label: 'encoded traversal', send: { path: `/files/${s}` } })),
    ...traversal.map((s) => ({ label: 'encoded traversal', send: { path: `/v1/rooms/${s}/slots` } })),
    { label: 'raw traversal', raw: 'GET /files/../manifest.json HTTP/1.1\r\nHost: x\r\n\r\n' },
    { label: 'raw traversal', raw: 'GET /files/%2e%2e/%2e%2e/state/museum.db HTTP/1.1\r\nHost: x\r\n\r\n' },
    { label: 'NUL byte', send: { path: '/v1/rooms/%00/slots' } },
    { label: 'NUL byte', send: { path: `/files/${'0'.repeat(64)}%00.glb` } },
    { label: 'NUL byte (raw)', raw: 'GET /v1/rooms/1\u0000/slots HTTP/1.1\r\nHost: x\r\n\r\n' },
    { label: 'huge header', raw: `GET /v1/rooms/1/slots HTTP/1.1\r\nHost: x\r\nX-Huge: ${'h'.repeat(70_000)}\r\n\r\n` },
    { label: 'huge header', send: { path: '/v1/rooms', headers: { ...keyed, cookie: 'c'.repeat(20_000) } } },
    { label: 'control byte in header', raw: 'GET /v1/rooms/1/slots HTTP/1.1\r\nHost: x\r\nX-Bad\u0001: y\r\n\r\n' },
    ...METHODS_WRONG.filter((m) => m !== 'OPTIONS') // a CORS preflight: 204 by design
      .slice(0, 6)
      .map((method) => ({ label: `bad method ${method}`, send: { method, path: '/v1/rooms/1/slots' } })),
    { label: 'bad method DELETE (keyed)', send: { method: 'DELETE', path: '/v1/artworks/101', headers: keyed } },
    { label: 'malformed query', send: { path: '/v1/search', headers: keyed } },
    { label: 'malformed query', send: { path: `/v1/search?q=${encodeURIComponent(HOSTILE[1]!)}`, headers: keyed } },
    { label: 'malformed query', send: { path: `/v1/guide/exhibitions/soak-0/suggestions?seed=${'s'.repeat(300)}` } },
    { label: 'bad key', send: { path: '/v1/rooms', headers: { 'x-api-key': HOSTILE.at(-1)! } } },
    ...BAD_JSON.slice(0, 6).map((body) => ({
      label: 'invalid JSON',
      send: { method: 'POST', path: '/v1/guide/exhibitions', headers: json, body },
    })),
    { label: 'invalid JSON', send: { method: 'POST', path: '/v1/presence/ping', headers: json, body: BAD_JSON[0]! } },
    { label: 'invalid JSON (deep)', send: { method: 'POST', path: '/v1/guide/exhibitions', headers: json, body: BAD_JSON.at(-1)! } },
  ];
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
    list.push({
      label: 'wrong content type',
      send: { method: 'POST', path: '/v1/guide/exhibitions', headers: { 'content-type': type }, body: exhibitionDoc('soak-type') },
    });
  }
  list.push({
    label: 'wrong content type',
    send: { method: 'POST', path: '/v1/presence/ping', headers: { 'content-type': 'text/plain' }, body: '{}' },
  });
  return list;
}

/** Why an answer is not a refusal in the envelope (null: it is). */
function notAnEnvelope(a: { status: number; body: Buffer }): string | null {
  if (a.status >= 500) return `${a.status}`;
  if (a.status < 400) return `${a.status}, not a refusal`;
  try {
    const body = JSON.parse(a.body.toString('utf8')) as { errors?: Array<{ message?: unknown; extensions?: { code?: unknown } }> };
    const error = body.errors?.[0];
    return typeof error?.message === 'string' && typeof error.extensions?.code === 'string' ? null : `${a.status} without the envelope`;
  } catch {
    return `${a.status}, body not JSON`;
  }
}

async function checkHostile(server: Server, key: string): Promise<Row> {
  const address = addresses(4); // a client per request: the per-IP budgets would answer 429 before the body is read
  const failures: string[] = [];
  let fivexx = 0;
  const statuses: Record<number, number> = {};
  const list = hostileRequests(key);
  for (const h of list) {
    const a = h.raw
      ? await rawRequest(server.port, h.raw)
      : await send(server.port, { ...h.send!, agent: false, localAddress: address() }).catch(() => ({ status: 0, body: Buffer.alloc(0) }));
    if (a.status >= 500) fivexx++;
    statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    const why = notAnEnvelope(a);
    if (why) failures.push(`${h.label}: ${why}`);
  }
  const figures =
    `${list.length - failures.length} of ${list.length} answered with the error envelope, ${fivexx} 5xx ` +
    `(${Object.entries(statuses)
      .map(([status, count]) => `${status}: ${count}`)
      .join(', ')})` +
    (failures.length ? `; ${failures.slice(0, 4).join('; ')}` : '');
  return { check: 'hostile URLs, headers, bodies', ok: failures.length === 0, figures, before: '36 of 36 envelopes, 0 5xx' };
}

// ---------------------------------------------------------------------------------------------
// 5. Soak: mixed GETs, statuses and resident memory

/** Identities (keys, client addresses) each used at most once per `intervalMs`, round-robin. */
function pacer<T>(ids: T[], intervalMs: number): () => Promise<T> {
  const nextAt = ids.map(() => 0);
  let head = 0;
  return async () => {
    const i = head++ % ids.length;
    const at = nextAt[i]!;
    nextAt[i] = Math.max(Date.now(), at) + intervalMs;
    if (at > Date.now()) await sleep(at - Date.now());
    return ids[i]!;
  };
}

type Pick = Omit<Send, 'agent'>;

/** The soak's requests: public ones (and whole downloads of the big file) for closed-loop clients, keyed and guide ones behind their pacers. */
function soakMix(paths: { small: string; big: string; exhibition: string }, etags: Map<string, string>) {
  const inm = (path: string) => ({ 'if-none-match': etags.get(path) ?? '"none"' });
  const br = { 'accept-encoding': 'br, gzip' };
  const offset = () => Math.floor(Math.random() * (BIG_BYTES - 65_536));
  const publicPicks: Array<() => Pick> = [
    () => ({ path: '/v1/rooms/1/slots', headers: br }),
    () => ({ path: '/v1/rooms/2/slots' }),
    () => ({ path: '/v1/rooms/1/slots', headers: inm('/v1/rooms/1/slots') }),
    () => ({ path: '/v1' }),
    () => ({ path: paths.small, headers: br }),
    () => ({ path: paths.small, headers: inm(paths.small) }),
    () => {
      const start = offset();
      return { path: paths.big, headers: { range: `bytes=${start}-${start + 65_535}` } };
    },
    () => ({ path: paths.big, headers: { range: 'bytes=0-1023' } }),
    () => ({ path: paths.big, headers: inm(paths.big) }),
  ];
  const keyedPaths = [
    '/v1/artworks?page=2&limit=10',
    '/v1/artworks/104',
    '/v1/search?q=portrait',
    '/v1/rooms',
    '/v1/rooms/1',
    '/v1/collections',
  ];
  const keyedPicks: Array<() => Pick> = [
    ...keyedPaths.map((path) => () => ({ path, headers: br })),
    () => ({ path: '/v1/artworks?page=2&limit=10', headers: inm('/v1/artworks?page=2&limit=10') }),
    () => ({ path: '/v1/rooms', headers: inm('/v1/rooms') }),
  ];
  const ex = paths.exhibition;
  const guidePicks: Array<() => Pick> = [
    () => ({ path: ex }),
    () => ({ path: ex, headers: inm(ex) }),
    () => ({ path: `${ex}/suggestions?seed=${Math.floor(Math.random() * 50)}` }),
    () => ({ path: `${ex}/tour` }),
  ];
  const downloadPicks: Array<() => Pick> = [() => ({ path: paths.big, headers: { 'accept-encoding': 'identity' } })];
  return { publicPicks, downloadPicks, keyedPicks, guidePicks };
}

/** ETags of the routes the soak revalidates (one request each). */
async function etagsOf(port: number, key: string, exhibition: string, files: string[]): Promise<Map<string, string>> {
  const etags = new Map<string, string>();
  const keyed = ['/v1/artworks?page=2&limit=10', '/v1/rooms'];
  for (const path of ['/v1/rooms/1/slots', exhibition, ...files, ...keyed]) {
    const headers: Record<string, string> = keyed.includes(path) ? { 'x-api-key': key } : {};
    const a = await send(port, { path, headers, agent: false, localAddress: path === exhibition ? '127.5.255.1' : undefined });
    if (typeof a.headers.etag === 'string') etags.set(path, a.headers.etag);
  }
  return etags;
}

interface Tally {
  statuses: Record<number, number>;
  errors: number;
  requests: number;
  /** Requests per lane (public, whole downloads, keyed, guide reads). */
  lanes: Record<string, number>;
}

async function soakLoad(port: number, mix: ReturnType<typeof soakMix>, keys: string[], deadline: number): Promise<Tally> {
  const tally: Tally = { statuses: {}, errors: 0, requests: 0, lanes: {} };
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  const nextKey = pacer(keys, 520); // 120 a minute per key, with room to spare
  const guideAddress = addresses(5);
  const nextAddress = pacer(Array.from({ length: 40 }, guideAddress), 1_050); // 60 a minute per address
  const one = async (name: string, pick: Pick) => {
    tally.requests++;
    tally.lanes[name] = (tally.lanes[name] ?? 0) + 1;
    try {
      const a = await send(port, { ...pick, agent });
      tally.statuses[a.status] = (tally.statuses[a.status] ?? 0) + 1;
    } catch {
      tally.errors++;
    }
  };
  const lane = (name: string, picks: Array<() => Pick>, before: () => Promise<Partial<Pick>>) => async () => {
    for (let i = Math.floor(Math.random() * picks.length); Date.now() < deadline; i++) {
      const extra = await before();
      if (Date.now() >= deadline) break;
      const pick = picks[i % picks.length]!();
      await one(name, { ...pick, ...extra, headers: { ...pick.headers, ...extra.headers } });
    }
  };
  const publicLane = lane('public', mix.publicPicks, async () => ({}));
  const downloadLane = lane('whole 8 MB', mix.downloadPicks, async () => ({}));
  const keyedLane = lane('keyed', mix.keyedPicks, async () => ({ headers: { 'x-api-key': await nextKey() } }));
  const guideLane = lane('guide', mix.guidePicks, async () => ({ localAddress: await nextAddress() }));
  await Promise.all([
    ...Array.from({ length: 12 }, publicLane),
    downloadLane(),
    ...Array.from({ length: 4 }, keyedLane),
    ...Array.from({ length: 4 }, guideLane),
  ]);
  agent.destroy();
  return tally;
}

/** Mean of the last `window` samples ÷ mean of the `window` before them. */
function rssGrowth(samples: number[], window: number): number {
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
  return mean(samples.slice(-window)) / mean(samples.slice(-2 * window, -window));
}

async function checkSoak(server: Server, keys: string[], paths: { small: string; big: string; exhibition: string }): Promise<Row> {
  const etags = await etagsOf(server.port, keys[0]!, paths.exhibition, [paths.small, paths.big]);
  const mix = soakMix(paths, etags);
  const samples = [rssMb(server.pid)];
  const sampler = setInterval(() => samples.push(rssMb(server.pid)), 1_000);
  const started = Date.now();
  const tally = await soakLoad(server.port, mix, keys, started + SOAK_S * 1000);
  clearInterval(sampler);
  samples.push(rssMb(server.pid));
  const seconds = (Date.now() - started) / 1000;
  const window = Math.min(20, Math.floor(samples.length / 2));
  const growth = rssGrowth(samples, window);
  const fivexx = Object.entries(tally.statuses)
    .filter(([s]) => Number(s) >= 500)
    .reduce((sum, [, c]) => sum + c, 0);
  const ok = fivexx === 0 && tally.errors === 0 && growth <= RSS_GROWTH_MAX;
  const statuses = Object.entries(tally.statuses)
    .map(([s, c]) => `${s}: ${n(c)}`)
    .join(', ');
  const lanes = Object.entries(tally.lanes)
    .map(([lane, c]) => `${lane} ${n(c)}`)
    .join(', ');
  const mb = (x: number) => x.toFixed(0);
  const figures =
    `${seconds.toFixed(0)} s, ${n(tally.requests)} requests (${n(Math.round(tally.requests / seconds))}/s; ${lanes}; ${statuses}), ${fivexx} 5xx, ` +
    `${tally.errors} transport errors; RSS first ${mb(samples[0]!)} / last ${mb(samples.at(-1)!)} / max ${mb(Math.max(...samples))} MB, ` +
    `last ${window} s ÷ the ${window} s before ${growth.toFixed(3)}× (bound ${RSS_GROWTH_MAX}×)`;
  return { check: 'soak: mixed GETs, flat memory', ok, figures, before: '65 s, 0 5xx, flat memory' };
}

// ---------------------------------------------------------------------------------------------

function printTable(rows: Row[]): void {
  const width = Math.max(...rows.map((r) => r.check.length));
  console.log(`${'check'.padEnd(width)}  result  time   figures  [before]`);
  for (const r of rows) {
    const time = `${(r.seconds ?? 0).toFixed(0)} s`.padEnd(5);
    console.log(`${r.check.padEnd(width)}  ${r.ok ? 'ok    ' : 'FAILED'}  ${time}  ${r.figures}  [${r.before}]`);
  }
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'bench-soak-'));
  const env: Env = { dataDir: join(work, 'data'), stateDb: join(work, 'state/museum.db'), logDir: work };
  let server: Server | null = null;
  const started = Date.now();
  try {
    const fixture = await publishFixtureBake(env.dataDir);
    const big = await putContentFile(env.dataDir, randomBytes(BIG_BYTES), 'glb'); // streamed from disk (over 1 MiB)
    const small = fixture.files['room1.model_optimized']!.ref;
    const rows: Row[] = [];
    const timed = async (check: () => Promise<Row>) => {
      const at = Date.now();
      const row = await check();
      rows.push({ ...row, seconds: (Date.now() - at) / 1000 });
    };
    const at = Date.now();
    const killed = await checkKillNine(env);
    server = killed.server;
    rows.push({ ...killed.row, seconds: (Date.now() - at) / 1000 });
    const paths = {
      small: `/files/${small.sha256}.${small.ext}`,
      big: `/files/${big.sha256}.glb`,
      exhibition: `/v1/guide/exhibitions/${killed.exhibitions[0]}`,
    };
    const running = server;
    await timed(() => checkAbortedDownloads(running, paths.big));
    await timed(() => checkBackpressure(running));
    await timed(() => checkHostile(running, killed.keys[0]!));
    const soakKeys = await Promise.all(Array.from({ length: SOAK_KEYS }, (_, i) => createKey(env, `soak-load-${i}`)));
    await timed(() => checkSoak(running, [...killed.keys, ...soakKeys.filter((k) => k !== null)], paths));
    console.log(`root: ${ROOT}; ${((Date.now() - started) / 1000).toFixed(0)} s in all`);
    printTable(rows);
    if (rows.some((r) => !r.ok)) process.exitCode = 1;
  } finally {
    server?.child.kill('SIGTERM');
    if (server) await exited(server.child);
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
