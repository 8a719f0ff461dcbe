/**
 * Refusals that must reach the client (issue 33, item 3): a request refused before its body is read
 * (413, 401) is answered while the client is still sending. The server half-closes, reads and
 * discards what still comes (bounded) and only then closes, so Node's `http` client and `fetch`
 * read the status and the envelope instead of EPIPE/ECONNRESET. The linger is bounded: a client
 * that sends for ever is cut off.
 */
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LINGER } from '../../../server/sockets/lingering-close.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const JSON_TYPE = { 'content-type': 'application/json' };

interface Refusal {
  status: number;
  code: string | undefined;
}

/** POST `size` bytes with node's http client; the status and envelope code, or the client's error. */
function httpPost(port: number, path: string, size: number, headers: Record<string, string> = {}): Promise<Refusal> {
  return new Promise((resolve, reject) => {
    const req = http.request({ port, host: '127.0.0.1', path, method: 'POST', agent: false, headers: { ...JSON_TYPE, ...headers } });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('error', reject);
      res.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { errors: Array<{ extensions: { code: string } }> };
        // The request's own error (EPIPE while still sending) would come after the answer: wait for the request to finish.
        req.on('close', () => resolve({ status: res.statusCode!, code: body.errors[0]?.extensions.code }));
      });
    });
    req.end(Buffer.alloc(size, 0x20));
  });
}

async function fetchPost(url: string, size: number, headers: Record<string, string> = {}): Promise<Refusal> {
  const res = await fetch(url, { method: 'POST', body: Buffer.alloc(size, 0x20), headers: { ...JSON_TYPE, ...headers } });
  const body = (await res.json()) as { errors: Array<{ extensions: { code: string } }> };
  return { status: res.status, code: body.errors[0]?.extensions.code };
}

const MB = 1024 * 1024;
/** 10 at a time, `total` in all: each one's answer, or the error its client saw. */
async function inBatches<T>(total: number, send: () => Promise<T>): Promise<Array<T | Error>> {
  const results: Array<T | Error> = [];
  for (let i = 0; i < total; i += 10) results.push(...(await Promise.all(Array.from({ length: 10 }, () => send().catch((e: Error) => e)))));
  return results;
}

describe('refused large bodies: every client reads its response', () => {
  let server: TestServer;
  let n = 0;
  // A fresh client address per request (TRUST_PROXY): the guide's per-IP budget must not answer 429 first.
  const fresh = () => ({ 'x-forwarded-for': `10.0.${(++n >> 8) & 255}.${n & 255}` });
  beforeAll(async () => {
    server = await startTestServer({ env: { TRUST_PROXY: 'true' } });
  });
  afterAll(() => server?.close());

  const cases = [
    ['5 MB to the guide registration', '/v1/guide/exhibitions', 5 * MB, 413, 'PAYLOAD_TOO_LARGE'],
    ['2 MB to the library search without a key', '/v1/library/search', 2 * MB, 401, 'UNAUTHORIZED'],
    ['10 MB to the guide registration', '/v1/guide/exhibitions', 10 * MB, 413, 'PAYLOAD_TOO_LARGE'],
  ] as const;

  it.each(cases)(
    "node's http client: %s, 100 times",
    async (_name, path, size, status, code) => {
      const results = await inBatches(100, () => httpPost(server.port, path, size, fresh()));
      expect(results.filter((r) => r instanceof Error).map((e) => (e as NodeJS.ErrnoException).code ?? String(e))).toEqual([]);
      expect(results).toEqual(Array.from({ length: 100 }, () => ({ status, code })));
    },
    60_000,
  );

  it('a chunked body refused once it is read past 1 MB: 413 with its envelope, 20 times', async () => {
    const chunked = () => ({ 'transfer-encoding': 'chunked', ...fresh() });
    const results = await inBatches(20, () => httpPost(server.port, '/v1/guide/exhibitions', 3 * MB, chunked()));
    expect(results).toEqual(Array.from({ length: 20 }, () => ({ status: 413, code: 'PAYLOAD_TOO_LARGE' })));
  });

  it.each(cases)(
    'fetch: %s, 100 times',
    async (_name, path, size, status, code) => {
      const results = await inBatches(100, () => fetchPost(server.url + path, size, fresh()));
      expect(results.filter((r) => r instanceof Error).map((e) => String((e as Error).cause ?? e))).toEqual([]);
      expect(results).toEqual(Array.from({ length: 100 }, () => ({ status, code })));
    },
    60_000,
  );
});

describe('other refusals while the body is still coming', () => {
  let server: TestServer;
  let capped: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    capped = await startTestServer({ env: { MAX_CONNECTIONS_PER_IP: '2' } });
  });
  afterAll(async () => {
    await server?.close();
    await capped?.close();
  });

  it('429 past the presence ping budget: 2 MB bodies read their 429, 20 times', async () => {
    let status = 200;
    for (let i = 0; i < 13 && status === 200; i++) status = (await server.post('/v1/presence/ping', {}, { key: null })).status;
    expect(status).toBe(429);
    const results = await inBatches(20, () => httpPost(server.port, '/v1/presence/ping', 2 * MB));
    expect(results).toEqual(Array.from({ length: 20 }, () => ({ status: 429, code: 'RATE_LIMITED' })));
  });

  it('503 past the connections per IP: a client sending 2 MB on a refused connection reads its 503', async () => {
    const hold = () =>
      new Promise<net.Socket>((resolve) => {
        const socket = net.connect(capped.port, '127.0.0.1', () => resolve(socket));
      });
    const held = [await hold(), await hold()];
    await new Promise((resolve) => setTimeout(resolve, 100)); // the server has counted them
    try {
      const results = await inBatches(10, () => httpPost(capped.port, '/v1/library/search', 2 * MB));
      expect(results).toEqual(Array.from({ length: 10 }, () => ({ status: 503, code: 'BUSY' })));
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});

describe('the linger is bounded', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { REQUEST_TIMEOUT_MS: '60000', HEADERS_TIMEOUT_MS: '60000' } });
  });
  afterAll(() => server?.close());

  /** A raw client that keeps sending after its refusal; resolves with what it received once the server closed. */
  function sendForever(head: string, chunk: number, everyMs: number): Promise<{ received: string; ms: number }> {
    return new Promise((resolve) => {
      const started = Date.now();
      const chunks: Buffer[] = [];
      const filler = Buffer.alloc(chunk, 0x20);
      let timer: NodeJS.Timeout | undefined;
      // Half-open allowed: the client goes on sending after the server ended its side. The body starts
      // once the head is written: a timer started before the connection could put filler ahead of it.
      const socket = net.connect({ port: server.port, host: '127.0.0.1', allowHalfOpen: true }, () => {
        socket.write(head);
        timer = setInterval(() => socket.writable && socket.write(filler), everyMs);
      });
      socket.on('data', (d: Buffer) => chunks.push(d));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ received: Buffer.concat(chunks).toString('latin1'), ms: Date.now() - started });
      });
    });
  }

  const head = (length: number) =>
    `POST /v1/library/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

  it('a client trickling for ever after its refusal is cut at the time bound', async () => {
    const { received, ms } = await sendForever(head(1e12), 10, 50);
    expect(received).toMatch(/^HTTP\/1\.1 401 /);
    expect(ms).toBeGreaterThanOrEqual(LINGER.ms - 200);
    expect(ms).toBeLessThan(LINGER.ms + 3_000);
  }, 20_000);

  it('a client flooding after its refusal is cut at the size bound, well before the time bound', async () => {
    const { received, ms } = await sendForever(head(1e12), 256 * 1024, 1);
    expect(received).toMatch(/^HTTP\/1\.1 401 /);
    expect(ms).toBeLessThan(LINGER.ms);
  }, 20_000);
});
