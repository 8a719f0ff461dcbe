/**
 * Public guide reads are limited per client address (issue 43): an exhibition's context and its
 * suggestions share 60 requests a minute per address; past that 429, another address unaffected.
 * Their answers are made once per version: the same strong ETag across requests, 304 on
 * If-None-Match, br made once; a changed exhibition gives a new ETag.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../../helpers/server.ts';
import { call, exhibitionDoc, register, startGuideServer } from './helpers.ts';

const CONTEXT = `/v1/guide/exhibitions/${encodeURIComponent('spring-show:2025')}`;
let s: TestServer;
let ownerToken: string;
beforeAll(async () => {
  s = await startGuideServer();
  const registered = await register(s, exhibitionDoc());
  expect(registered.status).toBeLessThan(300);
  ownerToken = registered.json.data.owner_token;
}, 60_000);
afterAll(async () => {
  await s.close();
});

describe('public guide reads', () => {
  it('answers the context with the same ETag across requests, 304 on If-None-Match, and a new ETag once the exhibition changes', async () => {
    // fetch decodes br: the encoded answer read as a browser reads it.
    const br = { 'accept-encoding': 'br' };
    const first = await fetch(`${s.url}${CONTEXT}`, { headers: br });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-encoding')).toBe('br');
    const etag = String(first.headers.get('etag'));
    expect(etag).toMatch(/^"[\w-]+-br"$/);
    const firstText = await first.text();
    const again = await fetch(`${s.url}${CONTEXT}`, { headers: br });
    expect(again.headers.get('etag')).toBe(etag);
    expect(await again.text()).toBe(firstText);
    const notModified = await fetch(`${s.url}${CONTEXT}`, { headers: { ...br, 'if-none-match': etag } });
    expect(notModified.status).toBe(304);
    expect((await notModified.arrayBuffer()).byteLength).toBe(0);
    const plain = await call(s, 'GET', CONTEXT);
    expect(plain.json.data.id).toBe('spring-show:2025');

    const suggestions = `${CONTEXT}/suggestions?seed=fixed`;
    const s1 = await call(s, 'GET', suggestions);
    const s2 = await call(s, 'GET', suggestions);
    expect(s1.headers.etag).toBe(s2.headers.etag);
    expect(s1.json.data.seed).toBe('fixed');

    const renamed = exhibitionDoc({ name: 'Spring Show, rehung' });
    expect((await register(s, renamed, { 'X-Exhibition-Token': ownerToken })).status).toBeLessThan(300);
    const changed = await call(s, 'GET', CONTEXT);
    expect(changed.json.data.name).toBe('Spring Show, rehung');
    expect(changed.headers.etag).not.toBe(plain.headers.etag);
    expect((await call(s, 'GET', CONTEXT, undefined, { headers: { 'if-none-match': String(plain.headers.etag) } })).status).toBe(200);
  }, 60_000);

  it('answers 60 context and suggestion reads a minute per address, then 429; another address still reads', async () => {
    const flooder = '127.8.0.1';
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      const path = i % 2 ? `${CONTEXT}/suggestions?seed=s${i}` : CONTEXT;
      statuses.push((await call(s, 'GET', path, undefined, { ip: flooder })).status);
    }
    expect(statuses.every((st) => st === 200)).toBe(true);
    const over = await call(s, 'GET', CONTEXT, undefined, { ip: flooder });
    expect(over.status).toBe(429);
    expect(over.json.errors[0].extensions.code).toBe('RATE_LIMITED');
    expect((await call(s, 'GET', `${CONTEXT}/suggestions`, undefined, { ip: flooder })).status).toBe(429);
    const other = await call(s, 'GET', CONTEXT, undefined, { ip: '127.8.0.2' });
    expect(other.status).toBe(200);
    expect(other.json.data.id).toBe('spring-show:2025');
  }, 60_000);
});
