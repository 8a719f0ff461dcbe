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

/**
 * Write `text` on a fresh connection and parse the one response that comes back. Our side is closed
 * once that response is complete (or after `idleMs` without data), not right after the request: node
 * ends a connection whose client half-closes as soon as it reads the FIN (httpAllowHalfOpen is off),
 * so an answer that needs an await (a file streamed from disk) would never be written.
 */
export function rawRequest(port: number, text: string | Buffer, idleMs = 3_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    const chunks: Buffer[] = [];
    const endSoon = () => socket.end();
    let idle = setTimeout(endSoon, idleMs);
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      clearTimeout(idle);
      if (responseComplete(Buffer.concat(chunks))) socket.end();
      else idle = setTimeout(endSoon, idleMs);
    });
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(idle);
      resolve(parseResponse(Buffer.concat(chunks)));
    });
  });
}

/** Whether `raw` holds a whole response: its head, and its body by Content-Length (none for 1xx/204/304). */
function responseComplete(raw: Buffer): boolean {
  const split = raw.indexOf('\r\n\r\n');
  if (split < 0) return false;
  const { status, headers } = parseResponse(raw);
  if (status < 200) return false;
  if (status === 204 || status === 304) return true;
  const length = headers['content-length'];
  return length !== undefined && raw.length - (split + 4) >= Number(length);
}

function parseResponse(raw: Buffer): RawResponse {
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
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.subarray(0, length) };
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
