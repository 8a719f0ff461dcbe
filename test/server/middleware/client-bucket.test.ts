/**
 * IPv6 clients counted by /64 (issue 33, item 4; decisions.md): one home connection gets a whole /64,
 * so every per-IP limit — the public routes' rate limits, presence places per IP — counts its
 * addresses as one client. Through TRUST_PROXY, the realistic path: the proxy forwards each
 * client's address in X-Forwarded-For.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientBucket } from '../../../common/net.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

describe('clientBucket', () => {
  it.each([
    ['198.51.100.7', '198.51.100.7'],
    ['::ffff:198.51.100.7', '198.51.100.7'],
    ['::FFFF:c633:6407', '198.51.100.7'],
    ['2001:db8:1:2::5', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:3::5', '2001:db8:1:3::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['unknown', 'unknown'],
  ])('%s counts as %s', (address, bucket) => {
    expect(clientBucket(address)).toBe(bucket);
  });
});

describe('per-IP limits through TRUST_PROXY', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { TRUST_PROXY: 'true', PRESENCE_MAX_PER_IP: '3' } });
  });
  afterAll(() => server?.close());

  const ping = (forwardedFor: string) => server.post('/v1/presence/ping', {}, { key: null, headers: { 'x-forwarded-for': forwardedFor } });

  it('the presence ping budget (12 a minute) is one for every address of a /64', async () => {
    const statuses = [];
    for (let i = 1; i <= 13; i++) statuses.push((await ping(`2001:db8:aa:1:${i.toString(16)}::1`)).status);
    expect(statuses).toEqual([...Array<number>(12).fill(200), 429]);
    expect((await ping('2001:db8:aa:1:ffff:ffff:ffff:ffff')).status).toBe(429);
    // The next /64, and IPv4 addresses, are other clients.
    expect((await ping('2001:db8:aa:2::1')).status).toBe(200);
    expect((await ping('198.51.100.1')).status).toBe(200);
    expect((await ping('198.51.100.2')).status).toBe(200);
  });

  it('an IPv4-mapped address shares its IPv4 address budget', async () => {
    for (let i = 0; i < 12; i++) expect((await ping('198.51.100.9')).status).toBe(200);
    expect((await ping('::ffff:198.51.100.9')).status).toBe(429);
  });

  it('presence places per IP (3) are shared by a /64', async () => {
    const stream = (forwardedFor: string) => fetch(`${server.url}/v1/presence/stream`, { headers: { 'x-forwarded-for': forwardedFor } });
    const open: Response[] = [];
    for (let i = 1; i <= 3; i++) {
      const res = await stream(`2001:db8:bb:1::${i}`);
      expect(res.status).toBe(200);
      open.push(res);
    }
    expect(await errorOf(await stream('2001:db8:bb:1:1:2:3:4'))).toMatchObject({ status: 503, code: 'BUSY' });
    const other = await stream('2001:db8:bb:2::1');
    expect(other.status).toBe(200);
    open.push(other);
    for (const res of open) await res.body?.cancel();
  });
});
