/**
 * A real museum server with every upstream it can use answered by the test fakes (characters and
 * the content store: Directus; the Library; souls; the LLM; TTS), over the fixture bake, with one
 * registered exhibition and one guide answer with speech: every route has something real to say.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DirectusFake, startFakeDirectus } from '../fakes/directus.ts';
import { type LibraryFake, startFakeLibrary } from '../fakes/library.ts';
import { type LlmFake, startFakeLlm } from '../fakes/llm.ts';
import { type SoulsFake, startFakeSouls } from '../fakes/souls.ts';
import { startFakeTts, type TtsFake } from '../fakes/tts.ts';
import { ask, exhibitionDoc, register } from '../server/guide/helpers.ts';
import { type FixtureBake, publishFixtureBake } from '../helpers/artifacts.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

export interface EveryUpstream {
  server: TestServer;
  fixture: FixtureBake;
  souls: SoulsFake;
  exhibitionId: string;
  /** The session of the guide answer, and the path of its spoken clip. */
  session: string;
  speechPath: string;
  close(): Promise<void>;
}

export async function startWithEveryUpstream(): Promise<EveryUpstream> {
  const [directus, library, souls, llm, tts]: [DirectusFake, LibraryFake, SoulsFake, LlmFake, TtsFake] = await Promise.all([
    startFakeDirectus({ characters: 40 }),
    startFakeLibrary({ key: 'lib-key' }),
    startFakeSouls({ tokens: 5 }),
    startFakeLlm({ key: 'llm-key' }),
    startFakeTts({ key: 'tts-key' }),
  ]);
  const tmp = mkdtempSync(join(tmpdir(), 'museum-client-'));
  const dataDir = join(tmp, 'data');
  const fixture = await publishFixtureBake(dataDir);
  const server = await startTestServer({
    dataDir,
    env: {
      CHARACTERS_UPSTREAM_URL: directus.url,
      LIBRARY_UPSTREAM_URL: library.url,
      LIBRARY_UPSTREAM_KEY: 'lib-key',
      SOULS_UPSTREAM_URL: souls.url,
      LLM_BASE_URL: llm.url,
      LLM_API_KEY: 'llm-key',
      TTS_BASE_URL: tts.url,
      TTS_API_KEY: 'tts-key',
    },
  });
  const doc = exhibitionDoc();
  const registered = await register(server, doc);
  if (registered.status !== 200 && registered.status !== 201) throw new Error(`registration: ${registered.status} ${registered.bytes}`);
  const answer = await ask(server, { exhibition: doc.id, question: 'What hangs in the Atrium?', speak: true });
  if (answer.status !== 200) throw new Error(`guide ask: ${answer.status} ${answer.bytes}`);
  const data = answer.json.data as { session: string; audioUrl?: string };
  return {
    server,
    fixture,
    souls,
    exhibitionId: doc.id,
    session: data.session,
    speechPath: data.audioUrl ? new URL(data.audioUrl).pathname : '',
    async close() {
      await server.close();
      await Promise.all([directus.close(), library.close(), souls.close(), llm.close(), tts.close()]);
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
