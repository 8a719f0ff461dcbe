/**
 * The shared machinery of the upstream fakes: a real HTTP server on an ephemeral port that records
 * what it received and can be told, per path, to misbehave:
 *   slow     answer after a delay
 *   timeout  never answer (the socket stays open)
 *   status   answer with that status (5xx) and a JSON error body
 *   garbage  answer 200 with a body that is not what the contract says (not JSON)
 *   reset    destroy the connection (immediately, or after N stream frames)
 *   stall    streams: send N frames, then nothing more, without ending
 * A fault applies to every matching request, or to the next `times` of them.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

type Fault =
  | { kind: 'slow'; ms: number; times?: number }
  | { kind: 'timeout'; times?: number }
  | { kind: 'status'; status: number; times?: number }
  | { kind: 'garbage'; times?: number }
  | { kind: 'reset'; afterFrames?: number; times?: number }
  | { kind: 'stall'; afterFrames: number; times?: number };

interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: string;
  at: number;
  /** The status answered (0 while none). */
  status: number;
  /** The client went away before the response was complete (e.g. it cancelled a stream). */
  cancelled: boolean;
  /** The response was completely sent. */
  finished: boolean;
  /** The fault applied, if any. */
  fault?: Fault['kind'];
}

interface FakeRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: string;
}

/** Writes SSE frames, obeying stream faults: `frame()` returns false once the handler must stop. */
export interface FrameWriter {
  frame(text: string): boolean;
  end(): void;
  /** True once the client is gone or a fault stopped the stream. */
  readonly stopped: boolean;
}

export type FakeHandler = (
  req: FakeRequest,
  res: ServerResponse,
  tools: { frames: (headers?: Record<string, string>) => FrameWriter; record: RecordedRequest },
) => void | Promise<void>;

export interface FakeServer {
  url: string;
  /** Everything received, oldest first (bounded to the last 5,000). */
  readonly requests: RecordedRequest[];
  /** Requests whose path matches. */
  requestsTo(path: string | RegExp): RecordedRequest[];
  /** Make requests to `path` (exact, or a pattern) misbehave. */
  fault(path: string | RegExp, fault: Fault): void;
  clearFaults(): void;
  /** Resolve once a recorded request satisfies `test` (polling; for asynchronous effects). */
  waitFor(test: (r: RecordedRequest) => boolean, timeoutMs?: number): Promise<RecordedRequest>;
  close(): Promise<void>;
}

const MAX_RECORDS = 5_000;

export async function startFakeServer(handler: FakeHandler): Promise<FakeServer> {
  const requests: RecordedRequest[] = [];
  const faults: Array<{ path: string | RegExp; fault: Fault; left: number }> = [];
  const timers = new Set<NodeJS.Timeout>();
  const matches = (pattern: string | RegExp, path: string) => (typeof pattern === 'string' ? pattern === path : pattern.test(path));

  const takeFault = (path: string): Fault | undefined => {
    const entry = faults.find((f) => matches(f.path, path) && f.left > 0);
    if (!entry) return undefined;
    entry.left--;
    return entry.fault;
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const record: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body: Buffer.concat(chunks).toString('utf8'),
      at: Date.now(),
      status: 0,
      cancelled: false,
      finished: false,
    };
    requests.push(record);
    if (requests.length > MAX_RECORDS) requests.splice(0, requests.length - MAX_RECORDS);
    res.on('finish', () => (record.finished = true));
    res.on('close', () => {
      if (!res.writableFinished) record.cancelled = true;
    });
    const writeHead = res.writeHead.bind(res);
    res.writeHead = ((status: number, ...rest: unknown[]) => {
      record.status = status;
      return (writeHead as (...a: unknown[]) => ServerResponse)(status, ...rest);
    }) as typeof res.writeHead;

    const fault = takeFault(url.pathname);
    if (fault) record.fault = fault.kind;
    switch (fault?.kind) {
      case 'timeout':
        return; // never answer
      case 'status':
        res.writeHead(fault.status, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ errors: [{ message: `Injected failure ${fault.status}`, extensions: { code: 'INTERNAL_SERVER_ERROR' } }] }),
        );
        return;
      case 'garbage':
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('<html><body>502 Bad Gateway (upstream proxy)</body></html>');
        return;
      case 'reset':
        if (fault.afterFrames === undefined) {
          req.socket.destroy();
          return;
        }
        break;
      case 'slow':
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            timers.delete(timer);
            resolve();
          }, fault.ms);
          timers.add(timer);
        });
        if (res.destroyed) return;
        break;
    }

    const frames = (headers: Record<string, string> = {}): FrameWriter => {
      let sent = 0;
      let stopped = false;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
      res.flushHeaders();
      return {
        frame(text: string) {
          if (stopped || res.destroyed) return false;
          if (fault?.kind === 'stall' && sent >= fault.afterFrames) {
            stopped = true; // keep the connection open, send nothing more
            return false;
          }
          if (fault?.kind === 'reset' && fault.afterFrames !== undefined && sent >= fault.afterFrames) {
            stopped = true;
            // Let the frames already written reach the client first: a reset discards unread data.
            const timer = setTimeout(() => {
              timers.delete(timer);
              req.socket.destroy();
            }, 200);
            timers.add(timer);
            return false;
          }
          res.write(text);
          sent++;
          return true;
        },
        end() {
          if (!stopped && !res.destroyed) res.end();
        },
        get stopped() {
          return stopped || res.destroyed;
        },
      };
    };

    try {
      await handler({ method: record.method, path: record.path, query: record.query, headers: req.headers, body: record.body }, res, {
        frames,
        record,
      });
    } catch (err) {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ errors: [{ message: String(err), extensions: { code: 'INTERNAL_SERVER_ERROR' } }] }));
      } else res.destroy();
    }
  });
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    requestsTo: (path) => requests.filter((r) => matches(path, r.path)),
    fault(path, fault) {
      faults.unshift({ path, fault, left: fault.times ?? Infinity });
    },
    clearFaults() {
      faults.length = 0;
    },
    async waitFor(test, timeoutMs = 5_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = requests.find(test);
        if (found) return found;
        if (Date.now() > deadline) throw new Error('the fake did not see the expected request in time');
        await sleep(10);
      }
    },
    async close() {
      timers.forEach(clearTimeout);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Send a JSON body. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}
