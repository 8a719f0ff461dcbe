/**
 * The exchange's answer as a client reads it (server/exchange.ts, written by `respond`), over a real
 * node server: a header set again keeps its place with its new value, a removed one is gone and the
 * others keep theirs, an empty status sends no body headers, a JSON value or text gets its type and
 * length, a HEAD gets the headers and no body, and a stream is piped.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Exchange } from '../../server/exchange.ts';
import { respond } from '../../server/exchange.ts';
import { requestHandler } from '../../server/stages.ts';

let server: Server | null = null;
afterEach(() => new Promise<void>((done) => (server ? server.close(() => done()) : done())));

/** Serve one exchange built by `build` and written by `respond`; the raw answer. */
async function answerOf(build: (ex: Exchange) => void, method = 'GET') {
  const log = pino({ level: 'silent' });
  server = createServer(requestHandler([{ answer: (ex) => respond(ex, () => undefined) }, { request: build }], log));
  await new Promise<void>((done) => server!.listen(0, '127.0.0.1', done));
  const port = (server.address() as AddressInfo).port;
  return new Promise<{ status: number; headers: Record<string, unknown>; rawHeaders: string[]; body: Buffer }>((done, fail) =>
    request({ port, host: '127.0.0.1', path: '/', method }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done({ status: res.statusCode!, headers: res.headers, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }));
    })
      .on('error', fail)
      .end(),
  );
}

/** The answer's header names in the order sent, less node's own. */
const names = (rawHeaders: string[]) => rawHeaders.filter((_, i) => i % 2 === 0).filter((n) => !/^(date|connection|keep-alive)$/i.test(n));

describe('the exchange', () => {
  it('sends a header set again in its place with its last value, and drops a removed one', async () => {
    const res = await answerOf((ex) => {
      ex.set({ 'X-A': 'a', 'X-B': 'b1' });
      ex.set('X-C', 'c');
      ex.set('X-B', 'b2');
      ex.remove('X-A');
      ex.set('X-D', 'd');
      ex.remove('X-Missing');
      ex.body = Buffer.from('{}');
    });
    expect(names(res.rawHeaders)).toEqual(['X-B', 'X-C', 'X-D', 'Content-Type', 'Content-Length']);
    expect(res.headers['x-b']).toBe('b2');
    expect(res.headers['x-c']).toBe('c');
    expect(res.headers['x-a']).toBeUndefined();
  });

  it('sends no body headers with an empty status, and keeps the others', async () => {
    const res = await answerOf((ex) => {
      ex.set({ ETag: '"x"', 'Content-Type': 'application/json', 'Content-Length': '2' });
      ex.status = 304;
      ex.body = Buffer.from('{}');
    });
    expect(res.status).toBe(304);
    expect(names(res.rawHeaders)).toEqual(['ETag']);
    expect(res.body.length).toBe(0);
  });

  it('serializes a JSON value and text with their type and length; a HEAD gets the same headers and no body', async () => {
    const json = await answerOf((ex) => void (ex.body = { a: 'é' }));
    expect(json.status).toBe(200);
    expect(json.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(json.body.toString())).toEqual({ a: 'é' });
    expect(Number(json.headers['content-length'])).toBe(json.body.length);
    const head = await answerOf((ex) => void (ex.body = { a: 'é' }), 'HEAD');
    expect(head.headers['content-length']).toBe(json.headers['content-length']);
    expect(head.body.length).toBe(0);
    const text = await answerOf((ex) => void (ex.body = 'plain'));
    expect(text.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(text.body.toString()).toBe('plain');
  });

  it('pipes a stream body', async () => {
    const res = await answerOf((ex) => {
      ex.type = 'application/octet-stream';
      ex.body = Readable.from([Buffer.from('one '), Buffer.from('two')]);
    });
    expect(res.body.toString()).toBe('one two');
  });
});
