/** An answer — status, headers, body — put on a Koa context (snapshot answers, files, error envelopes). */
import type { MuseumContext, RawAnswer } from './types.ts';

/** Put `answer` on `ctx`: a null body is none (304, HEAD), so Koa sends the status alone. */
export function answerWith(ctx: Pick<MuseumContext, 'status' | 'set' | 'body'>, answer: RawAnswer): void {
  ctx.status = answer.status;
  ctx.set(answer.headers);
  if (answer.body !== null) ctx.body = answer.body;
}
