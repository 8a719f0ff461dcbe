/**
 * Clients that hold connections without finishing a request (issue 11, items 5 and 8), over raw
 * sockets: slow bodies and slow headers are answered 408 and closed, event streams are not cut;
 * refused requests are answered without their body being read, and closed; connections per IP are
 * capped; requests node refuses before Koa (no Host, an unknown Expect) get the envelope; a client
 * leaving mid-body is logged as the client leaving.
 */
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, openFilesLimit } from '../../server/config.ts';
import { capturedLogger } from '../helpers/logs.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** A raw connection: what it received, whether the server closed it, and a way to send more. */
interface RawClient {
  socket: net.Socket;
  received(): string;
  /** Resolves when the server closed the connection (or rejects after `boundMs`). */
  closed(boundMs?: number): Promise<void>;
  isClosed(): boolean;
}

function connect(port: number, first: string, localAddress?: string): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let closed = false;
    const waiters: Array<() => void> = [];
    const socket = net.connect({ port, host: '127.0.0.1', localAddress }, () => {
      socket.write(first);
      resolve({
        socket,
        received: () => Buffer.concat(chunks).toString('latin1'),
        isClosed: () => closed,
        closed: (boundMs = 10_000) =>
          new Promise<void>((done, fail) => {
            if (closed) return done();
            const timer = setTimeout(() => fail(new Error(`the server kept the connection open for ${boundMs} ms`)), boundMs);
            waiters.push(() => {
              clearTimeout(timer);
              done();
            });
          }),
      });
    });
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => undefined); // a reset after our answer is a close too
    socket.on('close', () => {
      closed = true;
      waiters.splice(0).forEach((w) => w());
    });
    socket.once('error', reject);
  });
}

/** Status line, headers (lower-case names) and parsed JSON body of the first response in `text`. */
function parse(text: string) {
  const split = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
  const body = text.slice(split + 4, split + 4 + Number(headers['content-length'] ?? 0));
  return {
    status: Number(statusLine.split(' ')[1]),
    headers,
    json: body ? (JSON.parse(body) as { errors: Array<{ extensions: { code: string } }> }) : null,
  };
}

const slowPost = (path: string, headers = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n${headers}\r\n{`;

describe('time to receive a request', () => {
  let server: TestServer;
  const logs = capturedLogger('info');
  beforeAll(async () => {
    server = await startTestServer({
      env: { REQUEST_TIMEOUT_MS: '800', HEADERS_TIMEOUT_MS: '500', PRESENCE_KEEPALIVE_MS: '200' },
      log: logs.log,
    });
  });
  afterAll(() => server?.close());

  it('answers 408 with the envelope and closes a body that trickles in, a byte at a time', async () => {
    const client = await connect(server.port, slowPost('/v1/guide/exhibitions'));
    const trickle = setInterval(() => client.socket.writable && client.socket.write(' '), 100);
    try {
      await client.closed();
    } finally {
      clearInterval(trickle);
    }
    const res = parse(client.received());
    expect(res.status).toBe(408);
    expect(res.headers['x-request-id']).toBeTruthy();
    expect(res.json?.errors[0]?.extensions.code).toBe('BAD_REQUEST');
  });

  it('answers 408 and closes headers that never end', async () => {
    const client = await connect(server.port, 'GET /v1 HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => client.socket.writable && client.socket.write('X-A: b\r\n'), 100);
    try {
      await client.closed();
    } finally {
      clearInterval(trickle);
    }
    expect(parse(client.received()).status).toBe(408);
  });

  it('does not cut an event stream running longer than the request timeout', async () => {
    const client = await connect(server.port, 'GET /v1/presence/stream HTTP/1.1\r\nHost: x\r\n\r\n');
    await sleep(2_500); // three request timeouts
    expect(client.isClosed()).toBe(false);
    const before = client.received().length;
    await sleep(500); // keepalives keep coming
    expect(client.received().length).toBeGreaterThan(before);
    expect(client.received()).toMatch(/^HTTP\/1.1 200/);
    client.socket.destroy();
  });

  it('logs a client that leaves mid-body as leaving, not as a 500 with a stack', async () => {
    const client = await connect(server.port, slowPost('/v1/guide/exhibitions'));
    await sleep(100);
    client.socket.destroy();
    await expect
      .poll(() => logs.lines.some((l) => l.msg === 'client left before sending its whole request'), { timeout: 5_000 })
      .toBe(true);
    expect(logs.lines.filter((l) => l.msg === 'unhandled error' || l.level === 50)).toEqual([]);
    await expect
      .poll(() => logs.lines.some((l) => l.msg === 'request' && l.path === '/v1/guide/exhibitions' && l.status === 499))
      .toBe(true);
  });
});

describe('refused requests are answered without reading their body', () => {
  let server: TestServer;
  beforeAll(async () => {
    // A long request timeout: what closes these connections must be the refusal.
    server = await startTestServer({
      env: { REQUEST_TIMEOUT_MS: '60000', HEADERS_TIMEOUT_MS: '60000', LIBRARY_UPSTREAM_URL: 'http://127.0.0.1:9' },
    });
  });
  afterAll(() => server?.close());

  it('401: answers at once and closes while the body is still announced', async () => {
    const client = await connect(server.port, slowPost('/v1/library/ask'));
    await client.closed(5_000);
    const res = parse(client.received());
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe('close');
    expect(res.json?.errors[0]?.extensions.code).toBe('UNAUTHORIZED');
  });

  it('Expect: 100-continue — a refused request gets its response, never 100 Continue; an accepted one gets 100 Continue first', async () => {
    const refused = await connect(server.port, slowPost('/v1/library/ask', 'Expect: 100-continue\r\n').slice(0, -1)); // headers only
    await refused.closed(5_000);
    expect(refused.received()).toMatch(/^HTTP\/1\.1 401 /);
    expect(refused.received()).not.toContain('100 Continue');

    const accepted = await connect(
      server.port,
      'POST /v1/presence/ping HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: ' +
        '100-continue\r\nConnection: close\r\n\r\n',
    );
    await expect.poll(() => accepted.received()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n$/);
    accepted.socket.write('{}');
    await accepted.closed(5_000);
    expect(accepted.received()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
  });

  it('429: past the presence ping limit, answers at once and closes', async () => {
    // Spend the budget (12 a minute; a test before may have used some).
    let status = 200;
    for (let i = 0; i < 13 && status === 200; i++) status = (await server.post('/v1/presence/ping', {}, { key: null })).status;
    expect(status).toBe(429);
    const client = await connect(server.port, slowPost('/v1/presence/ping'));
    await client.closed(5_000);
    const res = parse(client.received());
    expect(res.status).toBe(429);
    expect(res.headers.connection).toBe('close');
    expect(res.headers['retry-after']).toBe('60');
  });
});

describe('connections per IP', () => {
  let server: TestServer;
  const logs = capturedLogger('info');
  beforeAll(async () => {
    server = await startTestServer({ env: { MAX_CONNECTIONS_PER_IP: '4' }, log: logs.log });
  });
  afterAll(() => server?.close());

  it('answers one connection past the cap with 503 BUSY and closes it; a place frees when one closes', async () => {
    const held = await Promise.all(Array.from({ length: 4 }, () => connect(server.port, '')));
    await sleep(100); // the server has seen them
    // Its request is not served: the one answer is the refusal.
    const refused = await connect(server.port, 'GET /v1 HTTP/1.1\r\nHost: x\r\n\r\n');
    await refused.closed(5_000);
    expect(refused.received().match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(logs.lines.filter((l) => l.msg === 'request')).toEqual([]);
    const res = parse(refused.received());
    expect(res.status).toBe(503);
    expect(res.json?.errors[0]?.extensions.code).toBe('BUSY');
    expect(res.headers['x-request-id']).toBeTruthy();
    held[0]!.socket.destroy();
    await sleep(100);
    const again = await rawRequest(server.port, 'GET /v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(again.status).toBe(200);
    for (const c of held) c.socket.destroy();
  });

  const heldByServer = () => new Promise<number>((done, fail) => server.server.getConnections((err, n) => (err ? fail(err) : done(n))));

  it('holds at most the cap for one address opening ten times as many, refused ones closed at once; another address still gets /healthz (issue 43)', async () => {
    // Open, no request yet: each held socket stays open, as a flood's would.
    const held = await Promise.all(Array.from({ length: 4 }, () => connect(server.port, '', '127.0.43.1')));
    await sleep(100);
    const flood = await Promise.all(Array.from({ length: 36 }, () => connect(server.port, '', '127.0.43.1')));
    // Closed at once, not after a lingering close (5 s): the client never ends its side here.
    await Promise.all(flood.map((c) => c.closed(2_000)));
    expect(flood.every((c) => parse(c.received()).status === 503)).toBe(true);
    // The server closes each refused socket as its client's end arrives: within moments, not a 5 s linger.
    await expect.poll(heldByServer, { timeout: 500 }).toBeLessThanOrEqual(4);
    const other = await connect(server.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', '127.0.43.2');
    await other.closed(5_000);
    expect(parse(other.received()).status).toBe(200);
    for (const c of held) c.socket.destroy();
  });
});

describe('connections in all (issue 43)', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { MAX_CONNECTIONS_PER_IP: '4', MAX_CONNECTIONS: '6' } });
  });
  afterAll(() => server?.close());

  it('holds at most MAX_CONNECTIONS sockets whatever the number of addresses; a place frees when one closes', async () => {
    const addresses = ['127.0.44.1', '127.0.44.2', '127.0.44.3'];
    const clients = (
      await Promise.all(addresses.map((ip) => Promise.all(Array.from({ length: 4 }, () => connect(server.port, '', ip)))))
    ).flat();
    await sleep(200);
    const held = await new Promise<number>((done, fail) => server.server.getConnections((err, n) => (err ? fail(err) : done(n))));
    expect(held).toBeLessThanOrEqual(6);
    expect(clients.filter((c) => !c.isClosed()).length).toBeLessThanOrEqual(6);
    for (const c of clients) c.socket.destroy();
    await sleep(200);
    const res = await rawRequest(server.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(res.status).toBe(200);
  });

  it('defaults to half the open-files limit of /proc/self/limits', () => {
    const limit = openFilesLimit();
    expect(limit).toBeGreaterThan(0);
    expect(loadConfig({}).maxConnections).toBe(Math.max(64, Math.floor(limit! / 2)));
  });
});

describe('requests node refuses before Koa', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.close());

  it.each([
    ['no Host header', 'GET /v1 HTTP/1.1\r\n\r\n', 400, 'BAD_REQUEST'],
    [
      'an unknown Expect',
      'POST /v1/presence/ping HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\n{}',
      417,
      'BAD_REQUEST',
    ],
  ])('answers %s with the envelope and a request id', async (_name, request, status, code) => {
    const res = await rawRequest(server.port, request);
    expect(res.status).toBe(status);
    expect(res.headers['x-request-id']).toMatch(/^[\w-]{12}-[0-9a-z]+$/);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(res.body.toString()).errors[0].extensions.code).toBe(code);
  });

  it('still serves HTTP/1.0 requests without Host', async () => {
    const res = await rawRequest(server.port, 'GET /v1 HTTP/1.0\r\n\r\n');
    expect(res.status).toBe(200);
  });
});
