/**
 * Public JSON bodies capped per route before parsing (issue 33, item 4; decisions.md "Bounds decided
 * after the second attack round"): the presence ping takes 1 KB, the guide registration 1 MB. A 0.8 MB
 * body of nested arrays to the anonymous ping is refused 413 without being read, let alone parsed.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

/** Send `text` and resolve with what came back once the server answered (the client keeps its side open). */
function firstAnswer(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => socket.write(text));
    let received = '';
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      const split = received.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(received)?.[1];
      if (split >= 0 && length !== undefined && received.length >= split + 4 + Number(length)) {
        socket.destroy();
        resolve(received);
      }
    });
    socket.on('error', reject);
    // A server waiting for the body it refuses on would never answer.
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within 5 s; received: ${received.slice(0, 80)}`));
    }, 5_000).unref();
  });
}

const PING = 'POST /v1/presence/ping HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n';
const nested = (bytes: number) => '['.repeat(bytes / 2) + ']'.repeat(bytes / 2);
// A fresh client address per request (TRUST_PROXY), so no per-IP budget answers first.
let n = 0;
const fresh = () => ({ 'x-forwarded-for': `10.1.${(++n >> 8) & 255}.${n & 255}` });

describe('public bodies capped per route before parsing', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { TRUST_PROXY: 'true' } });
  });
  afterAll(() => server?.close());

  it('the presence ping refuses 0.8 MB of nested arrays with 413 and its envelope', async () => {
    const res = await server.post('/v1/presence/ping', nested(800_000), { key: null, headers: fresh() });
    expect(await errorOf(res)).toEqual({ status: 413, code: 'PAYLOAD_TOO_LARGE', message: 'Request body exceeds 1 KB' });
  });

  it('the presence ping refuses on the announced length, before a byte of the body arrives', async () => {
    const head = `${PING}Content-Length: 800000\r\nX-Forwarded-For: 10.1.255.1\r\n\r\n`;
    expect(await firstAnswer(server.port, head)).toMatch(/^HTTP\/1\.1 413 /);
  });

  it('a chunked ping is refused once 1 KB has been read, while the rest has not been sent', async () => {
    const head = `${PING}Transfer-Encoding: chunked\r\nX-Forwarded-For: 10.1.255.2\r\n\r\n`;
    const chunk = '['.repeat(2048);
    expect(await firstAnswer(server.port, `${head}${chunk.length.toString(16)}\r\n${chunk}\r\n`)).toMatch(/^HTTP\/1\.1 413 /);
  });

  it('a ping within 1 KB is served', async () => {
    const res = await server.post('/v1/presence/ping', { handle: 'a'.repeat(20), pad: ' '.repeat(900) }, { key: null, headers: fresh() });
    expect(res.status).toBe(200);
  });

  it('the guide registration keeps its 1 MB: 0.9 MB reaches validation (400), 1.1 MB is 413', async () => {
    const almost = await server.post('/v1/guide/exhibitions', { pad: ' '.repeat(900_000) }, { key: null, headers: fresh() });
    expect((await errorOf(almost)).status).toBe(400);
    const over = await server.post('/v1/guide/exhibitions', { pad: ' '.repeat(1_100_000) }, { key: null, headers: fresh() });
    expect(await errorOf(over)).toEqual({ status: 413, code: 'PAYLOAD_TOO_LARGE', message: 'Request body exceeds 1 MB' });
  });
});
