/** API-key authentication for keyed routes: `X-API-Key: <key>` or `Authorization: Bearer <key>`. */
import type { IncomingHttpHeaders } from 'node:http';
import { HttpError } from '../errors.ts';
import type { KeyStore } from '../state/keys.ts';
import type { MuseumMiddleware } from '../types.ts';
import { hitKeyLimit, keyLimitExceeded, keyLimitHeaders, type RateLimitStore } from './rate-limit.ts';

/** The key a request presents, from its X-API-Key or Authorization header values. */
export function keyFromHeaders(apiKey: string | undefined, authorization: string | undefined): string | null {
  if (apiKey) return apiKey.trim();
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return match ? match[1]! : null;
}

/** The key presented in a request's headers (shared with the fast path). */
export const presentedKey = (headers: IncomingHttpHeaders): string | null => {
  const apiKey = headers['x-api-key'];
  return keyFromHeaders(Array.isArray(apiKey) ? apiKey[0] : apiKey, headers.authorization);
};

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

/** Keyed routes: the key must be active (401), and it is counted against its budget (429). */
export function requireKey(keys: KeyStore, limiter: RateLimitStore): MuseumMiddleware {
  return async function requireKeyMiddleware(ctx, next) {
    const keyId = await authenticate(keys, presentedKey(ctx.req.headers));
    if (keyId instanceof HttpError) throw keyId;
    ctx.state.keyId = keyId;
    const decision = await hitKeyLimit(limiter, keyId);
    ctx.set(keyLimitHeaders(decision));
    if (!decision.allowed) throw keyLimitExceeded();
    await next();
  };
}
