/**
 * A fake Directus instance (real HTTP) serving the character knowledge base (`codex`) and a content
 * store (`collections`, `nfts`, `rooms`, files at `/assets/{id}`), speaking Directus conventions:
 *   GET /items/<collection>?fields=&limit=&offset=&page=&sort=&search=&filter=&meta=  → { data, meta? }
 *   GET /items/<collection>/<id>?fields=                                             → { data }
 *   GET /assets/<id>                                                                 → the file
 *   GET /files/<id>?fields=                                                          → { data: file metadata }
 * Files carry `filesize` (a string, as Directus answers bigints) and `modified_on`; assets carry
 * an ETag only when `assetEtags` is set (Directus's default sends none). With `maxLimit` (Directus's
 * QUERY_LIMIT_MAX), a larger `limit` answers 400 INVALID_QUERY '"limit" must be less than or equal
 * to N' and `limit=-1` silently means N, as Directus does. Unknown collections, unknown ids,
 * unknown fields and unknown files answer 403 FORBIDDEN, as Directus does for anything the role
 * may not read. With a static token configured, requests must
 * send it (`Authorization: Bearer` or `?access_token=`): a wrong token is 401, none is 403.
 * `limit` defaults to 100, -1 means all. `search` matches string fields (and strings inside list
 * fields) case-insensitively.
 */
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { mulberry32 as prng } from '../../common/random.ts';
import { type FakeServer, sendJson, startFakeServer } from './faults.ts';

export type DirectusRecord = { id: number } & Record<string, unknown>;

export interface DirectusFile {
  data: Uint8Array;
  type: string;
  filename: string;
  /** ISO time of the last change (default: a fixed date); `replaceFile` moves it forward. */
  modified_on?: string;
}

export interface DirectusFakeOptions {
  /** Static token required on every request (none = public). */
  token?: string;
  /** The knowledge base: a number of generated characters (default 300), or the records. */
  characters?: number | DirectusRecord[];
  content?: { collections?: DirectusRecord[]; nfts?: DirectusRecord[]; rooms?: DirectusRecord[]; files?: Record<string, DirectusFile> };
  /** QUERY_LIMIT_MAX: the largest `limit` the store accepts (default: none). */
  maxLimit?: number;
  /** Answer at most this many records whatever `limit` asks, without saying so (a capping proxy). */
  silentMaxLimit?: number;
  /** Send an ETag with assets and answer If-None-Match (a store configured to revalidate). */
  assetEtags?: boolean;
}

export interface DirectusFake extends FakeServer {
  items: Record<string, DirectusRecord[]>;
  files: Map<string, DirectusFile>;
  /** Change a file's bytes, as an editor re-uploading it would (modified_on moves forward). */
  replaceFile(id: string, data: Uint8Array): void;
}

const FILES_CREATED = '2025-03-01T10:00:00.000Z';

const forbidden = (res: ServerResponse) =>
  sendJson(res, 403, { errors: [{ message: "You don't have permission to access this.", extensions: { code: 'FORBIDDEN' } }] });
/** Directus's InvalidQueryError: `Invalid query. <reason>.` with the reason in the extensions. */
const invalidQuery = (res: ServerResponse, reason: string) =>
  sendJson(res, 400, { errors: [{ message: `Invalid query. ${reason}.`, extensions: { code: 'INVALID_QUERY', reason } }] });

export async function startFakeDirectus(options: DirectusFakeOptions = {}): Promise<DirectusFake> {
  const characters = typeof options.characters === 'object' ? options.characters : sampleCharacters(options.characters ?? 300);
  const items: Record<string, DirectusRecord[]> = {
    codex: characters,
    collections: options.content?.collections ?? [],
    nfts: options.content?.nfts ?? [],
    rooms: options.content?.rooms ?? [],
  };
  const files = new Map(Object.entries(options.content?.files ?? {}));

  const fake = await startFakeServer((req, res) => {
    if (options.token !== undefined) {
      const bearer = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
      const presented = bearer ?? req.query.get('access_token') ?? undefined;
      if (presented === undefined) return forbidden(res);
      if (presented !== options.token) {
        return sendJson(res, 401, { errors: [{ message: 'Invalid user credentials.', extensions: { code: 'INVALID_CREDENTIALS' } }] });
      }
    }
    if (req.method !== 'GET') return forbidden(res);

    const asset = /^\/assets\/([\w-]+)$/.exec(req.path);
    if (asset) {
      const file = files.get(asset[1]!);
      if (!file) return forbidden(res);
      const etag = options.assetEtags ? `"${createHash('sha1').update(file.data).digest('hex')}"` : undefined;
      if (etag && req.headers['if-none-match'] === etag) {
        res.writeHead(304, { etag });
        res.end();
        return;
      }
      res.writeHead(200, {
        'content-type': file.type,
        'content-length': String(file.data.byteLength),
        'content-disposition': `inline; filename="${file.filename}"`,
        ...(etag ? { etag } : {}),
      });
      res.end(Buffer.from(file.data));
      return;
    }
    const fileMeta = /^\/files\/([\w-]+)$/.exec(req.path);
    if (fileMeta) {
      const file = files.get(fileMeta[1]!);
      if (!file) return forbidden(res);
      const meta: Record<string, unknown> = {
        id: fileMeta[1],
        storage: 'local',
        filename_disk: `${fileMeta[1]}.${file.filename.split('.').pop()}`,
        filename_download: file.filename,
        title: file.filename.replace(/\.\w+$/, ''),
        type: file.type,
        uploaded_on: FILES_CREATED,
        modified_on: file.modified_on ?? FILES_CREATED,
        filesize: String(file.data.byteLength),
        width: null,
        height: null,
      };
      const wanted = (req.query.get('fields') ?? '*').split(',').map((f) => f.trim());
      if (wanted.some((f) => f !== '*' && !(f in meta))) return forbidden(res);
      return sendJson(res, 200, { data: wanted.includes('*') ? meta : Object.fromEntries(wanted.map((f) => [f, meta[f]])) });
    }

    const route = /^\/items\/(\w+)(?:\/([^/]+))?$/.exec(req.path);
    const records = route ? items[route[1]!] : undefined;
    if (!route || !records) return forbidden(res);
    const schema = new Set(records.flatMap((r) => Object.keys(r)));
    const fields = (req.query.get('fields') ?? '*')
      .split(',')
      .map((f) => f.trim())
      .filter(Boolean);
    if (fields.some((f) => f !== '*' && !schema.has(f))) return forbidden(res);
    const pick = (r: DirectusRecord) => (fields.includes('*') ? r : Object.fromEntries(fields.filter((f) => f in r).map((f) => [f, r[f]])));

    if (route[2] !== undefined) {
      const record = records.find((r) => String(r.id) === route[2]);
      return record ? sendJson(res, 200, { data: pick(record) }) : forbidden(res);
    }

    let list = records;
    const filterParam = req.query.get('filter');
    let filter: unknown = null;
    if (filterParam) {
      try {
        filter = JSON.parse(filterParam);
      } catch {
        return invalidQuery(res, 'Invalid JSON for filter object');
      }
    } else filter = bracketFilter(req.query);
    if (filter) list = list.filter((r) => matchesFilter(r, filter));
    const search = req.query.get('search')?.toLowerCase();
    if (search) list = list.filter((r) => Object.values(r).some((v) => searchable(v).some((s) => s.toLowerCase().includes(search))));
    const sort = req.query.get('sort');
    if (sort) {
      const keys = sort.split(',').map((s) => (s.startsWith('-') ? { field: s.slice(1), dir: -1 } : { field: s, dir: 1 }));
      list = [...list].sort((a, b) => {
        for (const { field, dir } of keys) {
          const x = a[field] as number | string;
          const y = b[field] as number | string;
          if (x !== y) return (x < y ? -1 : 1) * dir;
        }
        return 0;
      });
    }
    const max = options.maxLimit;
    let limit = Number(req.query.get('limit') ?? Math.min(100, max ?? 100));
    if (!Number.isInteger(limit) || limit < -1) return invalidQuery(res, '"limit" must be an integer');
    if (max !== undefined && limit > max) return invalidQuery(res, `"limit" must be less than or equal to ${max}`);
    if (max !== undefined && limit === -1) limit = max;
    if (options.silentMaxLimit !== undefined && (limit === -1 || limit > options.silentMaxLimit)) limit = options.silentMaxLimit;
    const page = req.query.get('page');
    const offset = page ? (Number(page) - 1) * Math.max(limit, 0) : Number(req.query.get('offset') ?? 0);
    const window = limit === -1 ? list.slice(offset) : list.slice(offset, offset + limit);
    const body: { data: unknown[]; meta?: Record<string, number> } = { data: window.map(pick) };
    const meta = req.query.get('meta');
    if (meta) {
      const wanted = new Set(meta.split(','));
      body.meta = {};
      if (wanted.has('*') || wanted.has('total_count')) body.meta.total_count = records.length;
      if (wanted.has('*') || wanted.has('filter_count')) body.meta.filter_count = list.length;
    }
    sendJson(res, 200, body);
  });
  const replaceFile = (id: string, data: Uint8Array) => {
    const file = files.get(id);
    if (!file) throw new Error(`no file ${id}`);
    const previous = Date.parse(file.modified_on ?? FILES_CREATED);
    files.set(id, { ...file, data, modified_on: new Date(previous + 60_000).toISOString() });
  };
  return Object.assign(fake, { items, files, replaceFile });
}

const searchable = (v: unknown): string[] =>
  typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];

/** `filter[field][_op]=value` query parameters → a filter object. */
function bracketFilter(query: URLSearchParams): Record<string, Record<string, string>> | null {
  const out: Record<string, Record<string, string>> = {};
  for (const [key, value] of query) {
    const m = /^filter\[(\w+)\]\[(_\w+)\]$/.exec(key);
    if (m) (out[m[1]!] ??= {})[m[2]!] = value;
  }
  return Object.keys(out).length ? out : null;
}

function matchesFilter(record: DirectusRecord, filter: unknown): boolean {
  if (typeof filter !== 'object' || filter === null) return true;
  return Object.entries(filter as Record<string, unknown>).every(([key, cond]) => {
    if (key === '_and') return (cond as unknown[]).every((f) => matchesFilter(record, f));
    if (key === '_or') return (cond as unknown[]).some((f) => matchesFilter(record, f));
    const value = record[key];
    return Object.entries(cond as Record<string, unknown>).every(([op, operand]) => {
      const list = Array.isArray(operand) ? operand.map(String) : String(operand).split(',');
      switch (op) {
        case '_eq':
          return String(value) === String(operand);
        case '_neq':
          return String(value) !== String(operand);
        case '_in':
          return list.includes(String(value));
        case '_nin':
          return !list.includes(String(value));
        case '_null':
          return value === null || value === undefined;
        case '_nnull':
          return value !== null && value !== undefined;
        case '_contains':
          return typeof value === 'string' && value.includes(String(operand));
        default:
          return false;
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Sample characters: deterministic, every summary and detail field, heavy profiles on a few.

const FIRST = [
  'Aria',
  'Bram',
  'Cyra',
  'Dov',
  'Esme',
  'Fane',
  'Gile',
  'Hael',
  'Isra',
  'Jory',
  'Kett',
  'Lune',
  'Mira',
  'Nox',
  'Orin',
  'Pell',
];
const LAST = ['Vell', 'Ashgrove', 'Thorne', 'Quill', 'Marrow', 'Sable', 'Wren', 'Hollow', 'Kestrel', 'Dune', 'Ember', 'Frost'];
const TYPES = ['human', 'automaton', 'spirit', 'hybrid', 'beast'];
const CULTURES = ['Old Harbor', 'Glass Steppe', 'Lantern Guild', 'Verdant Reach', 'Iron Choir'];
const PHILOSOPHIES = ['stoic', 'hedonist', 'mystic', 'pragmatist', 'nihilist', 'romantic'];
const STYLES = ['baroque', 'pixel', 'ukiyo-e', 'brutalist', 'surreal', 'minimal'];
const WORDS = 'light shadow tide memory ember salt glass echo river crown mask thread bone lantern orchard'.split(' ');

/** Ids of the characters that carry heavy (hundreds of KB) profiles. */
export const HEAVY_CHARACTER_IDS = [7, 77, 177];

const hex = (rand: () => number, n: number) => Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join('');
const uuid = (rand: () => number) => `${hex(rand, 8)}-${hex(rand, 4)}-4${hex(rand, 3)}-a${hex(rand, 3)}-${hex(rand, 12)}`;
const choose = <T>(rand: () => number, list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
const sentence = (rand: () => number, words: number) =>
  `${Array.from({ length: words }, () => choose(rand, WORDS))
    .join(' ')
    .replace(/^./, (c) => c.toUpperCase())}.`;

export function sampleCharacters(count: number): DirectusRecord[] {
  return Array.from({ length: count }, (_, i) => {
    const id = i + 1;
    const rand = prng(id * 7919);
    const display = `${choose(rand, FIRST)} ${choose(rand, LAST)}`;
    const heavy = HEAVY_CHARACTER_IDS.includes(id);
    const profileCount = heavy ? 1_200 : 2;
    return {
      id,
      name: [display, `${display} of ${choose(rand, CULTURES)}`],
      description: sentence(rand, 12),
      ancestor: `${choose(rand, FIRST)} the Elder`,
      character_type: choose(rand, TYPES),
      dna1: hex(rand, 8),
      dna2: hex(rand, 8),
      dna3: hex(rand, 8),
      dna4: hex(rand, 8),
      cultural_affiliation: choose(rand, CULTURES),
      philosophical_affiliation: choose(rand, PHILOSOPHIES),
      artstyle_loved: choose(rand, STYLES),
      owner: `0x${hex(rand, 40)}`,
      soul: `soul-${hex(rand, 6)}`,
      multiplicity: 1 + Math.floor(rand() * 5),
      thumbnail: uuid(rand),
      thumbnail_character: uuid(rand),
      thumbnail_background: id % 10 === 0 ? null : uuid(rand),
      ipfs_final: `bafybei${hex(rand, 52)}`,
      timestamp_created: new Date(Date.UTC(2023, 0, 1) + id * 3_600_000).toISOString(),
      biography: [sentence(rand, 30), sentence(rand, 30)],
      characterization: sentence(rand, 20),
      confession: sentence(rand, 15),
      writing_flavor: sentence(rand, 10),
      agent_profiles: Array.from({ length: profileCount }, (_, k) => ({
        platform: `agent-${k}`,
        persona: sentence(rand, 25),
        memory: sentence(rand, 10),
      })),
      bot_profile: { system: heavy ? sentence(rand, 40).repeat(400) : sentence(rand, 40), temperature: 0.7, id },
      codex_document: id % 4 === 0 ? `# ${display}\n\n${sentence(rand, 50)}\n` : null,
    };
  });
}
