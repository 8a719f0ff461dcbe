/**
 * The servers `make bench-serve` measures the museum against: what a user would pick instead, each
 * doing the museum's work for `GET /v1/rooms/{id}/slots` and its 304 — the slot JSON from memory, a
 * strong ETag answered with 304 on If-None-Match, a request id (the caller's sane one, else a fresh
 * one), the CORS headers, and one asynchronous pino access line per request through the museum's
 * own pino destination settings (LOG_DESTINATION, server/log.ts). Each rival sends the museum's very bytes
 * (checked by the bench), written the way its framework's documentation writes them.
 *
 *   spec     bare node:http doing that work and nothing else (the spec floor)
 *   fastify  fastify 5, its router, an onResponse hook for the line
 *   koa      Koa 3 + @koa/router, middleware for id, CORS and the line (on-finished)
 *   express  Express 5, middleware for id, CORS and the line (on-finished)
 *   floor    bare node:http sending the museum's bytes for slots, the GLB and the keyed read, with
 *            nothing else (no id, no CORS, no line): the yardstick of the /files and keyed rows
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import express from 'express';
import fastify from 'fastify';
import Koa from 'koa';
import onFinished from 'on-finished';
import pino, { type Logger } from 'pino';
import { LOG_DESTINATION } from '../server/log.ts';

export const RIVALS = ['spec', 'fastify', 'koa', 'express', 'floor'] as const;
export type Rival = (typeof RIVALS)[number];

/** A response as it is on the wire: its status, raw header list (names as sent) and body. */
export interface WireResponse {
  status: number;
  headers: string[];
  body: Buffer;
}

/** The museum's responses the rivals send, fetched once from a museum (less Date, Connection, Keep-Alive and the request id). */
export interface RivalBytes {
  slots: WireResponse;
  slotsNotModified: WireResponse;
  glb: WireResponse;
  artworks: WireResponse;
}

export const SLOTS_ROUTE = '/v1/rooms/:id/slots';
const ROOM_ID = /^[1-9]\d{0,15}$/;
const INCOMING_ID = /^[\w.:-]{1,64}$/;

export const headerOf = (response: WireResponse, name: string): string | null => {
  const at = response.headers.findIndex((n) => n.toLowerCase() === name);
  return at < 0 ? null : response.headers[at + 1]!;
};

/** Request ids as the museum makes them: the caller's sane one, else a process prefix and a counter. */
function requestIds(): (incoming: string | string[] | undefined) => string {
  const prefix = randomBytes(9).toString('base64url');
  let sequence = 0;
  return (incoming) => (typeof incoming === 'string' && INCOMING_ID.test(incoming) ? incoming : `${prefix}-${(++sequence).toString(36)}`);
}

/** What a rival needs of the slots responses: the room's bytes, ETag and header objects (less the id). */
function slotResponses(bytes: RivalBytes) {
  const asObject = (response: WireResponse) => {
    const headers: Record<string, string> = {};
    for (let i = 0; i < response.headers.length; i += 2) headers[response.headers[i]!] = response.headers[i + 1]!;
    return headers;
  };
  return {
    etag: headerOf(bytes.slots, 'etag')!,
    body: bytes.slots.body,
    ok: asObject(bytes.slots),
    notModified: asObject(bytes.slotsNotModified),
  };
}

const NOT_FOUND = JSON.stringify({ errors: [{ message: 'Not found', extensions: { code: 'NOT_FOUND' } }] });

/** The access line every rival writes: the museum's fields. */
function accessLogger(logPath: string): Logger {
  return pino({ base: undefined }, pino.destination({ ...LOG_DESTINATION, dest: logPath }));
}
const line = (log: Logger, requestId: string, method: string, path: string, status: number, started: number) =>
  log.info({ requestId, method, path, status, ms: Math.round((performance.now() - started) * 100) / 100 }, 'request');

/** The path of a URL, without its query. */
const pathOf = (url: string) => {
  const at = url.indexOf('?');
  return at < 0 ? url : url.slice(0, at);
};

function specServer(bytes: RivalBytes, log: Logger): Server {
  const slots = slotResponses(bytes);
  const idOf = requestIds();
  const ok = Object.entries(slots.ok).flat();
  const notModified = Object.entries(slots.notModified).flat();
  return createServer((req, res) => {
    const started = performance.now();
    const requestId = idOf(req.headers['x-request-id']);
    const path = pathOf(req.url!);
    const match = /^\/v1\/rooms\/([^/]+)\/slots$/.exec(path);
    if (req.method !== 'GET' || !match || match[1] !== '1') {
      res.writeHead(404, [
        'X-Request-Id',
        requestId,
        'Content-Type',
        'application/json; charset=utf-8',
        'Access-Control-Allow-Origin',
        '*',
      ]);
      res.end(NOT_FOUND);
    } else if (req.headers['if-none-match'] === slots.etag) {
      res.writeHead(304, ['X-Request-Id', requestId, ...notModified]);
      res.end();
    } else {
      res.writeHead(200, ['X-Request-Id', requestId, ...ok]);
      res.end(slots.body);
    }
    line(log, requestId, req.method!, path, res.statusCode, started);
  });
}

async function fastifyServer(bytes: RivalBytes, log: Logger): Promise<Server> {
  const slots = slotResponses(bytes);
  const idOf = requestIds();
  const app = fastify({ logger: false, genReqId: (req) => idOf(req.headers['x-request-id']) });
  const cors = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': '*' };
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('X-Request-Id', req.id).headers(cors);
    done();
  });
  app.addHook('onResponse', (req, reply, done) => {
    line(log, req.id, req.method, pathOf(req.url), reply.statusCode, performance.now() - reply.elapsedTime);
    done();
  });
  app.get<{ Params: { id: string } }>(SLOTS_ROUTE, (req, reply) => {
    if (!ROOM_ID.test(req.params.id) || req.params.id !== '1')
      return reply.code(404).type('application/json; charset=utf-8').send(NOT_FOUND);
    if (req.headers['if-none-match'] === slots.etag) return reply.code(304).headers(slots.notModified).send();
    return reply.headers(slots.ok).send(slots.body);
  });
  await app.ready();
  return app.server;
}

/** The access line when the response is done, as pino-http and morgan do. */
const logWhenFinished = (log: Logger, req: IncomingMessage, res: ServerResponse, requestId: string, path: string) => {
  const started = performance.now();
  onFinished(res, () => line(log, requestId, req.method!, path, res.statusCode, started));
};

function koaServer(bytes: RivalBytes, log: Logger): Server {
  const slots = slotResponses(bytes);
  const idOf = requestIds();
  const app = new Koa();
  app.use(async (ctx, next) => {
    const requestId = idOf(ctx.get('x-request-id') || undefined);
    logWhenFinished(log, ctx.req, ctx.res, requestId, ctx.path);
    ctx.set('X-Request-Id', requestId);
    ctx.set({ 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': '*' });
    await next();
  });
  const router = new Router();
  router.get(SLOTS_ROUTE, (ctx) => {
    if (!ROOM_ID.test(ctx.params.id!) || ctx.params.id !== '1') {
      ctx.status = 404;
      ctx.type = 'application/json; charset=utf-8';
      ctx.body = NOT_FOUND;
      return;
    }
    if (ctx.get('if-none-match') === slots.etag) {
      ctx.set(slots.notModified);
      ctx.status = 304;
      return;
    }
    ctx.set(slots.ok);
    ctx.body = slots.body;
  });
  app.use(router.routes());
  return createServer(app.callback());
}

function expressServer(bytes: RivalBytes, log: Logger): Server {
  const slots = slotResponses(bytes);
  const idOf = requestIds();
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use((req, res, next) => {
    const requestId = idOf(req.headers['x-request-id']);
    logWhenFinished(log, req, res, requestId, req.path);
    res.set('X-Request-Id', requestId);
    res.set({ 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': '*' });
    next();
  });
  app.get(SLOTS_ROUTE, (req, res) => {
    if (!ROOM_ID.test(req.params.id!) || req.params.id !== '1') {
      res.status(404).type('application/json; charset=utf-8').send(NOT_FOUND);
      return;
    }
    if (req.headers['if-none-match'] === slots.etag) {
      res.status(304).set(slots.notModified).end();
      return;
    }
    res.set(slots.ok).end(slots.body);
  });
  return createServer(app);
}

/** The museum's bytes and nothing else, header lists built once: the floor of the /files and keyed rows. */
function floorServer(bytes: RivalBytes): Server {
  const prepared = (response: WireResponse) => {
    const type = headerOf(response, 'content-type')!;
    return { body: response.body, list: ['Content-Type', type, 'Content-Length', String(response.body.length)] };
  };
  const responses = new Map([
    ['/slots', prepared(bytes.slots)],
    ['/glb', prepared(bytes.glb)],
  ]);
  const keyed = prepared(bytes.artworks);
  return createServer((req, res) => {
    const response = responses.get(req.url!) ?? keyed;
    res.writeHead(200, response.list);
    res.end(response.body);
  });
}

/** Start one rival on an ephemeral port; its URL. */
export async function serveRival(rival: Rival, bytes: RivalBytes, logPath: string): Promise<{ url: string; close: () => Promise<void> }> {
  const log = accessLogger(logPath);
  const server =
    rival === 'spec'
      ? specServer(bytes, log)
      : rival === 'fastify'
        ? await fastifyServer(bytes, log)
        : rival === 'koa'
          ? koaServer(bytes, log)
          : rival === 'express'
            ? expressServer(bytes, log)
            : floorServer(bytes);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => log.flush(() => done()));
      }),
  };
}
