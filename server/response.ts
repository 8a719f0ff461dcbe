/** What several routes share about their responses: putting one on a context, event-stream headers, noticing a client gone mid-response. */
import type { ServerResponse } from 'node:http';
import type { MuseumContext, PreparedResponse } from './types.ts';

/** Put `response` on `ctx` (snapshot responses, files, error envelopes): a null body is none (304, HEAD), so Koa sends the status alone. */
export function respondWith(ctx: Pick<MuseumContext, 'status' | 'set' | 'body'>, response: PreparedResponse): void {
  ctx.status = response.status;
  ctx.set(response.headers);
  if (response.body !== null) ctx.body = response.body;
}

/** An event stream's headers: never cached or transformed, not buffered by a proxy (nginx's X-Accel-Buffering). */
export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream', // UTF-8 by definition (the HTML standard): no charset parameter
  'Cache-Control': 'no-cache, no-transform',
  'X-Accel-Buffering': 'no',
} as const;

/** A signal that fires when the client goes away before its response was completely sent (upstream work stops). */
export function clientGone(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}
