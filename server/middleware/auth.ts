/** API-key authentication for keyed routes: `X-API-Key: <key>` or `Authorization: Bearer <key>`. */
import type { Context, Next } from 'koa';
import { HttpError } from '../errors.ts';
import type { KeyStore } from '../state/keys.ts';

export function presentedKey(ctx: Context): string | null {
  const header = ctx.get('x-api-key');
  if (header) return header.trim();
  const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'));
  return match ? match[1]! : null;
}

export function requireKey(keys: KeyStore) {
  return async function requireKeyMiddleware(ctx: Context, next: Next) {
    const key = presentedKey(ctx);
    const keyId = key ? keys.verify(key) : null;
    if (keyId === null) {
      throw new HttpError(401, 'UNAUTHORIZED', key ? 'Invalid or revoked API key' : 'An API key is required (X-API-Key or Authorization: Bearer)');
    }
    ctx.state.keyId = keyId;
    await next();
  };
}
