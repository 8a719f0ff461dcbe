/**
 * A fake OpenAI-compatible speech endpoint (real HTTP):
 *   POST /audio/speech (also /v1/audio/speech) { model, input, voice, response_format? } → audio/mpeg
 * `Authorization: Bearer <key>` when a key is set. The audio is a small but well-formed mp3: an
 * ID3v2.4 tag whose title frame (TIT2) holds the spoken text — so tests can tell which chunk a
 * clip is — followed by silent MPEG-1 Layer III frames, more for longer text. Failures come from
 * the shared faults.
 */
import { type FakeServer, sendJson, startFakeServer } from './faults.ts';

interface SpeechRequest {
  model: string;
  input: string;
  voice: string;
  response_format?: string;
}

export interface TtsFake extends FakeServer {
  speeches(): SpeechRequest[];
}

const syncsafe = (n: number) => Buffer.from([(n >> 21) & 0x7f, (n >> 14) & 0x7f, (n >> 7) & 0x7f, n & 0x7f]);

/** A silent mp3 whose ID3 title is `text`. */
export function fakeMp3(text: string): Buffer {
  const title = Buffer.concat([Buffer.from([3]), Buffer.from(text, 'utf8')]); // 3 = UTF-8
  const frame = Buffer.concat([Buffer.from('TIT2'), syncsafe(title.length), Buffer.from([0, 0]), title]);
  const tag = Buffer.concat([Buffer.from('ID3'), Buffer.from([4, 0, 0]), syncsafe(frame.length), frame]);
  // MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, no padding: 417-byte frames.
  const audioFrame = Buffer.concat([Buffer.from([0xff, 0xfb, 0x90, 0x64]), Buffer.alloc(413)]);
  const frames = 1 + Math.ceil(text.length / 20);
  return Buffer.concat([tag, ...Array.from({ length: frames }, () => audioFrame)]);
}

/** The text a fake mp3 speaks (its TIT2 frame), or null for other audio. */
export function spokenText(mp3: Uint8Array): string | null {
  const b = Buffer.from(mp3);
  if (b.subarray(0, 3).toString() !== 'ID3' || b.subarray(10, 14).toString() !== 'TIT2') return null;
  const size = (b[14]! << 21) | (b[15]! << 14) | (b[16]! << 7) | b[17]!;
  return b.subarray(21, 20 + size).toString('utf8');
}

export async function startFakeTts(options: { key?: string } = {}): Promise<TtsFake> {
  const speeches: SpeechRequest[] = [];
  const fake = await startFakeServer((req, res) => {
    if (req.method !== 'POST' || !['/audio/speech', '/v1/audio/speech'].includes(req.path)) {
      return sendJson(res, 404, { error: { message: `Unknown request URL: ${req.method} ${req.path}`, type: 'invalid_request_error' } });
    }
    if (options.key !== undefined && req.headers.authorization !== `Bearer ${options.key}`) {
      return sendJson(res, 401, {
        error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', code: 'invalid_api_key' },
      });
    }
    let body: Partial<SpeechRequest>;
    try {
      body = JSON.parse(req.body) as Partial<SpeechRequest>;
    } catch {
      return sendJson(res, 400, { error: { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error' } });
    }
    if (
      typeof body.model !== 'string' ||
      typeof body.voice !== 'string' ||
      typeof body.input !== 'string' ||
      !body.input ||
      body.input.length > 4096
    ) {
      return sendJson(res, 400, {
        error: { message: "'model', 'voice' and 'input' (1 to 4096 characters) are required", type: 'invalid_request_error' },
      });
    }
    if (body.response_format !== undefined && body.response_format !== 'mp3') {
      return sendJson(res, 400, { error: { message: 'this fake speaks mp3 only', type: 'invalid_request_error' } });
    }
    speeches.push(body as SpeechRequest);
    const audio = fakeMp3(body.input);
    res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': String(audio.length) });
    res.end(audio);
  });
  return Object.assign(fake, { speeches: () => [...speeches] });
}
