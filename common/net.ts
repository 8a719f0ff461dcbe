/**
 * Outbound HTTP on someone else's say-so: the one GET every fetch of the bake goes through (models,
 * their resources, preview images, the content store's files) and the CLI's own downloads.
 *
 * - Only http(s). The host is resolved here and every address it resolves to is checked; the
 *   socket connects to exactly the address checked (the lookup is pinned into the connection, so a
 *   second DNS answer cannot slip in between check and connect). Loopback, private (RFC 1918, CGNAT,
 *   ULA), link-local, cloud metadata, unspecified, multicast and reserved addresses are refused,
 *   also inside IPv4-mapped, NAT64 and 6to4 IPv6 forms.
 * - Redirects are followed by hand, at most `maxRedirects`, each hop checked the same way;
 *   credentials (Authorization, X-API-Key, Cookie) are dropped when a hop leaves the origin, and
 *   with `stayOnOrigin` such a hop is refused.
 * - The caller's signal bounds the time; `maxBytes` bounds the body (the stream fails past it).
 * - An operator trusts hosts explicitly: the origins of configured services (the content store) and
 *   `BAKE_ALLOW_HOSTS` (comma-separated `host[:port]`); those are reached whatever they resolve to.
 *
 * The answer is a WHATWG `Response`, so callers read it like `fetch`'s. Refusals are `NetRefused`
 * (permanent, one line); network failures are `NetworkError` (cause = the socket error).
 * `withRetries` is the one retry-with-backoff loop of the bake's downloads.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { Readable, Transform } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

export interface NetPolicy {
  /** `host` or `host:port` entries reached whatever they resolve to (BAKE_ALLOW_HOSTS). */
  allowHosts: readonly AllowedHost[];
  /** Origins trusted as configured (e.g. CONTENT_UPSTREAM_URL's). */
  trustedOrigins: readonly string[];
  /** No address checks at all: the operator named the URL themselves (e.g. `museum souls verify`). */
  anyAddress?: boolean;
}

export interface AllowedHost {
  host: string;
  /** null: any port. */
  port: number | null;
}

/** A fetch refused by policy (address, scheme, redirects): permanent, one line for operators. */
export class NetRefused extends Error {
  override name = 'NetRefused';
}

/** The connection failed (refused, reset, DNS); `cause` is the socket error. */
class NetworkError extends Error {
  override name = 'NetworkError';
}

/** The body went past the caller's `maxBytes`. */
export class BodyTooLarge extends Error {
  override name = 'BodyTooLarge';
  constructor(readonly limit: number) {
    super(`more than ${limit} bytes, over the limit`);
  }
}

// ---------------------------------------------------------------------------------------------
// Addresses

type V4Range = [base: number, bits: number, what: string];
const v4 = (a: string) => a.split('.').reduce((n, part) => n * 256 + Number(part), 0);
const V4_RANGES: V4Range[] = (
  [
    ['169.254.169.254', 32, 'a cloud metadata address'],
    ['0.0.0.0', 8, 'an unspecified address'],
    ['10.0.0.0', 8, 'a private address'],
    ['100.64.0.0', 10, 'a shared (CGNAT) address'],
    ['127.0.0.0', 8, 'a loopback address'],
    ['169.254.0.0', 16, 'a link-local address'],
    ['172.16.0.0', 12, 'a private address'],
    ['192.0.0.0', 24, 'a reserved address'],
    ['192.0.2.0', 24, 'a reserved address'],
    ['192.88.99.0', 24, 'a reserved address'],
    ['192.168.0.0', 16, 'a private address'],
    ['198.18.0.0', 15, 'a reserved address'],
    ['198.51.100.0', 24, 'a reserved address'],
    ['203.0.113.0', 24, 'a reserved address'],
    ['224.0.0.0', 4, 'a multicast address'],
    ['240.0.0.0', 4, 'a reserved address'],
  ] as const
).map(([base, bits, what]) => [v4(base), bits, what]);

function v4Problem(n: number): string | null {
  for (const [base, bits, what] of V4_RANGES) {
    const size = 2 ** (32 - bits);
    if (n >= base && n < base + size) return what;
  }
  return null;
}

/** The eight 16-bit words of an IPv6 address (zone id ignored), or null. */
function v6Words(address: string): number[] | null {
  let text = address.replace(/%.*$/, '').toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const n = v4(dotted[1]!);
    text = `${text.slice(0, dotted.index)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail, extra] = text.split('::');
  if (extra !== undefined) return null;
  const parse = (part: string | undefined) => (part ? part.split(':').map((w) => parseInt(w, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  const words = tail === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  return words.length === 8 && words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : null;
}

function v6Problem(words: number[]): string | null {
  const [w0, w1, w2, w3, w4, w5, w6, w7] = words as [number, number, number, number, number, number, number, number];
  const embedded = (hi: number, lo: number) => hi * 65536 + lo;
  const inner = (what: string | null, form: string) => (what ? `${what} (${form})` : null);
  if (w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0 && w4 === 0) {
    if (w5 === 0xffff) return inner(v4Problem(embedded(w6, w7)), 'IPv4-mapped');
    if (w5 === 0 && w6 === 0 && w7 === 0) return 'an unspecified address';
    if (w5 === 0 && w6 === 0 && w7 === 1) return 'a loopback address';
    return 'a reserved address';
  }
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return inner(v4Problem(embedded(w6, w7)), 'NAT64');
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 1) return 'a private address (local NAT64)';
  if (w0 === 0x2002) return inner(v4Problem(embedded(w1, w2)), '6to4');
  if (w0 === 0xfd00 && w1 === 0x0ec2 && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0 && w6 === 0 && w7 === 0x254)
    return 'a cloud metadata address';
  if ((w0 & 0xfe00) === 0xfc00) return 'a private (unique local) address';
  if ((w0 & 0xffc0) === 0xfe80) return 'a link-local address';
  if ((w0 & 0xffc0) === 0xfec0) return 'a site-local address';
  if ((w0 & 0xff00) === 0xff00) return 'a multicast address';
  if (w0 === 0x2001 && w1 === 0) return 'a Teredo tunnel address';
  if (w0 === 0x2001 && w1 === 0x0db8) return 'a reserved address';
  if ((w0 & 0xe000) !== 0x2000) return 'a reserved address'; // only global unicast (2000::/3) is public
  return null;
}

/** Why an IP address may not be fetched on someone else's say-so, or null when it is public. */
export function addressProblem(address: string): string | null {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return v4Problem(v4(address));
  if (family === 6) {
    const words = v6Words(address);
    return words ? v6Problem(words) : 'not a valid address';
  }
  return 'not an IP address';
}

/**
 * What a per-client limit counts a client address as (decisions: every per-IP limit and cap): an
 * IPv6 client by its /64 — one home connection or one server gets a whole /64, so its addresses
 * are one client — written `2001:db8:1:2::/64`; an IPv4 client, also in its IPv4-mapped IPv6 form
 * (`::ffff:192.0.2.1`), by its address. Anything else (no address known) is its own bucket.
 */
export function clientBucket(address: string): string {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return address;
  if (family !== 6) return address;
  const words = v6Words(address);
  if (!words) return address;
  if (words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff)
    return `${words[6]! >>> 8}.${words[6]! & 255}.${words[7]! >>> 8}.${words[7]! & 255}`;
  return `${words
    .slice(0, 4)
    .map((w) => w.toString(16))
    .join(':')}::/64`;
}

// ---------------------------------------------------------------------------------------------
// Policy

const HOST_ENTRY = /^(?:\[([0-9a-f:.]+)\]|([a-z0-9.-]+|[0-9a-f:]+))(?::(\d{1,5}))?$/i;

/** Parse `BAKE_ALLOW_HOSTS` (comma-separated `host[:port]`, IPv6 in brackets). Throws one line. */
export function parseAllowHosts(value: string | undefined): AllowedHost[] {
  const out: AllowedHost[] = [];
  for (const raw of (value ?? '').split(',')) {
    const entry = raw.trim();
    if (!entry) continue;
    const match = HOST_ENTRY.exec(entry);
    const port = match?.[3] === undefined ? null : Number(match[3]);
    if (!match || (port !== null && (port < 1 || port > 65535))) throw new Error(`BAKE_ALLOW_HOSTS: "${entry}" is not host or host:port`);
    out.push({ host: (match[1] ?? match[2]!).toLowerCase(), port });
  }
  return out;
}

/** The bake's policy: BAKE_ALLOW_HOSTS, and the content store's origin (CONTENT_UPSTREAM_URL) trusted. */
export function netPolicyFromEnv(env: NodeJS.ProcessEnv = process.env): NetPolicy {
  const trustedOrigins: string[] = [];
  if (env.CONTENT_UPSTREAM_URL) {
    try {
      trustedOrigins.push(new URL(env.CONTENT_UPSTREAM_URL).origin);
    } catch {
      /* an invalid URL trusts nothing; the sync reports it */
    }
  }
  return { allowHosts: parseAllowHosts(env.BAKE_ALLOW_HOSTS), trustedOrigins };
}

/** `policy` with `url`'s origin trusted too (a service the operator configured). */
export const trustingOrigin = (policy: NetPolicy, url: string): NetPolicy => ({
  ...policy,
  trustedOrigins: [...policy.trustedOrigins, new URL(url).origin],
});

const bareHost = (url: URL) => url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
const portOf = (url: URL) => Number(url.port || (url.protocol === 'https:' ? 443 : 80));

function explicitlyAllowed(url: URL, policy: NetPolicy): boolean {
  if (policy.anyAddress || policy.trustedOrigins.includes(url.origin)) return true;
  const host = bareHost(url);
  return policy.allowHosts.some((a) => a.host === host && (a.port === null || a.port === portOf(url)));
}

const refusal = (url: URL, address: string, problem: string) =>
  new NetRefused(
    `${url.href} refused: ${url.host} ${address === bareHost(url) ? 'is' : `resolves to ${address},`} ${problem} (allow the host with ` +
      `BAKE_ALLOW_HOSTS)`,
  );

/** A DNS lookup that refuses non-public answers; the connection uses exactly what it returns. */
function checkedLookup(url: URL): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0, hints: options.hints }, (err, addresses: LookupAddress[]) => {
      if (err) return (callback as (e: Error) => void)(err);
      for (const { address } of addresses) {
        const problem = addressProblem(address);
        if (problem) return (callback as (e: Error) => void)(refusal(url, address, problem));
      }
      if (options.all) (callback as unknown as (e: null, all: LookupAddress[]) => void)(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

// ---------------------------------------------------------------------------------------------
// The GET

export interface GuardedGet {
  policy: NetPolicy;
  /** Bounds the whole exchange (required: nothing here waits forever). */
  signal: AbortSignal;
  headers?: Record<string, string>;
  /** Largest body accepted; the body stream fails with BodyTooLarge past it. */
  maxBytes?: number;
  /** Default 5. */
  maxRedirects?: number;
  /** Refuse a redirect to another origin (a model's resources come from the model's own origin only). */
  stayOnOrigin?: boolean;
}

const CREDENTIALS = ['authorization', 'x-api-key', 'cookie', 'proxy-authorization'];
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([204, 205, 304]);

/** GET `url` under `policy`, following redirects by hand; see the module comment. */
export async function guardedGet(url: string, options: GuardedGet): Promise<Response> {
  const maxRedirects = options.maxRedirects ?? 5;
  let current = new URL(url);
  const origin = current.origin;
  let headers = Object.fromEntries(Object.entries(options.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  for (let hop = 0; ; hop++) {
    const res = await requestOnce(current, headers, options);
    const location = res.headers.location;
    if (!REDIRECTS.has(res.statusCode ?? 0) || !location) return toResponse(res, options.maxBytes);
    res.destroy();
    if (hop >= maxRedirects) throw new NetRefused(`${url} refused: more than ${maxRedirects} redirects`);
    current = new URL(location, current);
    if (options.stayOnOrigin && current.origin !== origin)
      throw new NetRefused(`${url} refused: it redirects to another origin (${current.origin})`);
    if (current.origin !== origin) headers = Object.fromEntries(Object.entries(headers).filter(([k]) => !CREDENTIALS.includes(k)));
  }
}

function requestOnce(url: URL, headers: Record<string, string>, options: GuardedGet): Promise<http.IncomingMessage> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return Promise.reject(new NetRefused(`${url.href} refused: only http and https are fetched`));
  const allowed = explicitlyAllowed(url, options.policy);
  const host = bareHost(url);
  if (!allowed && isIP(host)) {
    const problem = addressProblem(host);
    if (problem) return Promise.reject(refusal(url, host, problem));
  }
  options.signal.throwIfAborted();
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(url, {
      method: 'GET',
      headers: { 'user-agent': 'museum-bake', ...headers },
      signal: options.signal,
      agent: false, // a connection is checked when it is made: never reuse one across policies
      ...(allowed ? {} : { lookup: checkedLookup(url) }),
    });
    req.once('response', resolve);
    req.once('error', (err: Error) => {
      if (options.signal.aborted) reject(options.signal.reason);
      else if (err instanceof NetRefused) reject(err);
      else reject(new NetworkError(`${url.href}: ${(err as NodeJS.ErrnoException).code ?? err.message}`, { cause: err }));
    });
    req.end();
  });
}

function toResponse(res: http.IncomingMessage, maxBytes: number | undefined): Response {
  const headers = new Headers();
  for (let i = 0; i < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
  const status = res.statusCode!;
  if (NULL_BODY.has(status)) {
    res.resume();
    return new Response(null, { status, statusText: res.statusMessage, headers });
  }
  let body: Readable = res;
  if (maxBytes !== undefined) {
    let total = 0;
    body = res.pipe(
      new Transform({
        transform(chunk: Buffer, _encoding, done) {
          total += chunk.length;
          if (total > maxBytes) {
            res.destroy();
            done(new BodyTooLarge(maxBytes));
          } else done(null, chunk);
        },
      }),
    );
    res.once('error', (err) => body.destroy(err));
  }
  return new Response(Readable.toWeb(body) as ReadableStream<Uint8Array>, { status, statusText: res.statusMessage, headers });
}

// ---------------------------------------------------------------------------------------------
// Retries

/** An attempt that failed in a way worth retrying (timeout, network error, 408/429/5xx). */
export class Transient extends Error {
  override name = 'Transient';
}

/** All attempts failed transiently; `problem` is the last one's message. */
export class RetriesExhausted extends Error {
  override name = 'RetriesExhausted';
  constructor(
    readonly attempts: number,
    readonly problem: string,
  ) {
    super(`failed after ${attempts} attempts: ${problem}`);
  }
}

export interface RetryOptions {
  /** Attempts after the first. */
  retries: number;
  /** First backoff delay; doubles per retry. */
  backoffMs: number;
  /** Told before each retry, with the problem of the attempt that failed. */
  onRetry?: (problem: string) => void;
}

/** Run `attempt` until it succeeds, retrying `Transient` failures with exponential backoff. */
export async function withRetries<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  let problem = '';
  for (let i = 0; i <= options.retries; i++) {
    if (i > 0) {
      await sleep(options.backoffMs * 2 ** (i - 1));
      options.onRetry?.(problem);
    }
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof Transient)) throw err;
      problem = err.message;
    }
  }
  throw new RetriesExhausted(options.retries + 1, problem);
}
