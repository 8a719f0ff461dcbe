/**
 * Start a real museum server for a test: temp DATA_DIR and STATE_DB, ephemeral port, quiet logs,
 * and one active API key. Extra environment (upstream URLs…) goes in `env`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { type MuseumServer, type ServerOptions, startServer } from '../../server/app.ts';
import { loadConfig } from '../../server/config.ts';

export interface TestServer extends MuseumServer {
  key: string;
  dataDir: string;
  stateDb: string;
  /** fetch relative to the server, with the API key unless `key: null`. */
  get(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  post(path: string, body: unknown, init?: RequestInit & { key?: string | null }): Promise<Response>;
}

export async function startTestServer(
  options: { env?: Record<string, string>; dataDir?: string; stateDb?: string; keyName?: string } & ServerOptions = {},
): Promise<TestServer> {
  const tmp = mkdtempSync(join(tmpdir(), 'museum-test-'));
  const dataDir = options.dataDir ?? join(tmp, 'data');
  const stateDb = options.stateDb ?? join(tmp, 'state.db');
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, STATE_DB: stateDb, LOG_LEVEL: 'silent', ...options.env });
  const server = await startServer(
    { ...config, publicUrl: options.env?.PUBLIC_URL ?? 'http://museum.test' },
    {
      log: options.log ?? pino({ level: 'silent' }),
      limiter: options.limiter,
    },
  );
  // Instances sharing one STATE_DB need distinct key names.
  const { key } = await server.services.keys.create(options.keyName ?? 'test');
  const withKey = (init: RequestInit & { key?: string | null } = {}): RequestInit => {
    const headers = new Headers(init.headers);
    const k = init.key === undefined ? key : init.key;
    if (k !== null && !headers.has('x-api-key')) headers.set('x-api-key', k);
    return { ...init, headers };
  };
  const close = server.close;
  return Object.assign(server, {
    key,
    dataDir,
    stateDb,
    get: (path: string, init?: RequestInit & { key?: string | null }) => fetch(server.url + path, withKey(init)),
    post: (path: string, body: unknown, init?: RequestInit & { key?: string | null }) => {
      const req = withKey({ method: 'POST', ...init });
      (req.headers as Headers).set('content-type', 'application/json');
      return fetch(server.url + path, { ...req, body: typeof body === 'string' ? body : JSON.stringify(body) });
    },
    close: async () => {
      await close();
      rmSync(tmp, { recursive: true, force: true });
    },
  });
}

/** Assert-friendly view of an error response. */
export async function errorOf(res: Response): Promise<{ status: number; code: string; message: string }> {
  const body = (await res.json()) as { errors: Array<{ message: string; extensions: { code: string } }> };
  return { status: res.status, code: body.errors[0]!.extensions.code, message: body.errors[0]!.message };
}
