/**
 * Authentication stages: API keys for keyed routes (`X-API-Key: <key>` or `Authorization: Bearer
 * <key>`), counted against the key's budget; a fixed bearer token for /metrics. Every 401 carries
 * `WWW-Authenticate: Bearer realm="museum"`.
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { HttpError } from '../errors.ts';
import type { KeyStore } from '../state/keys.ts';
import type { RouteStage } from '../types.ts';
import { hitKeyLimit, keyLimitExceeded, keyLimitHeaders, type RateLimitStore } from './rate-limit.ts';

/** The key a request presents, from its X-API-Key or Authorization header values. */
function keyFromHeaders(apiKey: string | undefined, authorization: string | undefined): string | null {
  if (apiKey) return apiKey.trim();
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return match ? match[1]! : null;
}

/** The key presented in a request's headers. */
const presentedKey = (headers: IncomingHttpHeaders): string | null => {
  const apiKey = headers['x-api-key'];
  return keyFromHeaders(Array.isArray(apiKey) ? apiKey[0] : apiKey, headers.authorization);
};

/** On every 401 (RFC 9110: a 401 names the scheme it wants). */
const WWW_AUTHENTICATE = { 'WWW-Authenticate': 'Bearer realm="museum"' } as const;

// Shared instances: refusing a request should cost little (an Error captures a stack when created).
const KEY_INVALID = new HttpError(401, 'UNAUTHORIZED', 'Invalid or revoked API key', WWW_AUTHENTICATE);
const KEY_MISSING = new HttpError(401, 'UNAUTHORIZED', 'An API key is required (X-API-Key or Authorization: Bearer)', WWW_AUTHENTICATE);
const TOKEN_MISSING = new HttpError(401, 'UNAUTHORIZED', 'Metrics need Authorization: Bearer <METRICS_TOKEN>', WWW_AUTHENTICATE);

/**
 * The id of the active key presented, or the error to answer. A store that cannot be asked answers
 * 503 (its HttpError): never a 401, never accepted.
 */
async function authenticate(keys: KeyStore, presented: string | null): Promise<number> {
  if (!presented) throw KEY_MISSING;
  const keyId = await keys.verify(presented);
  if (keyId === null) throw KEY_INVALID;
  return keyId;
}

/** Keyed routes: the key must be active (401), and it is counted against its budget (429). */
export function requireKey(keys: KeyStore, limiter: RateLimitStore): RouteStage {
  return async function requireKeyStage(ex) {
    const keyId = await authenticate(keys, presentedKey(ex.req.headers));
    ex.state.keyId = keyId;
    const decision = await hitKeyLimit(limiter, keyId);
    ex.set(keyLimitHeaders(decision));
    if (!decision.allowed) throw keyLimitExceeded();
  };
}

/** Routes behind a fixed token (/metrics with METRICS_TOKEN): `Authorization: Bearer <token>`, compared in constant time. */
export function requireBearer(token: string): RouteStage {
  const expected = Buffer.from(token);
  return function requireBearerStage(ex) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(ex.get('authorization'));
    const presented = Buffer.from(match?.[1] ?? '');
    // Constant time for equal lengths; the length of a token is no secret worth the complexity.
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) throw TOKEN_MISSING;
  };
}
