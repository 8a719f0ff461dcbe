/**
 * Requests fetch refuses to send: raw bytes over a socket (invalid header bytes, unknown methods,
 * `..` segments kept as is) and node:http requests with arbitrary paths, methods and headers.
 */
import http from 'node:http';
import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Write `text` on a fresh connection (closing our side) and parse the one response that comes back. */
export function rawRequest(port: number, text: string | Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(text));
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks);
      const split = raw.indexOf('\r\n\r\n');
      const head = raw.subarray(0, split < 0 ? raw.length : split).toString('latin1');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const at = line.indexOf(':');
        headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
      }
      // Only the first response: junk after a request may have been parsed as a second one.
      const rest = split < 0 ? Buffer.alloc(0) : raw.subarray(split + 4);
      const length = headers['content-length'] === undefined ? rest.length : Number(headers['content-length']);
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.subarray(0, length) });
    });
  });
}

export interface NodeRequest {
  method?: string;
  /** Sent exactly as given (no normalization of `..`, no re-encoding). */
  path: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  /** Give up after this long (ms); the response then has status 0. */
  timeoutMs?: number;
}

/**
 * One request with node:http. A text/event-stream answer is cut off after its first chunk (streams
 * never end on their own); the body is what arrived by then.
 */
export function nodeRequest(port: number, request: NodeRequest, agent?: http.Agent): Promise<RawResponse> {
  // Frame a body explicitly: node:http sends GET/DELETE/OPTIONS bodies unframed otherwise.
  const headers = { ...request.headers };
  if (request.body !== undefined && !Object.keys(headers).some((h) => /^(content-length|transfer-encoding)$/i.test(h))) {
    headers['Content-Length'] = String(Buffer.byteLength(request.body));
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method: request.method ?? 'GET', path: request.path, headers, agent, setHost: true },
      (res) => {
        const chunks: Buffer[] = [];
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : (v ?? '');
        const done = () => resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks) });
        const streaming = (headers['content-type'] ?? '').startsWith('text/event-stream');
        res.on('data', (d: Buffer) => {
          chunks.push(d);
          if (streaming) {
            res.destroy();
            done();
          }
        });
        res.on('end', done);
        res.on('error', done);
        if (streaming && request.method === 'HEAD') {
          res.destroy();
          done();
        }
      },
    );
    req.setTimeout(request.timeoutMs ?? 10_000, () => {
      req.destroy();
      resolve({ status: 0, headers: {}, body: Buffer.alloc(0) });
    });
    req.on('error', reject);
    req.end(request.body);
  });
}
