/**
 * Issue 43, the publish stall: a large bake is picked up while the server keeps answering. Its
 * manifest is read, parsed and validated in a worker thread and the snapshot is indexed a slice per
 * tick, so /healthz requests sent one after another while it loads keep being answered. (How long
 * anything takes is bench/publish.ts's business; this test counts answers, it times nothing.)
 */
import { copyFile, mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const LARGE = 50_000;

let server: TestServer;
let staging: string;

beforeAll(async () => {
  server = await startTestServer();
  await publishFixtureBake(server.dataDir);
  await server.services.content.reload();
  // The same fixture with many more artworks, written aside: only its manifest is published below.
  staging = await mkdtemp(join(tmpdir(), 'publish-stall-'));
  await publishFixtureBake(staging, { extraArtworks: LARGE });
  await copyFile(join(staging, 'manifest.json'), join(server.dataDir, 'manifest.next.json'));
}, 120_000);
afterAll(async () => {
  await server.close();
  await rm(staging, { recursive: true, force: true });
});

describe('picking up a large bake (issue 43)', () => {
  it('keeps answering /healthz while a manifest of 50,000 artworks is parsed, validated and indexed', async () => {
    const small = server.services.content.snapshot.artworks.length;
    await rename(join(server.dataDir, 'manifest.next.json'), join(server.dataDir, 'manifest.json'));
    let loaded = false;
    const loading = server.services.content.reload().then(() => {
      loaded = true;
    });
    let answeredWhileLoading = 0;
    while (!loaded) {
      const res = await server.get('/healthz', { key: null });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      if (!loaded) answeredWhileLoading++;
    }
    await loading;
    expect(server.services.content.snapshot.artworks.length).toBe(small + LARGE);
    // On the main thread the parse alone is one task of seconds: at most the request already in flight answers.
    expect(answeredWhileLoading).toBeGreaterThanOrEqual(10);
  }, 120_000);
});
