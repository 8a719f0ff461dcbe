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

const verdict = (keyId: number | null): number | HttpError => keyId ?? KEY_INVALID;
const failure = (err: unknown): HttpError => {
  // The store could not be asked (503 UNAVAILABLE): never a 401, never accepted.
  if (err instanceof HttpError) return err;
  throw err;
};

/**
 * The id of the active key presented, or the error to answer (shared with the fast path):
 * synchronous when the key store answers from memory, a promise when it must ask its database.
 */
export function authenticate(keys: KeyStore, presented: string | null): number | HttpError | Promise<number | HttpError> {
  if (!presented) return KEY_MISSING;
  const keyId = keys.verify(presented);
  return keyId instanceof Promise ? keyId.then(verdict, failure) : verdict(keyId);
}

export function requireKey(keys: KeyStore) {
  return async function requireKeyMiddleware(ctx: Context, next: Next) {
    const keyId = await authenticate(keys, presentedKey(ctx));
    if (keyId instanceof HttpError) throw keyId;
    ctx.state.keyId = keyId;
    await next();
  };
}
