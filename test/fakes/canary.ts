/**
 * A small real HTTP server for attack tests: it records every request it gets (path and headers)
 * and answers with a programmable handler — by default a unique "canary" body that must never show
 * up where it was not meant to (a published file, a report, a CLI line).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CanaryServer {
  url: string;
  port: number;
  /** A unique marker, the default body. */
  canary: string;
  requests: Array<{ path: string; headers: IncomingHttpHeaders }>;
  close(): Promise<void>;
}

export type CanaryHandler = (req: IncomingMessage, res: ServerResponse, canary: string) => void;

export async function startCanary(handler?: CanaryHandler): Promise<CanaryServer> {
  const canary = `canary-${randomBytes(12).toString('hex')}`;
  const requests: CanaryServer['requests'] = [];
  const server = createServer((req, res) => {
    requests.push({ path: req.url ?? '/', headers: req.headers });
    if (handler) handler(req, res, canary);
    else res.writeHead(200, { 'content-type': 'text/plain' }).end(canary);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    canary,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
