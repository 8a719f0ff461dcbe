/**
 * The guide's language model: any OpenAI-compatible `POST {LLM_BASE_URL}/chat/completions`
 * (non-streaming). Failures (timeout, network, non-2xx, a body without a text answer) are
 * `UpstreamError`s from the shared HTTP helper; the guide turns them into a context-only answer.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { UpstreamHttp } from './http.ts';

const LLM_SERVICE = 'guide language model';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface LlmClientOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs: number;
  log?: Logger;
}

const Completion = z.looseObject({
  choices: z.array(z.looseObject({ message: z.looseObject({ content: z.string().nullable().optional() }) })).min(1),
});

export class LlmClient {
  private readonly http: UpstreamHttp;

  constructor(private readonly options: LlmClientOptions) {
    this.http = new UpstreamHttp({
      service: LLM_SERVICE,
      baseUrl: options.baseUrl,
      timeoutMs: options.timeoutMs,
      headers: options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {},
      log: options.log,
      maxBytes: 1024 * 1024,
    });
  }

  /** One completion; resolves with the assistant's text (never empty). */
  async chat(
    messages: ChatMessage[],
    options: { signal?: AbortSignal; maxTokens?: number; temperature?: number; timeoutMs?: number } = {},
  ): Promise<string> {
    const result = await this.http.json('/chat/completions', {
      method: 'POST',
      body: {
        model: this.options.model,
        messages,
        max_tokens: options.maxTokens ?? 300,
        temperature: options.temperature ?? 0.7,
        stream: false,
      },
      signal: options.signal,
      timeoutMs: options.timeoutMs,
    });
    const parsed = Completion.safeParse(result.body);
    const content = parsed.success ? parsed.data.choices[0]!.message.content?.trim() : undefined;
    if (!content) throw this.http.failure('body', '/chat/completions: no assistant text in the response');
    return content;
  }
}
