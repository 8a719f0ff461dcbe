/**
 * Guide test helpers: a real server over the fixture bake (museum content to enrich from), an
 * HTTP call that can choose its source address (the per-IP limits are real, so tests that make
 * many calls spread them over loopback addresses), and a sample exhibition document.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { publishFixtureBake } from '../../helpers/artifacts.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

export async function startGuideServer(env: Record<string, string> = {}): Promise<TestServer> {
  const tmp = mkdtempSync(join(tmpdir(), 'museum-guide-'));
  const dataDir = join(tmp, 'data');
  await publishFixtureBake(dataDir);
  const server = await startTestServer({ dataDir, env });
  const close = server.close;
  server.close = async () => {
    await close();
    rmSync(tmp, { recursive: true, force: true });
  };
  return server;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
  bytes: Buffer;
}

let nextAddress = 0;
/** A fresh loopback source address (127.0.x.y), i.e. a fresh client IP for the per-IP limits. */
export const freshIp = (): string => {
  const n = nextAddress++;
  return `127.1.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
};

/** One HTTP call over node:http (source address selectable); JSON bodies are parsed. */
export function call(
  s: TestServer,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  options: { ip?: string; headers?: Record<string, string> } = {},
): Promise<CallResult> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const req = request(`${s.url}${path}`, {
      method,
      agent: false,
      localAddress: options.ip ?? freshIp(),
      headers: { ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        const type = String(res.headers['content-type'] ?? '');
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          bytes,
          json: type.includes('json') && bytes.length ? JSON.parse(bytes.toString('utf8')) : null,
        });
      });
    });
    req.end(payload);
  });
}

/**
 * A document over the fixture bake: the Atrium (room 1) with three works, the Sculpture Garden
 * (room 2) with one museum work and one the museum does not know.
 */
export function exhibitionDoc(overrides: Record<string, unknown> = {}): Record<string, any> {
  return {
    format: 'museum-exhibition@1',
    id: 'spring-show:2025',
    name: 'Light and Stone',
    generator: 'museum-editor 2.1',
    placements: [
      {
        uid: 'p-atrium',
        room: { id: 1, title: 'Atrium (client title)' },
        artworks: [{ id: 104, name: 'Landscape', artist: 'C. Voss' }, { id: 102, name: null, artist: null }, { id: 105 }],
      },
      {
        uid: 'p-garden',
        room: { id: 2, title: 'Garden' },
        artworks: [
          { id: 101, name: 'Study', artist: 'Ada' },
          { id: 987654, name: 'Borrowed Night', artist: 'Guest Painter' },
        ],
      },
    ],
    ...overrides,
  };
}

export const register = (s: TestServer, doc: unknown, headers: Record<string, string> = {}) =>
  call(s, 'POST', '/v1/guide/exhibitions', doc, { headers });

export const ask = (s: TestServer, body: Record<string, unknown>) => call(s, 'POST', '/v1/guide/ask', body);

/** Poll until `probe` returns a value (for results that appear asynchronously). */
export async function until<T>(probe: () => Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await sleep(25);
  }
}
