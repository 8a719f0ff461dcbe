/** API-key authentication for keyed routes: `X-API-Key: <key>` or `Authorization: Bearer <key>`. */
import type { Context, Next } from 'koa';
import { HttpError } from '../errors.ts';
import type { KeyStore } from '../state/keys.ts';

/** The key a request presents, from its X-API-Key or Authorization header values. */
export function keyFromHeaders(apiKey: string | undefined, authorization: string | undefined): string | null {
  if (apiKey) return apiKey.trim();
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return match ? match[1]! : null;
}

export const presentedKey = (ctx: Context): string | null => keyFromHeaders(ctx.get('x-api-key'), ctx.get('authorization'));

// Shared instances: refusing a request should cost little (an Error captures a stack when created).
const KEY_INVALID = new HttpError(401, 'UNAUTHORIZED', 'Invalid or revoked API key');
const KEY_MISSING = new HttpError(401, 'UNAUTHORIZED', 'An API key is required (X-API-Key or Authorization: Bearer)');

/** The id of the active key presented, or the 401 to answer (shared with the fast path). */
export function authenticate(keys: KeyStore, presented: string | null): number | HttpError {
  const keyId = presented ? keys.verify(presented) : null;
  if (keyId !== null) return keyId;
  return presented ? KEY_INVALID : KEY_MISSING;
}

export function requireKey(keys: KeyStore) {
  return async function requireKeyMiddleware(ctx: Context, next: Next) {
    const keyId = authenticate(keys, presentedKey(ctx));
    if (keyId instanceof HttpError) throw keyId;
    ctx.state.keyId = keyId;
    await next();
  };
}
