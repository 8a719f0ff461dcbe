/**
 * The guide across instances (REDIS_URL), against a real redis-server. Sessions in Redis: the same
 * behaviour as the in-memory store (turns trimmed, follow-ups once, in order, bounded, pending
 * reported), idle expiry, an outage served from memory. Two instances: a follow-up prepared on one
 * is fetched from the other, and the spoken answer's clips are served by either.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemorySessionStore, RedisSessionStore } from '../../../server/guide/sessions.ts';
import { startFakeLibrary, type LibraryFake } from '../../fakes/library.ts';
import { spokenText, startFakeTts, type TtsFake } from '../../fakes/tts.ts';
import { publishFixtureBake } from '../../helpers/artifacts.ts';
import { capturedLogger } from '../../helpers/logs.ts';
import { startRedis, type TestRedis } from '../../helpers/redis.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { ask, call, exhibitionDoc, register, until } from './helpers.ts';
import { sessionStoreContract } from './session-contract.ts';

let redis: TestRedis;
let client: Redis;
beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: 250 });
  await new Promise((ready) => client.once('ready', ready));
});
afterAll(async () => {
  client.disconnect();
  await redis.close();
});

let stores = 0;
const store = (options: { maxTurns?: number; maxFollowups?: number; idleMs?: number } = {}, log = pino({ level: 'silent' })) =>
  new RedisSessionStore(client, new MemorySessionStore(options), log, { ...options, prefix: `test:${stores++}:` });

describe('RedisSessionStore', () => {
  sessionStoreContract((options) => store(options));

  it('forgets idle sessions (their keys expire)', async () => {
    const s = store({ idleMs: 300 });
    await s.addTurns('a', [{ role: 'user', content: 'hello' }]);
    expect(await s.turns('a')).toHaveLength(1);
    await sleep(450);
    expect(await s.turns('a')).toEqual([]);
  });

  it('keeps sessions in memory while Redis is down, and says so once', async () => {
    const { log, lines } = capturedLogger('info');
    const s = store({}, log);
    await redis.stop();
    try {
      await s.addTurns('outage', [{ role: 'user', content: 'still here' }]);
      expect((await s.turns('outage')).map((t) => t.content)).toEqual(['still here']);
      await s.beginFollowup('outage');
      expect(await s.takeFollowup('outage')).toEqual({ followup: null, pending: true });
      expect(lines.filter((l) => /guide sessions are kept on this instance/.test(String(l.msg)))).toHaveLength(1);
    } finally {
      await redis.start();
    }
    await until(async () => (client.status === 'ready' ? true : null));
    await s.addTurns('after', [{ role: 'user', content: 'shared again' }]);
    expect(await client.llen(`test:${stores - 1}:after:turns`)).toBe(1);
  }, 20_000);
});

describe('two guide instances behind one Redis', () => {
  let library: LibraryFake;
  let tts: TtsFake;
  let a: TestServer;
  let b: TestServer;

  beforeAll(async () => {
    [library, tts] = await Promise.all([startFakeLibrary({ key: 'lib-key' }), startFakeTts({ key: 'tts-key' })]);
    const shared = mkdtempSync(join(tmpdir(), 'museum-guide-redis-'));
    await publishFixtureBake(join(shared, 'data'));
    const env = {
      REDIS_URL: redis.url,
      LIBRARY_UPSTREAM_URL: library.url,
      LIBRARY_UPSTREAM_KEY: 'lib-key',
      TTS_BASE_URL: tts.url,
      TTS_API_KEY: 'tts-key',
    };
    const common = { env, dataDir: join(shared, 'data'), stateDb: join(shared, 'state.db') };
    a = await startTestServer({ ...common, keyName: 'guide-a' });
    b = await startTestServer({ ...common, keyName: 'guide-b' });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await library?.close();
    await tts?.close();
  });

  it('a follow-up prepared after a question on one instance is fetched, once, from the other', async () => {
    expect((await register(a, exhibitionDoc())).status).toBe(200);
    const exhibition = exhibitionDoc().id as string;
    const asked = await ask(a, { exhibition, question: 'Who founded the Lantern Guild painters?', session: 'roaming' });
    expect(asked.status).toBe(200);
    expect(asked.json.data).toMatchObject({ consulting: true });
    const followup = (server: TestServer) =>
      call(server, 'GET', `/v1/guide/followup?exhibition=${encodeURIComponent(exhibition)}&session=roaming`);
    const ready = await until(async () => {
      const f = await followup(b);
      return f.json.data ? f.json : null;
    });
    expect(ready.data.text).toContain('Lantern Guild painters sign their works with a small ember');
    expect((await followup(a)).json).toEqual({ data: null, meta: { pending: false } });
  });

  it('the clips of a spoken answer are served by the other instance too', async () => {
    expect((await register(a, exhibitionDoc())).status).toBe(200);
    const exhibition = exhibitionDoc().id as string;
    const asked = await ask(a, { exhibition, question: 'Tell me about the exhibition, every room of it.', session: 'listener' });
    expect(asked.status).toBe(200);
    const urls = asked.json.data.audioUrls as string[];
    expect(urls.length).toBeGreaterThan(0);
    const spoken: string[] = [];
    for (const url of urls) {
      const res = await fetch(b.url + new URL(url).pathname);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('audio/mpeg');
      spoken.push(spokenText(new Uint8Array(await res.arrayBuffer()))!);
    }
    expect(spoken.join(' ').replace(/\s+/g, ' ')).toBe(String(asked.json.data.answer).replace(/\s+/g, ' ').trim());
    // An id nobody registered is still a 404 envelope.
    expect((await fetch(`${b.url}/v1/guide/tts/${'A'.repeat(22)}.mp3`)).status).toBe(404);
  });
});
