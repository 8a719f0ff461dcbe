/**
 * A fake upstream that serves model and image files over real HTTP, with programmable misbehaviour
 * (failures, stalls, oversized bodies) and request counting, for the bake's fetch tests.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type NetPolicy, parseAllowHosts } from '../../common/net.ts';

export interface FakeFile {
  body: Uint8Array;
  /** Answer 503 to the first N requests. */
  failFirst?: number;
  /** Hold the first N requests this long (ms) before answering. */
  stallFirst?: number;
  stallMs?: number;
  /** Always answer with this status (e.g. 404, 410). */
  status?: number;
  /** Send an ETag and honour If-None-Match (default true). */
  etag?: boolean;
  /** Stream without Content-Length. */
  chunked?: boolean;
  /** Answer 302 to this location instead. */
  redirect?: string;
}

export interface FakeModelServer {
  url: string;
  files: Map<string, FakeFile>;
  /** Requests per path, and the statuses answered. */
  requests: Map<string, number>;
  statuses: Array<{ path: string; status: number }>;
  close(): Promise<void>;
}

export async function startModelServer(files: Record<string, FakeFile> = {}): Promise<FakeModelServer> {
  const table = new Map(Object.entries(files));
  const requests = new Map<string, number>();
  const statuses: FakeModelServer['statuses'] = [];
  const timers = new Set<NodeJS.Timeout>();

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const count = (requests.get(path) ?? 0) + 1;
    requests.set(path, count);
    const answer = (status: number, headers: Record<string, string | number> = {}, body?: Uint8Array) => {
      statuses.push({ path, status });
      res.writeHead(status, headers);
      res.end(body ? Buffer.from(body) : undefined);
    };
    const file = table.get(path);
    if (!file) return answer(404);
    if (file.status) return answer(file.status);
    if (file.redirect) return answer(302, { location: file.redirect });
    if (file.failFirst && count <= file.failFirst) return answer(503);
    const send = () => {
      const etag = `"${createHash('sha256').update(file.body).digest('hex').slice(0, 16)}"`;
      if (file.etag !== false && req.headers['if-none-match'] === etag) return answer(304, { etag });
      const headers: Record<string, string | number> = { 'content-type': 'application/octet-stream' };
      if (file.etag !== false) headers.etag = etag;
      if (file.chunked) {
        statuses.push({ path, status: 200 });
        res.writeHead(200, headers);
        const body = Buffer.from(file.body);
        for (let i = 0; i < body.length; i += 16 * 1024) res.write(body.subarray(i, i + 16 * 1024));
        res.end();
        return;
      }
      headers['content-length'] = file.body.byteLength;
      answer(200, headers, file.body);
    };
    if (file.stallFirst && count <= file.stallFirst) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        if (!res.destroyed) send();
      }, file.stallMs ?? 5_000);
      timers.add(timer);
      return;
    }
    send();
  };

  const server: Server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    files: table,
    requests,
    statuses,
    close: async () => {
      timers.forEach(clearTimeout);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The bake refuses loopback addresses unless the operator allows them: a test that fetches from its
 * fake on 127.0.0.1 says so explicitly, as BAKE_ALLOW_HOSTS=127.0.0.1:<port> would.
 */
export const allowing = (...servers: Array<{ url: string }>): NetPolicy => ({
  allowHosts: parseAllowHosts(servers.map((s) => new URL(s.url).host).join(',')),
  trustedOrigins: [],
});
