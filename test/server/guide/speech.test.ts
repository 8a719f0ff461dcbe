/**
 * Spoken answers: sentence-aligned chunking, audio URLs served as mp3 by the OpenAI-compatible
 * speech fake (each clip speaks its chunk), `speak: false`, expiry (404), engine failures (502 on
 * the clip, never on the question), bounded clip storage, and the local espeak-ng engine.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SpeechClips, speechChunks } from '../../../server/guide/speech.ts';
import { commandAvailable, EspeakSpeech, looksLikeMp3, OpenAiSpeech } from '../../../server/upstream/tts.ts';
import { startFakeLibrary, type LibraryFake } from '../../fakes/library.ts';
import { fakeMp3, spokenText, startFakeTts, type TtsFake } from '../../fakes/tts.ts';
import type { TestServer } from '../../helpers/server.ts';
import { ask, call, exhibitionDoc, register, startGuideServer, until } from './helpers.ts';

const EXHIBITION = 'spring-show:2025';
let tts: TtsFake;
let library: LibraryFake;
const servers: TestServer[] = [];
beforeAll(async () => {
  [tts, library] = await Promise.all([startFakeTts({ key: 'tts-key' }), startFakeLibrary()]);
});
afterAll(async () => {
  await Promise.all([tts.close(), library.close()]);
});
afterEach(async () => {
  tts.clearFaults();
  for (const s of servers.splice(0)) await s.close();
});
async function guideServer(env: Record<string, string> = {}): Promise<TestServer> {
  const s = await startGuideServer({ TTS_BASE_URL: tts.url, TTS_API_KEY: 'tts-key', ...env });
  servers.push(s);
  await register(s, exhibitionDoc());
  return s;
}
const clipPath = (url: string) => {
  expect(url.startsWith('http://museum.test/v1/guide/tts/')).toBe(true);
  return new URL(url).pathname;
};
const SUMMARY_QUESTION = 'What is the meaning of life?';

describe('speechChunks', () => {
  it('packs whole sentences into chunks of at most 220 characters', () => {
    const sentences = Array.from(
      { length: 14 },
      (_, i) => `Sentence number ${i + 1} talks about the rooms${i % 3 ? ' and the light' : ''}${i % 4 ? '.' : '!'}`,
    );
    const text = sentences.join(' ');
    const chunks = speechChunks(text);
    expect(chunks.length).toBeGreaterThan(1);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(220);
      expect(c).toMatch(/[.!?]$/);
    }
    expect(chunks.join(' ')).toBe(text);
    expect(speechChunks('Hi there. How are you? "Fine," she said.')).toEqual(['Hi there. How are you? "Fine," she said.']);
    expect(speechChunks('  ')).toEqual([]);
    expect(speechChunks('No final stop')).toEqual(['No final stop']);
  });

  it('cuts an overlong sentence at clause boundaries, then spaces', () => {
    const clause = 'the long gallery hangs its works on both sides of a partition';
    const long = `${Array.from({ length: 8 }, () => clause).join(', ')}.`;
    const chunks = speechChunks(long);
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(220);
    expect(chunks.join(' ').replace(/\s+/g, ' ')).toBe(long);
    const words = speechChunks('word '.repeat(200).trim());
    for (const c of words) expect(c.length).toBeLessThanOrEqual(220);
    expect(words.join(' ')).toBe('word '.repeat(200).trim());
  });
});

describe('spoken answers', () => {
  it('returns audioUrl and audioUrls whose clips speak the answer chunk by chunk', async () => {
    const s = await guideServer();
    const res = await ask(s, { exhibition: EXHIBITION, question: SUMMARY_QUESTION });
    const a = res.json.data;
    expect(a.audioUrls.length).toBeGreaterThan(1);
    expect(a.audioUrl).toBe(a.audioUrls[0]);
    const spoken: string[] = [];
    for (const url of a.audioUrls as string[]) {
      const clip = await call(s, 'GET', clipPath(url));
      expect(clip.status).toBe(200);
      expect(clip.headers['content-type']).toBe('audio/mpeg');
      expect(looksLikeMp3(clip.bytes)).toBe(true);
      spoken.push(spokenText(clip.bytes)!);
    }
    expect(spoken).toEqual(speechChunks(a.answer));
    expect(spoken.join(' ')).toBe(a.answer);
    const request = tts.speeches().at(-1)!;
    expect(request).toMatchObject({ model: 'tts-1', voice: 'alloy', response_format: 'mp3' });
    expect(tts.requestsTo('/audio/speech').at(-1)!.headers.authorization).toBe('Bearer tts-key');
    // A clip is synthesized once, then served from memory.
    const before = tts.speeches().length;
    await call(s, 'GET', clipPath(a.audioUrl));
    expect(tts.speeches().length).toBe(before);
  });

  it('speaks nothing with speak: false, or when no speech engine is configured', async () => {
    const s = await guideServer();
    const quiet = (await ask(s, { exhibition: EXHIBITION, question: SUMMARY_QUESTION, speak: false })).json.data;
    expect(quiet.answer.length).toBeGreaterThan(0);
    expect('audioUrl' in quiet || 'audioUrls' in quiet).toBe(false);
    const plain = await startGuideServer();
    servers.push(plain);
    await register(plain, exhibitionDoc());
    const none = (await ask(plain, { exhibition: EXHIBITION, question: SUMMARY_QUESTION })).json.data;
    expect('audioUrl' in none || 'audioUrls' in none).toBe(false);
    const missing = await call(plain, 'GET', '/v1/guide/tts/AAAAAAAAAAAAAAAAAAAAAA.mp3');
    expect(missing.status).toBe(404);
  });

  it('expires clips after the configured time', async () => {
    const s = await guideServer({ GUIDE_AUDIO_TTL_S: '1' });
    const a = (await ask(s, { exhibition: EXHIBITION, question: SUMMARY_QUESTION })).json.data;
    expect((await call(s, 'GET', clipPath(a.audioUrls[1]))).status).toBe(200);
    await sleep(1_100);
    for (const url of a.audioUrls as string[]) {
      const gone = await call(s, 'GET', clipPath(url));
      expect(gone.status).toBe(404);
      expect(gone.json.errors[0].extensions.code).toBe('NOT_FOUND');
    }
  });

  it('answers 404 for unknown or malformed clip ids', async () => {
    const s = await guideServer();
    for (const path of [
      '/v1/guide/tts/AAAAAAAAAAAAAAAAAAAAAA.mp3',
      '/v1/guide/tts/short.mp3',
      '/v1/guide/tts/..%2F..%2Fetc%2Fpasswd.mp3',
      '/v1/guide/tts/AAAAAAAAAAAAAAAAAAAAAA.wav',
    ]) {
      const res = await call(s, 'GET', path);
      expect(res.status, path).toBe(404);
    }
  });

  it('keeps answering when the speech engine fails; the clip answers 502 and recovers later', async () => {
    const s = await guideServer();
    tts.fault('/audio/speech', { kind: 'status', status: 500 });
    const a = await ask(s, { exhibition: EXHIBITION, question: 'Tell me about Pinned Portrait' });
    expect(a.status).toBe(200);
    const failed = await call(s, 'GET', clipPath(a.json.data.audioUrl));
    expect(failed.status).toBe(502);
    expect(failed.json.errors[0]).toEqual({ message: 'The speech engine is temporarily unavailable', extensions: { code: 'UPSTREAM' } });
    tts.clearFaults();
    tts.fault('/audio/speech', { kind: 'garbage', times: 1 });
    expect((await call(s, 'GET', clipPath(a.json.data.audioUrl))).status).toBe(502);
    const recovered = await call(s, 'GET', clipPath(a.json.data.audioUrl));
    expect(recovered.status).toBe(200);
    expect(spokenText(recovered.bytes)).toBe(a.json.data.answer);
  });

  it('speaks follow-ups too', async () => {
    const s = await guideServer({ LIBRARY_UPSTREAM_URL: library.url });
    const a = (await ask(s, { exhibition: EXHIBITION, question: 'Who founded the Lantern Guild painters?', session: 'spoken' })).json.data;
    expect(a.consulting).toBe(true);
    const f = await until(async () => (await call(s, 'GET', `/v1/guide/followup?exhibition=${EXHIBITION}&session=spoken`)).json.data);
    expect(f.audioUrls.length).toBeGreaterThan(0);
    const spoken = [];
    for (const url of f.audioUrls as string[]) spoken.push(spokenText((await call(s, 'GET', clipPath(url))).bytes));
    expect(spoken.join(' ')).toBe(f.text);
  });
});

describe('clip storage', () => {
  it('keeps at most maxClips clips, forgetting the oldest', async () => {
    const engine = new OpenAiSpeech({ baseUrl: tts.url, apiKey: 'tts-key', model: 'tts-1', voice: 'alloy', timeoutMs: 5_000 });
    const clips = new SpeechClips({ engine, publicUrl: 'http://museum.test', ttlMs: 60_000, maxClips: 3 });
    const urls = clips.prepare('One. '.repeat(60) + 'Two. '.repeat(60)).concat(clips.prepare('Three. '.repeat(50)));
    const ids = urls.map((u) => /tts\/(.+)\.mp3$/.exec(u)![1]!);
    expect(ids.length).toBeGreaterThan(3);
    expect(clips.size).toBe(3);
    for (const id of ids.slice(0, -3)) expect(await clips.audio(id)).toBeNull();
    for (const id of ids.slice(-3)) expect(looksLikeMp3((await clips.audio(id))!)).toBe(true);
  });

  it('keeps cached audio within maxAudioBytes, least recently served out first, and speaks the dropped clip again', async () => {
    const engine = new OpenAiSpeech({ baseUrl: tts.url, apiKey: 'tts-key', model: 'tts-1', voice: 'alloy', timeoutMs: 5_000 });
    const texts = ['Alpha one.', 'Bravo two.', 'Delta six.']; // equal lengths: equal audio sizes
    const clips = new SpeechClips({
      engine,
      publicUrl: 'http://museum.test',
      ttlMs: 60_000,
      maxAudioBytes: 2 * fakeMp3(texts[0]!).length + 1,
    });
    const idOf = (text: string) => /tts\/(.+)\.mp3$/.exec(clips.prepare(text)[0]!)![1]!;
    const [alpha, bravo] = [idOf(texts[0]!), idOf(texts[1]!)];
    await clips.audio(alpha);
    await clips.audio(bravo);
    await clips.audio(alpha); // alpha was served last: bravo is the least recently served
    const delta = idOf(texts[2]!);
    await clips.audio(delta); // three do not fit: bravo's audio goes, its clip stays
    const before = tts.speeches().length;
    expect(spokenText((await clips.audio(alpha))!)).toBe('Alpha one.');
    expect(spokenText((await clips.audio(delta))!)).toBe('Delta six.');
    expect(tts.speeches().length).toBe(before);
    expect(spokenText((await clips.audio(bravo))!)).toBe('Bravo two.');
    expect(tts.speeches().length).toBe(before + 1);
    expect(clips.size).toBe(3);
  });
});

const espeakReady = commandAvailable('espeak-ng') && commandAvailable('lame');
describe('the local espeak-ng engine', () => {
  it.skipIf(!espeakReady)('speaks an answer as mp3 (skipped only when espeak-ng or lame is not installed)', async () => {
    const engine = new EspeakSpeech({ timeoutMs: 20_000 });
    const audio = await engine.synthesize('The Atrium was designed by Studio Lovelace.');
    expect(looksLikeMp3(audio)).toBe(true);
    expect(audio.length).toBeGreaterThan(2_000);

    const s = await startGuideServer({ TTS_ENGINE: 'espeak' });
    servers.push(s);
    await register(s, exhibitionDoc());
    const a = (await ask(s, { exhibition: EXHIBITION, question: 'Tell me about Pinned Portrait' })).json.data;
    const clip = await call(s, 'GET', clipPath(a.audioUrl));
    expect(clip.status).toBe(200);
    expect(clip.headers['content-type']).toBe('audio/mpeg');
    expect(looksLikeMp3(clip.bytes)).toBe(true);
  });
});

describe('speech under a flood of clip ids (issue 43)', () => {
  const engines = {
    'the speech upstream': () =>
      new OpenAiSpeech({ baseUrl: tts.url, apiKey: 'tts-key', model: 'tts-1', voice: 'alloy', timeoutMs: 20_000 }),
    'espeak-ng': () => new EspeakSpeech({ timeoutMs: 60_000 }),
  };
  for (const [name, engine] of Object.entries(engines)) {
    it.skipIf(name === 'espeak-ng' && !espeakReady)(
      `queues at most 32 syntheses behind the running ones; more get 503 BUSY with Retry-After, the queued ones still speak (${name})`,
      async () => {
        const clips = new SpeechClips({ engine: engine(), publicUrl: 'http://museum.test', ttlMs: 600_000 });
        // Sentences too long to share a chunk: one clip each; the first is started by prepare().
        const sentences = Array.from(
          { length: 40 },
          (_, i) =>
            `Clip ${i + 1} describes the long gallery where the painted panels of the old altarpiece hang in a row on both walls of the quiet room.`,
        );
        const ids = clips.prepare(sentences.join(' ')).map((url) => new URL(url).pathname.split('/').pop()!.replace('.mp3', ''));
        expect(ids).toHaveLength(40);
        const results = await Promise.allSettled(ids.map((id) => clips.audio(id)));
        const spoken = results.filter((r): r is PromiseFulfilledResult<Buffer | null> => r.status === 'fulfilled');
        const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
        // Two running (the first shared with prepare's start) and 32 waiting are spoken; the other 6 are refused at once.
        expect(spoken).toHaveLength(34);
        for (const r of spoken) expect(looksLikeMp3(r.value!)).toBe(true);
        expect(refused).toHaveLength(6);
        for (const r of refused) {
          expect(r.reason).toMatchObject({ status: 503, code: 'BUSY' });
          expect(r.reason.headers).toMatchObject({ 'Retry-After': '5' });
        }
        // Once the queue drained, a refused clip is spoken on its next request.
        expect(looksLikeMp3((await clips.audio(ids[39]!))!)).toBe(true);
      },
      120_000,
    );
  }

  it('limits clip requests to 60 a minute per client address (429 past it), another address unaffected', async () => {
    const s = await guideServer();
    const a = (await ask(s, { exhibition: EXHIBITION, question: 'Tell me about Pinned Portrait' })).json.data;
    const path = clipPath(a.audioUrl);
    const flooder = '127.9.0.1';
    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push((await call(s, 'GET', path, undefined, { ip: flooder })).status);
    expect(statuses.slice(0, 60).every((st) => st === 200)).toBe(true);
    expect(statuses[60]).toBe(429);
    const visitor = await call(s, 'GET', path, undefined, { ip: '127.9.0.2' });
    expect(visitor.status).toBe(200);
    expect(looksLikeMp3(visitor.bytes)).toBe(true);
  }, 60_000);
});
