/**
 * A fake OpenAI-compatible language model (real HTTP), speaking the chat completions contract:
 *   POST /chat/completions (also /v1/chat/completions)
 *     { model, messages: [{ role: system|user|assistant, content }], max_tokens?, temperature?, stream? }
 *     → { id, object: 'chat.completion', created, model, choices: [{ index, message: { role, content }, finish_reason }], usage }
 * `Authorization: Bearer <key>` when a key is set (401 `invalid_api_key` otherwise); malformed
 * requests get 400 `invalid_request_error`, as the real service answers. Non-streaming only
 * (`stream: true` is refused). Replies are deterministic; failures come from the shared faults.
 */
import { type FakeServer, sendJson, startFakeServer } from './faults.ts';

export interface ChatRequest {
  model: string;
  messages: Array<{ role: 'system' | 'user' | 'assistant'; content: string }>;
  max_tokens?: number;
  temperature?: number;
  stream?: boolean;
}

export interface LlmFakeOptions {
  key?: string;
  /** The assistant's text for a request (default: `defaultReply`). */
  reply?: (request: ChatRequest) => string;
}

export interface LlmFake extends FakeServer {
  /** Parsed bodies of the chat requests received, oldest first. */
  chats(): ChatRequest[];
  setReply(reply: (request: ChatRequest) => string): void;
}

/**
 * Deterministic replies: a request for starter questions gets a numbered list of questions about
 * the quoted names in the prompt; anything else is answered in the persona named by the system
 * prompt ("You are X, …"), echoing the question.
 */
export function defaultReply(request: ChatRequest): string {
  const system = request.messages.find((m) => m.role === 'system')?.content ?? '';
  const last = [...request.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  if (/starter questions/i.test(system)) {
    const names = [...new Set([...last.matchAll(/"([^"]+)"/g)].map((m) => m[1]!))];
    return names
      .slice(0, 6)
      .map((n, i) => `${i + 1}. What makes "${n}" worth a closer look?`)
      .join('\n');
  }
  const persona = /You are ([^,.\n]+)/.exec(system)?.[1] ?? 'the assistant';
  return `${persona} says: you asked "${last.slice(0, 200)}". Here is a thoughtful answer.`;
}

const invalid = (message: string) => ({ error: { message, type: 'invalid_request_error', param: null, code: null } });

function parseChat(text: string): ChatRequest | string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'We could not parse the JSON body of your request.';
  }
  const b = body as Partial<ChatRequest>;
  if (typeof b !== 'object' || b === null || typeof b.model !== 'string' || !b.model) return "you must provide a 'model' parameter";
  if (!Array.isArray(b.messages) || b.messages.length === 0) return "'messages' must be a non-empty array";
  for (const m of b.messages) {
    if (!m || !['system', 'user', 'assistant'].includes(m.role) || typeof m.content !== 'string')
      return "each message needs a 'role' and a string 'content'";
  }
  if (b.stream === true) return 'this fake serves non-streaming completions only';
  return b as ChatRequest;
}

export async function startFakeLlm(options: LlmFakeOptions = {}): Promise<LlmFake> {
  let reply = options.reply ?? defaultReply;
  let counter = 0;
  const chats: ChatRequest[] = [];
  const fake = await startFakeServer((req, res) => {
    if (req.method !== 'POST' || !['/chat/completions', '/v1/chat/completions'].includes(req.path)) {
      return sendJson(res, 404, {
        error: { message: `Unknown request URL: ${req.method} ${req.path}`, type: 'invalid_request_error', code: 'unknown_url' },
      });
    }
    if (options.key !== undefined && req.headers.authorization !== `Bearer ${options.key}`) {
      return sendJson(res, 401, {
        error: { message: 'Incorrect API key provided.', type: 'invalid_request_error', code: 'invalid_api_key' },
      });
    }
    const chat = parseChat(req.body);
    if (typeof chat === 'string') return sendJson(res, 400, invalid(chat));
    chats.push(chat);
    const content = reply(chat);
    const words = (s: string) => s.split(/\s+/).filter(Boolean).length;
    const prompt = chat.messages.reduce((n, m) => n + words(m.content), 0);
    sendJson(res, 200, {
      id: `chatcmpl-fake-${++counter}`,
      object: 'chat.completion',
      created: 1_700_000_000 + counter,
      model: chat.model,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage: { prompt_tokens: prompt, completion_tokens: words(content), total_tokens: prompt + words(content) },
    });
  });
  return Object.assign(fake, {
    chats: () => [...chats],
    setReply(next: (request: ChatRequest) => string) {
      reply = next;
    },
  });
}
