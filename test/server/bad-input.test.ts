/**
 * At least a thousand malformed requests at every route of the OpenAPI document (generated from it,
 * so routes added later are covered): no 5xx, every error in the envelope with the code of its
 * status, and the server still answers afterwards. Upstream URLs in the environment
 * (CHARACTERS_UPSTREAM_URL, LIBRARY_UPSTREAM_URL, SOULS_UPSTREAM_URL, LLM_BASE_URL, TTS_BASE_URL, …)
 * are passed to the server — e.g. fake upstreams started by a wrapper; without them the
 * upstream-backed routes answer 503 UNCONFIGURED, which is then allowed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { fireBadInput } from '../helpers/bad-input.ts';
import type { OpenApiDoc } from '../helpers/openapi.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const UPSTREAM_VARIABLES = [
  'CHARACTERS_UPSTREAM_URL',
  'LIBRARY_UPSTREAM_URL',
  'LIBRARY_UPSTREAM_KEY',
  'SOULS_UPSTREAM_URL',
  'LLM_BASE_URL',
  'LLM_API_KEY',
  'LLM_MODEL',
  'TTS_BASE_URL',
  'TTS_API_KEY',
  'TTS_ENGINE',
];
const upstreamEnv = Object.fromEntries(UPSTREAM_VARIABLES.filter((name) => process.env[name]).map((name) => [name, process.env[name]!]));

let server: TestServer;
let imageName: string;

beforeAll(async () => {
  server = await startTestServer({ env: upstreamEnv });
  const fx = await publishFixtureBake(server.dataDir);
  await server.services.content.reload();
  imageName = `${fx.files['room1.image']!.ref.sha256}.png`;
});
afterAll(() => server.close());

describe('bad input', () => {
  it('survives ≥ 1000 malformed requests at every documented route without a 5xx or a bare error', async () => {
    const doc = (await (await server.get('/v1/openapi.json', { key: null })).json()) as OpenApiDoc;
    const keys = await server.services.keys.createMany(Array.from({ length: 24 }, (_, i) => `fuzz-${i}`));
    const report = await fireBadInput(server.port, doc, {
      count: 1200,
      keys,
      allowUnconfigured: Object.keys(upstreamEnv).length === 0,
      pathExamples: { id: '1', slug: 'genesis', name: imageName, chainId: '1', contractAddress: `0x${'ab'.repeat(20)}`, tokenId: '1' },
    });
    expect(report.sent).toBeGreaterThanOrEqual(1000);
    // Every documented route was a target (the content routes at least, whatever else exists).
    for (const route of ['GET /v1/artworks', 'GET /v1/rooms/{id}/slots', 'GET /files/{name}', 'GET /v1/collections/{slug}']) {
      expect(report.operations).toContain(route);
    }
    expect(report.failures.slice(0, 20)).toEqual([]);
    // The mix really exercised rejections of several kinds.
    for (const status of [400, 401, 404, 405]) expect(report.byStatus[status] ?? 0, `status ${status}`).toBeGreaterThan(0);

    // Still answering, keyed and public, snapshot responses included.
    expect((await server.get('/v1', { key: null })).status).toBe(200);
    expect((await server.get('/v1/rooms', { key: (await server.services.keys.create('after-fuzz')).key })).status).toBe(200);
    expect((await server.get('/v1/rooms/1/slots', { key: null })).status).toBe(200);
    expect((await server.get(`/files/${imageName}`, { key: null })).status).toBe(200);
  });
});
