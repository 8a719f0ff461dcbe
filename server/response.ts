/** What several routes share about their responses: event-stream headers, and noticing a client gone mid-answer. */
import type { ServerResponse } from 'node:http';

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
