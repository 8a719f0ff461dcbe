/**
 * Public guide reads are limited per client address (issue 43): an exhibition's context and its
 * suggestions share 60 requests a minute per address; past that 429, another address unaffected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../../helpers/server.ts';
import { call, exhibitionDoc, register, startGuideServer } from './helpers.ts';

const CONTEXT = `/v1/guide/exhibitions/${encodeURIComponent('spring-show:2025')}`;
let s: TestServer;
beforeAll(async () => {
  s = await startGuideServer();
  expect((await register(s, exhibitionDoc())).status).toBeLessThan(300);
}, 60_000);
afterAll(async () => {
  await s.close();
});

describe('public guide reads', () => {
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
