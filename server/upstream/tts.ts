/**
 * Speech engines for the guide, both producing mp3:
 *  - `OpenAiSpeech`: any OpenAI-compatible `POST {TTS_BASE_URL}/audio/speech` (production);
 *  - `EspeakSpeech`: the local `espeak-ng` (Debian) piped into `lame` (TTS_ENGINE=espeak), the
 *    embedded default that needs no network.
 * Failures are `UpstreamError`s (502 `UPSTREAM` if they reach a client), with details in the log.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { Logger } from 'pino';
import { BodyTooLarge } from '../../common/net.ts';
import { deadline, readResponseBody, UpstreamError } from './http.ts';

const SPEECH_SERVICE = 'speech engine';

export interface SpeechEngine {
  readonly name: string;
  /** mp3 bytes of `text` spoken. */
  synthesize(text: string, options?: { voice?: string; signal?: AbortSignal }): Promise<Buffer>;
}

/** An mp3 starts with an ID3 tag or an MPEG audio frame sync (11 set bits). */
export const looksLikeMp3 = (bytes: Uint8Array): boolean =>
  bytes.length >= 4 &&
  ((bytes[0] === 0x49 && bytes[1] === 0x44 && bytes[2] === 0x33) || (bytes[0] === 0xff && (bytes[1]! & 0xe0) === 0xe0));

const MAX_AUDIO_BYTES = 8 * 1024 * 1024;

export class OpenAiSpeech implements SpeechEngine {
  readonly name = 'openai';

  constructor(
    private readonly options: { baseUrl: string; apiKey?: string; model: string; voice: string; timeoutMs: number; log?: Logger },
  ) {}

  async synthesize(text: string, call: { voice?: string; signal?: AbortSignal } = {}): Promise<Buffer> {
    const url = `${this.options.baseUrl.replace(/\/+$/, '')}/audio/speech`;
    const { signal, cancel, timedOut } = deadline(this.options.timeoutMs, call.signal);
    try {
      return await this.request(url, text, call.voice, signal, timedOut);
    } finally {
      cancel();
    }
  }

  private async request(
    url: string,
    text: string,
    voice: string | undefined,
    signal: AbortSignal,
    timedOut: () => boolean,
  ): Promise<Buffer> {
    const fail = (reason: UpstreamError['reason'], detail: string, status?: number) => {
      this.options.log?.warn({ upstream: SPEECH_SERVICE, reason, detail, status }, 'upstream call failed');
      return new UpstreamError(SPEECH_SERVICE, reason, detail, status);
    };
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'audio/mpeg',
          ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: this.options.model, input: text, voice: voice ?? this.options.voice, response_format: 'mp3' }),
        signal,
        redirect: 'error',
      });
    } catch (err) {
      throw timedOut()
        ? fail('timeout', `no answer within ${this.options.timeoutMs} ms`)
        : fail('network', String((err as Error).cause ?? err));
    }
    if (response.status !== 200 || !response.body) {
      await response.body?.cancel().catch(() => undefined);
      throw fail('status', `/audio/speech answered ${response.status}`, response.status);
    }
    let audio: Buffer;
    try {
      audio = await readResponseBody(response, MAX_AUDIO_BYTES, signal);
    } catch (err) {
      if (err instanceof BodyTooLarge) throw fail('body', `/audio/speech: more than ${MAX_AUDIO_BYTES} bytes`);
      throw timedOut() ? fail('timeout', `audio not complete within ${this.options.timeoutMs} ms`) : fail('network', 'audio interrupted');
    }
    if (!looksLikeMp3(audio)) throw fail('body', '/audio/speech: the body is not mp3 audio');
    return audio;
  }
}

/** Whether a command can be run (checked once at startup, so a missing binary is one clear log line). */
export function commandAvailable(command: string): boolean {
  const result = spawnSync(command, ['--version'], { stdio: 'ignore', timeout: 5_000 });
  return !result.error;
}

export class EspeakSpeech implements SpeechEngine {
  readonly name = 'espeak';

  constructor(private readonly options: { voice?: string; timeoutMs: number; log?: Logger }) {}

  /** espeak-ng writes WAV to stdout; lame encodes it to a mono 48 kbit/s mp3. Text goes in on stdin. */
  synthesize(text: string, call: { voice?: string; signal?: AbortSignal } = {}): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const voice = /^[\w+-]{1,32}$/.test(call.voice ?? '') ? call.voice! : (this.options.voice ?? 'en');
      const espeak = spawn('espeak-ng', ['--stdout', '--stdin', '-v', voice, '-s', '165'], { stdio: ['pipe', 'pipe', 'ignore'] });
      const lame = spawn('lame', ['--quiet', '-m', 'm', '-b', '48', '-', '-'], { stdio: ['pipe', 'pipe', 'ignore'] });
      const chunks: Buffer[] = [];
      let total = 0;
      let settled = false;
      const finish = (err: UpstreamError | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        call.signal?.removeEventListener('abort', onAbort);
        if (err) {
          espeak.kill('SIGKILL');
          lame.kill('SIGKILL');
          this.options.log?.warn({ upstream: SPEECH_SERVICE, reason: err.reason, detail: err.detail }, 'speech synthesis failed');
          reject(err);
          return;
        }
        resolve(Buffer.concat(chunks));
      };
      const timer = setTimeout(
        () => finish(new UpstreamError(SPEECH_SERVICE, 'timeout', `espeak-ng/lame took over ${this.options.timeoutMs} ms`)),
        this.options.timeoutMs,
      );
      const onAbort = () => finish(new UpstreamError(SPEECH_SERVICE, 'aborted', 'cancelled by the caller'));
      call.signal?.addEventListener('abort', onAbort, { once: true });
      for (const child of [espeak, lame]) {
        child.on('error', (err) => finish(new UpstreamError(SPEECH_SERVICE, 'network', `${child.spawnfile}: ${err.message}`)));
        child.stdin.on('error', () => undefined);
      }
      espeak.stdout.pipe(lame.stdin);
      lame.stdout.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > MAX_AUDIO_BYTES) finish(new UpstreamError(SPEECH_SERVICE, 'body', 'audio too long'));
        else chunks.push(chunk);
      });
      lame.on('close', (code) => {
        const audio = Buffer.concat(chunks);
        if (code === 0 && looksLikeMp3(audio)) finish(null);
        else finish(new UpstreamError(SPEECH_SERVICE, 'body', `lame exited with ${code} (${audio.length} bytes)`));
      });
      espeak.stdin.end(text);
    });
  }
}
