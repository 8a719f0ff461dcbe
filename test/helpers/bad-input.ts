/**
 * Bad-input fuzzing driven by the OpenAPI document: every documented operation receives malformed
 * requests — hostile path segments and query strings, traversal, huge numbers, unicode, duplicate
 * parameters, bad headers, wrong methods, oversized and invalid JSON bodies — over node:http or raw
 * sockets where a normal client would refuse to send them. Each answer is checked: no 5xx (except
 * 503 UNCONFIGURED when upstreams are not configured), every error in the envelope with the code of
 * its status, an X-Request-Id on everything, no stack traces.
 *
 * Deterministic for a seed, so a failure can be replayed. Routes added later are covered because the
 * requests are generated from the document. Use with fakes of the upstreams by starting the server
 * with their URLs and `allowUnconfigured: false`.
 */
import http from 'node:http';
import { nodeRequest, type RawResponse, rawRequest } from './raw-http.ts';
import type { OpenApiDoc, OpenApiOperation } from './openapi.ts';
import { mulberry32 as rng } from '../../common/random.ts';

export interface BadInputOptions {
  /** Requests to send in total, spread evenly over the documented operations (default 1200). */
  count?: number;
  seed?: number;
  /** Valid keys for keyed routes; rotated so the per-key limit does not hide the routes behind 429s. */
  keys: string[];
  /** Accept 503 UNCONFIGURED (upstream-backed routes without an upstream). */
  allowUnconfigured?: boolean;
  /** Concurrent requests in flight (default 8). */
  concurrency?: number;
  /** Valid examples for path parameters, by name (so mutations of one parameter reach the handler). */
  pathExamples?: Record<string, string>;
}

export interface BadInputReport {
  sent: number;
  byStatus: Record<number, number>;
  /** One line per answer that broke a rule (empty when everything held). */
  failures: string[];
  operations: string[];
}

/** The error code each status must carry (decisions.md). */
const CODE_FOR_STATUS: Record<number, string[]> = {
  400: ['BAD_REQUEST'],
  401: ['UNAUTHORIZED'],
  404: ['NOT_FOUND'],
  405: ['METHOD_NOT_ALLOWED'],
  409: ['CONFLICT'],
  413: ['PAYLOAD_TOO_LARGE'],
  416: ['RANGE_NOT_SATISFIABLE'],
  429: ['RATE_LIMITED'],
  431: ['BAD_REQUEST'],
  503: ['UNCONFIGURED'],
};

/** Hostile strings, invalid JSON bodies and wrong methods (bench/soak.ts sends some of them too). */
export const HOSTILE: string[] = [
  '',
  ' ',
  '..',
  '../../../../etc/passwd',
  '..%2f..%2fmanifest.json',
  '%2e%2e%2f%2e%2e%2f',
  '%00',
  '%',
  '%%',
  '%zz',
  '%E0%A4%A',
  '%C0%AE%C0%AE%C0%AF',
  '-1',
  '0',
  '-0',
  '00001',
  '1.5',
  '1e3',
  '1e309',
  '0x1F',
  'NaN',
  'Infinity',
  '99999999999999999999999999999999',
  String(Number.MAX_SAFE_INTEGER + 2),
  '9'.repeat(400),
  'null',
  'undefined',
  'true',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  'hasOwnProperty',
  '<script>alert(1)</script>',
  "' OR '1'='1' --",
  '${jndi:ldap://x/a}',
  '{{7*7}}',
  '😀'.repeat(40),
  'Ω≈ç√∫˜µ≤≥÷',
  '\u202egnp.exe',
  'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇',
  'a'.repeat(6000),
  ',,,',
  'a,,b,',
  '+',
  '&',
  '=',
  '#',
  ';',
  '\\..\\..\\windows',
  `0x${'f'.repeat(40)}`,
  `0x${'g'.repeat(40)}`,
  `museum_${'z'.repeat(48)}`,
];

export const BAD_JSON: string[] = [
  '{',
  '{"a":',
  'nul',
  '{"a":1,}',
  "{'a':1}",
  '[1,2',
  '"unterminated',
  '\u0000',
  '{"a":NaN}',
  '{"a":1e999999}',
  '[]',
  'null',
  '42',
  '"text"',
  '{}',
  '['.repeat(20_000) + ']'.repeat(20_000),
];

export const METHODS_WRONG = ['PUT', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND', 'TRACE', 'PURGE', 'LINK', 'SEARCH', 'MKCOL'];

interface Target {
  method: string;
  template: string;
  operation: OpenApiOperation;
  keyed: boolean;
}

interface PlannedRequest {
  label: string;
  /** Sent over a raw socket (anything node:http would refuse). */
  raw?: string | Buffer;
  node?: { method: string; path: string; headers: Record<string, string | string[]>; body?: string | Buffer };
  method: string;
}

/** A value that satisfies a (simple) JSON schema, to mutate one field at a time. */
function sample(schema: unknown, doc: OpenApiDoc, depth = 0): unknown {
  const s = resolve(schema, doc) as Record<string, unknown>;
  if (depth > 6 || !s || typeof s !== 'object') return null;
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const)
    if (Array.isArray(s[key])) return sample((s[key] as unknown[])[0], doc, depth + 1);
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      const props = (s.properties ?? {}) as Record<string, unknown>;
      for (const name of (s.required as string[] | undefined) ?? Object.keys(props)) out[name] = sample(props[name], doc, depth + 1);
      return out;
    }
    case 'array':
      return Array.from({ length: Number(s.minItems ?? 1) }, () => sample(s.items, doc, depth + 1));
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : 1;
    case 'boolean':
      return true;
    case 'string':
      return 'museum';
    default:
      return null;
  }
}

function resolve(schema: unknown, doc: OpenApiDoc): unknown {
  const ref = (schema as { $ref?: string } | null)?.$ref;
  if (!ref?.startsWith('#/components/schemas/')) return schema;
  return doc.components?.schemas?.[ref.slice('#/components/schemas/'.length)];
}

/** Mutations of a valid body: wrong types, missing and extra fields, hostile strings, huge numbers. */
function mutateBody(valid: unknown, pick: <T>(list: T[]) => T): unknown {
  if (!valid || typeof valid !== 'object' || Array.isArray(valid)) return pick([valid, [valid], { value: valid }]);
  const obj = { ...(valid as Record<string, unknown>) };
  const keys = Object.keys(obj);
  const field = keys.length ? pick(keys) : 'field';
  switch (pick(['type', 'missing', 'extra', 'string', 'number', 'nested'])) {
    case 'type':
      obj[field] = pick([123, true, null, [], {}, 'text', -1.5]);
      break;
    case 'missing':
      delete obj[field];
      break;
    case 'extra':
      obj[pick(HOSTILE) || 'x'] = pick(HOSTILE);
      // biome-ignore lint/complexity/useLiteralKeys: an own 'constructor' key, as a hostile JSON body carries it
      obj['constructor'] = { prototype: { polluted: true } };
      break;
    case 'string':
      obj[field] = pick(HOSTILE);
      break;
    case 'number':
      obj[field] = pick([1e308, -1e308, 2 ** 53 + 1, -0, 0.1, 1e-300]);
      break;
    default:
      obj[field] = JSON.parse('['.repeat(200) + ']'.repeat(200));
  }
  return obj;
}

function plan(
  doc: OpenApiDoc,
  targets: Target[],
  options: Required<Pick<BadInputOptions, 'count' | 'seed' | 'keys'>> & BadInputOptions,
): PlannedRequest[] {
  const random = rng(options.seed);
  const pick = <T>(list: T[]): T => list[Math.floor(random() * list.length)]!;
  let keyIndex = 0;
  const key = () => options.keys[keyIndex++ % options.keys.length]!;
  const fill = (template: string, override?: [string, string]) =>
    template.replace(/\{(\w+)\}/g, (_, name: string) =>
      override && override[0] === name ? override[1] : encodeURIComponent(options.pathExamples?.[name] ?? '1'),
    );
  const out: PlannedRequest[] = [];
  const perTarget = Math.ceil(options.count / targets.length);
  for (const target of targets) {
    const params = target.operation.parameters ?? [];
    const pathParams = params.filter((p) => p.in === 'path').map((p) => p.name);
    const queryParams = params.filter((p) => p.in === 'query').map((p) => p.name);
    const bodySchema = target.operation.requestBody?.content['application/json']?.schema;
    const validBody = bodySchema ? sample(bodySchema, doc) : undefined;
    const label = `${target.method} ${target.template}`;
    const authHeaders = (): Record<string, string> => (target.keyed && random() < 0.85 ? { 'X-API-Key': key() } : {});
    for (let i = 0; i < perTarget; i++) {
      const kind = pick(['path', 'path', 'query', 'query', 'query', 'segments', 'headers', 'headers', 'method', 'body', 'raw']);
      const headers: Record<string, string | string[]> = authHeaders();
      let path = fill(target.template);
      let method = target.method;
      let body: string | Buffer | undefined;
      if (kind === 'path' && pathParams.length) {
        const value = pick(HOSTILE);
        // Mostly encoded; sometimes verbatim (only what node:http lets through).
        const verbatim = random() < 0.3 && /^[\x21-\x7e]*$/.test(value) && !value.includes('?') && !value.includes('#');
        path = fill(target.template, [pick(pathParams), verbatim ? value : encodeURIComponent(value)]);
      } else if (kind === 'query' || (kind === 'path' && !pathParams.length)) {
        const names = [
          ...queryParams,
          pick(['page', 'limit', 'q', 'width', 'format', 'include', 'fields', 'search', 'collection', 'seed', '__proto__', 'a[b]', 'x[]']),
        ];
        const parts: string[] = [];
        const n = 1 + Math.floor(random() * 4);
        for (let j = 0; j < n; j++) {
          const name = pick(names);
          const repeat = random() < 0.3 ? 2 + Math.floor(random() * 3) : 1;
          for (let r = 0; r < repeat; r++)
            parts.push(
              `${encodeURIComponent(name)}=` +
                `${random() < 0.8 ? encodeURIComponent(pick(HOSTILE)) : pick(['%', '%zz', '%E0%A4%A', '%00', '&&&', '=='])}`,
            );
        }
        if (random() < 0.2) parts.push(pick(['&', '=', 'noval', '=novar', '&&=&']));
        path += `?${parts.join('&')}`;
      } else if (kind === 'segments') {
        const segment = encodeURIComponent(pick(HOSTILE));
        path = pick([
          `${path}/${segment}`,
          `${path}/${segment}/..`,
          `${path}//`,
          `${path}/.`,
          path.replace(/\/[^/]+$/, `/${segment}`),
          `${path}%2F..%2F..`,
        ]);
      } else if (kind === 'headers') {
        const value = pick(HOSTILE).replace(/[^\x20-\x7e]/g, '?');
        const [name, headerValue] = pick<[string, string | string[]]>([
          ['X-API-Key', value],
          ['X-API-Key', [key(), key()]],
          ['Authorization', `Bearer ${value}`],
          ['Authorization', 'Bearer'],
          ['Authorization', `Basic ${Buffer.from('a:b').toString('base64')}`],
          ['Range', pick(['bytes=', 'bytes=-', 'bytes=5-1', 'bytes=0-1,2-3,4-5', `bytes=${value}`, 'bytes=99999999999999999999-'])],
          ['If-None-Match', pick(['*', 'W/', '""', value, `"${value}"`])],
          ['If-Range', value],
          ['X-Request-Id', value],
          ['X-Forwarded-For', `${value}, 1.2.3.4`],
          ['Accept', value],
          ['Content-Type', value],
          ['Accept-Encoding', 'gzip, br, zstd, identity;q=0'],
          ['Cookie', value],
          ['X-Exhibition-Token', value],
        ]);
        headers[name] = headerValue;
      } else if (kind === 'method') {
        method = pick(METHODS_WRONG.concat(target.method === 'GET' ? ['POST', 'HEAD'] : ['GET', 'HEAD']));
        if (method === 'POST' || method === 'PUT' || method === 'PATCH') {
          body = JSON.stringify({ any: pick(HOSTILE) });
          headers['Content-Type'] = 'application/json';
        }
      } else if (kind === 'body') {
        const variant = pick(['invalid', 'mutated', 'mutated', 'proto', 'type', 'oversized', 'empty']);
        if (method === 'GET') method = pick(['GET', 'POST']);
        headers['Content-Type'] = 'application/json';
        if (variant === 'invalid') body = pick(BAD_JSON);
        else if (variant === 'mutated') body = JSON.stringify(mutateBody(validBody ?? {}, pick));
        else if (variant === 'proto')
          body = `{"__proto__":{"polluted":true},${JSON.stringify(validBody ?? {}).slice(1)}`.replace(',}', '}');
        else if (variant === 'type') {
          body = JSON.stringify(validBody ?? {});
          headers['Content-Type'] = pick([
            'text/plain',
            'application/x-www-form-urlencoded',
            'multipart/form-data; boundary=x',
            'application/json; charset=latin1',
            '',
          ]);
        } else if (variant === 'oversized') body = `{"question":"${'x'.repeat(1024 * 1024 + 100)}"}`;
        else body = '';
      } else {
        // Raw bytes node:http will not send: control characters, broken framing, bare LF, absurd versions.
        const auth = target.keyed ? `X-API-Key: ${key()}\r\n` : '';
        const target404 = fill(target.template);
        out.push({
          label,
          method: target.method,
          raw: pick([
            `${target.method} ${target404}/${pick(['..', '%2e%2e', '..%00', '%c0%ae%c0%ae'])}/manifest.json HTTP/1.1\r\nHost: ` +
              `x\r\n${auth}\r\n`,
            `${target.method} ${target404} HTTP/1.1\r\nHost: x\r\n${auth}X-Bad\u0001: y\r\n\r\n`,
            `${target.method} ${target404} HTTP/1.1\r\nHost: x\r\n${auth}X-API-Key: ${'\u00ff'.repeat(60)}\r\n\r\n`,
            `${target.method} ${target404} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!`,
            `${target.method} ${target404} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: chunked\r\n\r\nzz\r\nnope\r\n0\r\n\r\n`,
            `${target.method} ${target404} HTTP/9.9\r\nHost: x\r\n\r\n`,
            `${target.method} ${target404}\u0000 HTTP/1.1\r\nHost: x\r\n\r\n`,
            `${target.method} ${target404} HTTP/1.1\nHost: x\n${auth.replace('\r\n', '\n')}\n`,
            `${target.method} ${target404}?${'a=1&'.repeat(3000)} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`,
            `${target.method} ${target404} HTTP/1.1\r\nHost: x\r\n${auth}X-Huge: ${'h'.repeat(70_000)}\r\n\r\n`,
            `${target.method} ${target404} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ` +
              `9\r\n\r\n{"a":"\u00e9\u00ff"}`,
          ]),
        });
        continue;
      }
      out.push({ label, method, node: { method, path, headers, body } });
    }
  }
  return out;
}

function check(request: PlannedRequest, res: RawResponse, allowUnconfigured: boolean): string | null {
  const sent = request.node
    ? `${request.node.method} ${request.node.path.slice(0, 120)}`
    : JSON.stringify(String(request.raw).slice(0, 80));
  const where = `${request.label} ${sent}`;
  if (res.status === 0) return `${where}: no answer (${res.body.toString().slice(0, 100)})`;
  if (!res.headers['x-request-id']) return `${where}: ${res.status} without X-Request-Id`;
  if (res.status >= 500 && !(res.status === 503 && allowUnconfigured)) return `${where}: ${res.status}`;
  if (res.status < 400) return null;
  if (request.method === 'HEAD' || (request.node?.method ?? '') === 'HEAD') return null;
  let body: { errors?: Array<{ message?: unknown; extensions?: { code?: unknown } }> };
  try {
    body = JSON.parse(res.body.toString('utf8')) as typeof body;
  } catch {
    return `${where}: ${res.status} body is not JSON: ${res.body.toString('utf8').slice(0, 80)}`;
  }
  const error = body.errors?.[0];
  if (!Array.isArray(body.errors) || typeof error?.message !== 'string' || typeof error.extensions?.code !== 'string') {
    return `${where}: ${res.status} body is not the error envelope`;
  }
  const allowed = CODE_FOR_STATUS[res.status];
  if (!allowed) return `${where}: unexpected status ${res.status} (${error.extensions.code})`;
  if (!allowed.includes(error.extensions.code)) return `${where}: ${res.status} with code ${error.extensions.code}`;
  if (/\n\s+at |Error: |node_modules|\.ts:\d+/.test(error.message))
    return `${where}: error message leaks internals: ${error.message.slice(0, 120)}`;
  return null;
}

/** Fire malformed requests at every operation of `doc` on the server at `port`. */
export async function fireBadInput(port: number, doc: OpenApiDoc, options: BadInputOptions): Promise<BadInputReport> {
  const targets: Target[] = [];
  for (const [template, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      targets.push({ method: method.toUpperCase(), template, operation, keyed: (operation.security?.length ?? 0) > 0 });
    }
  }
  const requests = plan(doc, targets, { count: 1200, seed: 20251122, concurrency: 8, allowUnconfigured: true, ...options });
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency ?? 8 });
  const report: BadInputReport = { sent: 0, byStatus: {}, failures: [], operations: targets.map((t) => `${t.method} ${t.template}`) };
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const request = requests[next++]!;
      let res: RawResponse;
      try {
        res =
          request.raw !== undefined
            ? await rawRequest(port, request.raw)
            : await nodeRequest(port, { ...request.node!, timeoutMs: 15_000 }, agent);
      } catch (err) {
        // The server may close a connection on a request it cannot parse; that is an answer too if a response came.
        res = { status: 0, headers: {}, body: Buffer.from(String(err)) };
      }
      report.sent++;
      report.byStatus[res.status] = (report.byStatus[res.status] ?? 0) + 1;
      const failure = check(request, res, options.allowUnconfigured ?? true);
      if (failure) report.failures.push(failure);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 8 }, worker));
  agent.destroy();
  return report;
}
