/**
 * Presence (public): `GET /v1/presence/stream` (SSE: hello, arrived, left, library-search,
 * `: keepalive` every 25 s) and `POST /v1/presence/ping` (broadcasts that someone searched the
 * Library: the handle only, never a question). Nothing is persisted.
 */
import { z } from 'zod';
import type { RouteModule } from '../route-table.ts';
import { HttpError } from '../errors.ts';
import { withoutInvisibles } from '../guide/text.ts';
import type { PresenceHub } from '../presence/hub.ts';
import { SSE_HEADERS } from '../response.ts';
import type { Seat } from '../presence/seats.ts';

const HANDLE_MAX = 48;

/**
 * A handle as listeners see it: control characters, bidi overrides, invisible (zero-width)
 * characters and angle brackets removed, trimmed, at most 48 characters (code points, so no half
 * emoji), `anon` when nothing is left.
 */
function cleanHandle(handle: string | null | undefined): string {
  const cleaned = withoutInvisibles(handle ?? '')
    .replace(/[<>]/g, '')
    .trim();
  const clamped = Array.from(cleaned).slice(0, HANDLE_MAX).join('').trim();
  return clamped === '' ? 'anon' : clamped;
}

const PingBody = z.object({
  handle: z
    .string()
    .nullable()
    .optional()
    .describe(
      'shown to listeners; control, invisible (zero-width) characters and angle brackets removed, clamped to 48 characters; empty → anon',
    ),
});

const PingResponse = z.object({ data: z.object({ ok: z.boolean(), here: z.number().int().min(0) }) }).meta({ id: 'PresencePing' });

const busy = (message: string) => new HttpError(503, 'BUSY', message, { 'Retry-After': '30' });

/** A listener place for `ip` (counted across instances with Redis), or 503 BUSY. */
async function takeSeat(hub: PresenceHub, ip: string): Promise<Seat> {
  if (hub.full) throw busy('Presence is at capacity; try again shortly');
  const seat = await hub.admit(ip);
  if (!seat) throw busy('Too many presence listeners from this address; try again shortly');
  // Other requests may have taken the last places while this one waited for Redis.
  if (hub.full) {
    seat.release();
    throw busy('Presence is at capacity; try again shortly');
  }
  return seat;
}

export const presenceRoutes: RouteModule = (api, { presence: hub }) => {
  api.route({
    method: 'GET',
    path: '/v1/presence/stream',
    operationId: 'streamPresence',
    summary: 'Presence feed (Server-Sent Events)',
    tag: 'presence',
    access: 'public',
    response: {
      sse:
        'Frames `data: <JSON>` + blank line: `{type:"hello",here,at}` on connect, `{type:"arrived"|"left",here,at}` ' +
        '(above a few hundred listeners coalesced to at most one per short interval carrying the current `here`), ' +
        '`{type:"library-search",handle,at}`, and a `: keepalive` comment every 25 s. `at` is milliseconds since the epoch.',
    },
    errors: [503],
    async handler(ctx) {
      const seat = await takeSeat(hub, ctx.state.clientIp);
      ctx.status = 200;
      ctx.set(SSE_HEADERS);
      if (ctx.method === 'HEAD') return seat.release();
      // The hub owns the connection from here on (it sends the headers); nothing else is written for it.
      ctx.respond = false;
      hub.attach(ctx.req, ctx.res, seat);
    },
  });

  api.route({
    method: 'POST',
    path: '/v1/presence/ping',
    operationId: 'pingPresence',
    summary: 'Announce a Library search to presence listeners (handle only)',
    tag: 'presence',
    access: 'public',
    ipLimit: { name: 'presence-ping', perMinute: 12 },
    body: PingBody,
    bodyOptional: true,
    bodyLimit: 1024, // decisions: public bodies capped per route before parsing
    response: { json: PingResponse },
    handler(ctx, { body }) {
      const here = hub.librarySearch(cleanHandle(body?.handle));
      ctx.body = { data: { ok: true, here } };
    },
  });
};
