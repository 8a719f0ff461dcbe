/**
 * Exhibition registration, context and suggestions over a real server and the fixture bake:
 * strict validation (hostile bodies → 400/413 and nothing stored), enrichment from museum content,
 * the owner-token flow, idempotence, asynchronous starters (template and LLM), the per-IP limit,
 * deterministic suggestions, and conformance to the OpenAPI document.
 */
import { createHash } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type OpenApiDoc, validateAgainstOpenApi } from '../../helpers/openapi.ts';
import type { TestServer } from '../../helpers/server.ts';
import { startFakeLlm, type LlmFake } from '../../fakes/llm.ts';
import { call, exhibitionDoc, freshIp, register, startGuideServer, until } from './helpers.ts';

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});
const server = async (env: Record<string, string> = {}) => {
  const s = await startGuideServer(env);
  servers.push(s);
  return s;
};
/** Rows in the test server's SQLite file, read through a connection of our own. */
const rows = (s: TestServer, sql: string): Array<Record<string, unknown>> => {
  const db = new Database(s.stateDb, { readonly: true });
  try {
    return db.prepare(sql).all() as Array<Record<string, unknown>>;
  } finally {
    db.close();
  }
};
const stored = (s: TestServer) => rows(s, 'SELECT id FROM exhibitions').length;
const context = async (s: TestServer, id = 'spring-show:2025') =>
  (await call(s, 'GET', `/v1/guide/exhibitions/${encodeURIComponent(id)}`)).json.data;

function nested(depth: number): unknown {
  let v: unknown = 'bottom';
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

describe('registration validation', () => {
  const doc = exhibitionDoc();
  const placement = doc.placements[0];
  const withPlacement = (p: Record<string, unknown>) => exhibitionDoc({ placements: [{ ...placement, ...p }] });
  /** `n` artworks spread over placements of at most 250 (each within its own limit). */
  const artworksInAll = (n: number) =>
    Array.from({ length: Math.ceil(n / 250) }, (_, p) => ({
      ...placement,
      uid: `p${p}`,
      artworks: Array.from({ length: Math.min(250, n - p * 250) }, (_, i) => ({ id: p * 250 + i + 1 })),
    }));
  const cases: Array<[string, unknown]> = [
    ['missing format', { ...doc, format: undefined }],
    ['wrong format', { ...doc, format: 'museum-exhibition@2' }],
    ['empty id', { ...doc, id: '' }],
    ['id of 65 characters', { ...doc, id: 'x'.repeat(65) }],
    ['id with a space', { ...doc, id: 'spring show' }],
    ['id with a slash', { ...doc, id: '../etc/passwd' }],
    ['id with markup', { ...doc, id: '<script>' }],
    ['id not ASCII', { ...doc, id: 'café' }],
    ['numeric id', { ...doc, id: 123 }],
    ['missing name', { ...doc, name: undefined }],
    ['empty name', { ...doc, name: '   ' }],
    ['numeric name', { ...doc, name: 42 }],
    ['name as array', { ...doc, name: ['Light'] }],
    ['name with HTML', { ...doc, name: '<b>Light</b> and Stone' }],
    ['name with a script', { ...doc, name: 'Light<script>alert(1)</script>' }],
    ['name with NUL', { ...doc, name: 'Light\u0000Stone' }],
    ['name with a newline', { ...doc, name: 'Light\nStone' }],
    ['name with a bidi override', { ...doc, name: 'Light\u202eenotS' }],
    ['name of 5,000 characters', { ...doc, name: 'n'.repeat(5_000) }],
    ['generator as number', { ...doc, generator: 5 }],
    ['generator with markup', { ...doc, generator: '<img src=x onerror=alert(1)>' }],
    ['placements not an array', { ...doc, placements: 'all of them' }],
    ['61 placements', { ...doc, placements: Array.from({ length: 61 }, (_, i) => ({ ...placement, uid: `p${i}` })) }],
    ['257 artworks in a placement', withPlacement({ artworks: Array.from({ length: 257 }, (_, i) => ({ id: i + 1 })) })],
    ['2,001 artworks in all', { ...doc, placements: artworksInAll(2_001) }],
    ['placement without uid', withPlacement({ uid: undefined })],
    ['empty uid', withPlacement({ uid: '' })],
    ['duplicate uids', exhibitionDoc({ placements: [placement, placement] })],
    ['room id as string', withPlacement({ room: { id: '1', title: 'Atrium' } })],
    ['negative room id', withPlacement({ room: { id: -1, title: 'Atrium' } })],
    ['fractional room id', withPlacement({ room: { id: 1.5, title: 'Atrium' } })],
    ['huge room id', withPlacement({ room: { id: 1e300, title: 'Atrium' } })],
    ['room without title', withPlacement({ room: { id: 1 } })],
    ['room as string', withPlacement({ room: 'Atrium' })],
    ['placement without artworks', withPlacement({ artworks: undefined })],
    ['artwork id zero', withPlacement({ artworks: [{ id: 0 }] })],
    ['artwork id as string', withPlacement({ artworks: [{ id: '104' }] })],
    ['artwork as number', withPlacement({ artworks: [104] })],
    ['artwork name with control characters', withPlacement({ artworks: [{ id: 104, name: 'Land\u0007scape' }] })],
    ['artist with HTML', withPlacement({ artworks: [{ id: 104, artist: '<a href="x">Voss</a>' }] })],
    ['nested arrays where placements go', { ...doc, placements: nested(50) }],
    ['deeply nested extra key', { ...doc, extra: nested(100) }],
    [
      'deeply nested object in an artwork',
      withPlacement({ artworks: [{ id: 104, media: JSON.parse(`${'{"a":'.repeat(60)}1${'}'.repeat(60)}`) }] }),
    ],
    ['body is an array', [doc]],
    ['body is a string', '"museum-exhibition@1"'],
    ['body is null', 'null'],
    ['body is not JSON', '{"format": "museum-exhibition@1",'],
  ];

  let s: TestServer;
  beforeAll(async () => {
    s = await startGuideServer();
  });
  afterAll(async () => {
    await s.close();
  });

  it.each(cases)('refuses %s with a 400 envelope', async (_, body) => {
    const res = await register(s, typeof body === 'string' ? body : JSON.stringify(body));
    expect(res.status).toBe(400);
    expect(res.json.errors[0].extensions.code).toBe('BAD_REQUEST');
    expect(res.json.errors[0].message).not.toMatch(/at .*\.ts|Error:/);
    expect(stored(s)).toBe(0);
  });

  it('refuses a 10 MB name with 413 and stores nothing', async () => {
    const res = await register(s, JSON.stringify({ ...doc, name: 'n'.repeat(10 * 1024 * 1024) }));
    expect(res.status).toBe(413);
    expect(res.json.errors[0].extensions.code).toBe('PAYLOAD_TOO_LARGE');
    expect(stored(s)).toBe(0);
  });

  it('accepts extra keys it does not read, and clamps long strings to display length', async () => {
    const res = await register(s, {
      ...doc,
      id: 'clamped',
      name: `Light ${'and stone '.repeat(40)}`,
      curator: { note: 'ignored' },
      placements: [{ ...placement, slots: ['Slot_001'], artworks: [{ id: 104, name: 'x'.repeat(900), position: [0, 1, 2] }] }],
    });
    expect(res.status).toBe(200);
    const ctx = await context(s, 'clamped');
    expect(Array.from(ctx.name as string).length).toBe(120);
    expect(ctx.name.endsWith('…')).toBe(true);
    expect(JSON.stringify(ctx)).not.toContain('Slot_001');
    expect(JSON.stringify(ctx)).not.toContain('ignored');
  });

  it('accepts 2,000 artworks in all, the limit', async () => {
    const res = await register(s, { ...doc, id: 'two-thousand', placements: artworksInAll(2_000) });
    expect(res.status).toBe(200);
    expect(res.json.data.counts.artworks).toBe(2_000);
  });
});

describe('registration', () => {
  it('enriches rooms and artworks from the museum content', async () => {
    const s = await server();
    const res = await register(s, exhibitionDoc());
    expect(res.status).toBe(200);
    const data = res.json.data;
    expect(data).toMatchObject({
      id: 'spring-show:2025',
      name: 'Light and Stone',
      counts: { rooms: 2, artworks: 5, artists: 5 },
      architects: ['Studio Lovelace', 'Atelier Hopper'],
      artists: ['Chiara Voss', 'Bruno Lumen', 'Émile Ünger', 'Ada Palette', 'Guest Painter'],
    });
    expect(data.suggestions).toHaveLength(3);

    const ctx = await context(s);
    expect(ctx.rooms).toEqual([
      {
        uid: 'p-atrium',
        id: 1,
        title: 'The Atrium',
        architect: 'Studio Lovelace',
        description: 'A bright hall with a doorway to the south.',
        series: 'Genesis',
      },
      {
        uid: 'p-garden',
        id: 2,
        title: 'Sculpture Garden',
        architect: 'Atelier Hopper',
        description: 'An onchain sculpture on a plinth.',
        series: 'Sculptures',
      },
    ]);
    expect(ctx.artworks).toEqual([
      { id: 104, title: 'Trustworthy Landscape', artist: 'Chiara Voss', description: null, collection: 'Genesis', roomUid: 'p-atrium' },
      { id: 102, title: 'Square Crop Portrait', artist: 'Bruno Lumen', description: null, collection: 'Portraits', roomUid: 'p-atrium' },
      { id: 105, title: 'Pinned Portrait', artist: 'Émile Ünger', description: null, collection: 'Portraits', roomUid: 'p-atrium' },
      { id: 101, title: 'Dead Host Study', artist: 'Ada Palette', description: null, collection: 'Genesis', roomUid: 'p-garden' },
      // Not in the museum: the document's own identity is kept, nothing invented.
      { id: null, title: 'Borrowed Night', artist: 'Guest Painter', description: null, collection: null, roomUid: 'p-garden' },
    ]);
    expect(ctx).toMatchObject({ id: 'spring-show:2025', name: 'Light and Stone', generator: 'museum-editor 2.1' });
    expect(new Date(ctx.registeredAt).getTime()).toBeGreaterThan(Date.now() - 60_000);
  });

  it('keeps the client title of a room the museum does not know', async () => {
    const s = await server();
    await register(
      s,
      exhibitionDoc({ id: 'unknown-room', placements: [{ uid: 'x', room: { id: 777, title: 'Pop-up Hall' }, artworks: [] }] }),
    );
    expect((await context(s, 'unknown-room')).rooms).toEqual([
      { uid: 'x', id: 777, title: 'Pop-up Hall', architect: null, description: null, series: null },
    ]);
  });

  it('issues an owner token once, stores only its hash, and requires it to change the content', async () => {
    const s = await server();
    const first = await register(s, exhibitionDoc());
    const token = first.json.data.owner_token as string;
    expect(token).toMatch(/^exh_[0-9a-f]{48}$/);
    const row = rows(s, 'SELECT * FROM exhibitions')[0]!;
    expect(Buffer.compare(row.owner_token_hash as Buffer, createHash('sha256').update(token).digest())).toBe(0);
    expect(JSON.stringify(row)).not.toContain(token);

    // Identical content: idempotent, no token needed, none shown again.
    const again = await register(s, exhibitionDoc());
    expect(again.status).toBe(200);
    expect(again.json.data.owner_token).toBeUndefined();

    const changed = exhibitionDoc({ name: 'Light, Stone and Water' });
    const missing = await register(s, changed);
    expect(missing.status).toBe(409);
    expect(missing.json.errors[0].extensions.code).toBe('CONFLICT');
    const wrong = await register(s, changed, { 'X-Exhibition-Token': `exh_${'0'.repeat(48)}` });
    expect(wrong.status).toBe(409);
    expect((await context(s)).name).toBe('Light and Stone');

    const before = await context(s);
    const ok = await register(s, changed, { 'X-Exhibition-Token': token });
    expect(ok.status).toBe(200);
    expect(ok.json.data.owner_token).toBeUndefined();
    const after = await context(s);
    expect(after.name).toBe('Light, Stone and Water');
    expect(after.registeredAt).toBe(before.registeredAt);
    expect(after.updatedAt > before.updatedAt).toBe(true);

    // A token belongs to one exhibition.
    const other = await register(s, exhibitionDoc({ id: 'other-show' }));
    const otherChange = await register(s, exhibitionDoc({ id: 'other-show', name: 'Changed' }), { 'X-Exhibition-Token': token });
    expect(otherChange.status).toBe(409);
    expect(other.json.data.owner_token).not.toBe(token);
    expect(stored(s)).toBe(2);
  });

  it('is idempotent: identical content gives the same context apart from timestamps, on any server', async () => {
    const a = await server();
    const b = await server();
    await register(a, exhibitionDoc());
    await register(b, exhibitionDoc());
    const ctxA = await until(async () => {
      const c = await context(a);
      return c.starters.length ? c : null;
    });
    await register(a, exhibitionDoc());
    const ctxA2 = await context(a);
    const ctxB = await until(async () => {
      const c = await context(b);
      return c.starters.length ? c : null;
    });
    const strip = (c: Record<string, unknown>) => ({ ...c, registeredAt: undefined, updatedAt: undefined });
    expect(strip(ctxA2)).toEqual(strip(ctxA));
    expect(ctxA2.registeredAt).toBe(ctxA.registeredAt);
    expect(strip(ctxB)).toEqual(strip(ctxA));
  });

  it('limits registrations to 6 per minute per client IP', async () => {
    const s = await server();
    const ip = freshIp();
    for (let i = 0; i < 6; i++)
      expect((await call(s, 'POST', '/v1/guide/exhibitions', exhibitionDoc({ id: `show-${i}` }), { ip })).status).toBe(200);
    const limited = await call(s, 'POST', '/v1/guide/exhibitions', exhibitionDoc({ id: 'show-7' }), { ip });
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBe('60');
    expect(stored(s)).toBe(6);
  });
});

describe('starters', () => {
  let llm: LlmFake;
  beforeAll(async () => {
    llm = await startFakeLlm();
  });
  afterAll(async () => {
    await llm.close();
  });

  it('are generated from templates after the response when no LLM is configured', async () => {
    const s = await server();
    await register(s, exhibitionDoc());
    const ctx = await until(async () => {
      const c = await context(s);
      return c.starters.length ? c : null;
    });
    expect(ctx.starters).toEqual([
      'What ties the works in Light and Stone together?',
      'Where should I begin in Light and Stone?',
      'How did Studio Lovelace shape The Atrium?',
      'What should I notice in "Trustworthy Landscape"?',
      'What else should I know about Chiara Voss?',
      'How do The Atrium and Sculpture Garden differ?',
    ]);
  });

  it('come from the LLM, asynchronously, with the enriched context in the prompt', async () => {
    llm.clearFaults();
    llm.fault('/chat/completions', { kind: 'slow', ms: 1_000, times: 1 });
    const s = await server({ LLM_BASE_URL: llm.url, LLM_API_KEY: 'k' });
    const res = await register(s, exhibitionDoc({ id: 'llm-starters' }));
    expect(res.status).toBe(200);
    // The response did not wait for the model.
    expect((await context(s, 'llm-starters')).starters).toEqual([]);
    const ctx = await until(async () => {
      const c = await context(s, 'llm-starters');
      return c.starters.length ? c : null;
    });
    expect(ctx.starters.length).toBeGreaterThanOrEqual(3);
    for (const q of ctx.starters) expect(q).toMatch(/^What makes ".+" worth a closer look\?$/);
    const prompt = llm
      .chats()
      .at(-1)!
      .messages.map((m) => m.content)
      .join('\n');
    expect(prompt).toContain('Trustworthy Landscape');
    expect(prompt).toContain('Studio Lovelace');
    expect(llm.requestsTo('/chat/completions').at(-1)!.headers.authorization).toBe('Bearer k');
  });

  it('fall back to templates when the LLM fails, and are regenerated when the content changes', async () => {
    llm.clearFaults();
    llm.fault('/chat/completions', { kind: 'garbage' });
    const s = await server({ LLM_BASE_URL: llm.url });
    const first = await register(s, exhibitionDoc({ id: 'garbage-llm' }));
    const ctx = await until(async () => {
      const c = await context(s, 'garbage-llm');
      return c.starters.length ? c : null;
    });
    expect(ctx.starters[0]).toBe('What ties the works in Light and Stone together?');
    llm.clearFaults();
    const renamed = exhibitionDoc({ id: 'garbage-llm', name: 'Stone Only' });
    await register(s, renamed, { 'X-Exhibition-Token': first.json.data.owner_token });
    const regenerated = await until(async () => {
      const c = await context(s, 'garbage-llm');
      return c.name === 'Stone Only' && c.starters.length && c.starters[0] !== ctx.starters[0] ? c : null;
    });
    expect(regenerated.starters.every((q: string) => q.endsWith('worth a closer look?'))).toBe(true);
  });
});

describe('context and suggestions', () => {
  it('answers 404 for unknown or malformed exhibition ids', async () => {
    const s = await server();
    for (const path of ['/v1/guide/exhibitions/nope', '/v1/guide/exhibitions/bad%20id', '/v1/guide/exhibitions/nope/suggestions']) {
      const res = await call(s, 'GET', path);
      expect(res.status, path).toBe(404);
      expect(res.json.errors[0].extensions.code).toBe('NOT_FOUND');
    }
  });

  it('gives the same suggestions for the same seed, drawn from the exhibition', async () => {
    const s = await server();
    await register(s, exhibitionDoc());
    const ctx = await until(async () => {
      const c = await context(s);
      return c.starters.length ? c : null;
    });
    const get = async (query: string) => (await call(s, 'GET', `/v1/guide/exhibitions/spring-show:2025/suggestions${query}`)).json.data;
    const a = await get('?seed=visitor-1');
    expect(a.seed).toBe('visitor-1');
    expect(a.suggestions).toHaveLength(3);
    expect(await get('?seed=visitor-1')).toEqual(a);
    const many = await Promise.all(Array.from({ length: 8 }, (_, i) => get(`?seed=s${i}`)));
    expect(new Set(many.map((m) => JSON.stringify(m.suggestions))).size).toBeGreaterThan(1);

    const names = [
      ...ctx.artists,
      ...ctx.architects,
      ...ctx.rooms.map((r: { title: string }) => r.title),
      ...ctx.artworks.map((w: { title: string }) => w.title),
    ];
    const five = (await get('?seed=x&limit=5')).suggestions as string[];
    expect(five).toHaveLength(5);
    expect(new Set(five).size).toBe(5);
    for (const q of five) expect(ctx.starters.includes(q) || names.some((n: string) => q.includes(n))).toBe(true);
    expect((await get('?seed=x&limit=500')).suggestions).toHaveLength(10);
    expect((await get('?limit=abc')).suggestions).toHaveLength(3);
  });

  it('conforms to the OpenAPI document', async () => {
    const s = await server();
    const doc = (await call(s, 'GET', '/v1/openapi.json')).json as OpenApiDoc;
    const check = (method: string, path: string, res: { status: number; json: unknown }) =>
      validateAgainstOpenApi(doc, method, path, res.status, res.json);
    const created = await register(s, exhibitionDoc());
    check('POST', '/v1/guide/exhibitions', created);
    check('POST', '/v1/guide/exhibitions', await register(s, exhibitionDoc()));
    check('POST', '/v1/guide/exhibitions', await register(s, exhibitionDoc({ name: 'Other' })));
    check('POST', '/v1/guide/exhibitions', await register(s, { nope: true }));
    check('GET', '/v1/guide/exhibitions/spring-show:2025', await call(s, 'GET', '/v1/guide/exhibitions/spring-show:2025'));
    check('GET', '/v1/guide/exhibitions/missing', await call(s, 'GET', '/v1/guide/exhibitions/missing'));
    check(
      'GET',
      '/v1/guide/exhibitions/spring-show:2025/suggestions',
      await call(s, 'GET', '/v1/guide/exhibitions/spring-show:2025/suggestions?seed=1'),
    );
  });
});
