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
import type { Exchange } from '../exchange.ts';
import { hitKeyLimit, keyLimitExceeded, keyLimitHeaders, type RateDecision, type RateLimitStore } from './rate-limit.ts';

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

const verdict = (keyId: number | null): number | HttpError => keyId ?? KEY_INVALID;
const failure = (err: unknown): HttpError => {
  // The store could not be asked (503 UNAVAILABLE): never a 401, never accepted.
  if (err instanceof HttpError) return err;
  throw err;
};

/**
 * The id of the active key presented, or the error to answer:
 * synchronous when the key store answers from memory, a promise when it must ask its database.
 */
function authenticate(keys: KeyStore, presented: string | null): number | HttpError | Promise<number | HttpError> {
  if (!presented) return KEY_MISSING;
  const keyId = keys.verify(presented);
  return keyId instanceof Promise ? keyId.then(verdict, failure) : verdict(keyId);
}

/** Keyed routes: the key must be active (401), and it is counted against its budget (429). */
export function requireKey(keys: KeyStore, limiter: RateLimitStore): RouteStage {
  const counted = (ex: Exchange, decision: RateDecision) => {
    ex.set(keyLimitHeaders(decision));
    if (!decision.allowed) throw keyLimitExceeded();
  };
  const admitted = (ex: Exchange, keyId: number | HttpError) => {
    if (keyId instanceof HttpError) throw keyId;
    ex.state.keyId = keyId;
    const decision = hitKeyLimit(limiter, keyId);
    return decision instanceof Promise ? decision.then((d) => counted(ex, d)) : counted(ex, decision);
  };
  // Synchronous while the key store and the limiter answer from memory (SQLite, the in-process
  // limiter); a promise only when one of them must ask a server (PostgreSQL, Redis).
  return function requireKeyStage(ex) {
    const keyId = authenticate(keys, presentedKey(ex.req.headers));
    return keyId instanceof Promise ? keyId.then((id) => admitted(ex, id)) : admitted(ex, keyId);
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
