/**
 * A small SSE listener for presence tests: a real HTTP connection (node:http, no agent) whose
 * events and comments are parsed as they arrive (eventsource-parser), and a test waits for a matching event.
 */
import { request, type IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';

export interface PresenceFrame {
  type: string;
  here?: number;
  handle?: string;
  at?: number;
  [key: string]: unknown;
}

export interface SseListener {
  status: number;
  headers: IncomingMessage['headers'];
  events: PresenceFrame[];
  comments: string[];
  /** Resolves with the first event (already received or future) matching `match`. */
  next(match: (e: PresenceFrame) => boolean, timeoutMs?: number): Promise<PresenceFrame>;
  /** Resolves when the server ends or drops the connection. */
  ended: Promise<void>;
  /** Stop reading (the socket stays open: a slow listener). */
  pause(): void;
  close(): void;
  response: IncomingMessage;
}

export function openListener(url: string, options: { localAddress?: string } = {}): Promise<SseListener> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/v1/presence/stream`, { agent: false, localAddress: options.localAddress });
    req.on('error', reject);
    req.on('response', (res) => {
      const events: PresenceFrame[] = [];
      const comments: string[] = [];
      const waiters: Array<{ match: (e: PresenceFrame) => boolean; resolve: (e: PresenceFrame) => void }> = [];
      let endedResolve!: () => void;
      const ended = new Promise<void>((r) => (endedResolve = r));
      const parser = createParser({
        onComment: (comment) => comments.push(comment.trim()),
        onEvent: ({ data }) => {
          const event = JSON.parse(data) as PresenceFrame;
          events.push(event);
          for (const w of [...waiters]) {
            if (w.match(event)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(event);
            }
          }
        },
      });
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => parser.feed(chunk));
      res.on('error', () => undefined);
      res.on('close', () => endedResolve());
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        comments,
        ended,
        response: res,
        next(match, timeoutMs = 10_000) {
          const found = events.find(match);
          if (found) return Promise.resolve(found);
          return new Promise((resolveEvent, rejectEvent) => {
            const timer = setTimeout(
              () => rejectEvent(new Error(`no matching event within ${timeoutMs} ms; got ${JSON.stringify(events.slice(-5))}`)),
              timeoutMs,
            );
            waiters.push({
              match,
              resolve: (e) => {
                clearTimeout(timer);
                resolveEvent(e);
              },
            });
          });
        },
        pause() {
          res.pause();
        },
        close() {
          req.destroy();
        },
      });
    });
    req.end();
  });
}

/** Poll `probe` until it returns true (for state the server updates asynchronously). */
export async function eventually(probe: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await sleep(20);
  }
}
