/**
 * The guarded outbound GET (common/net.ts): address checks after DNS and on every redirect hop,
 * the operator's explicit allowances, credentials never crossing origins, bounded bodies, and the
 * shared retry loop. Every server here is real and listens on 127.0.0.1 — which is exactly what the
 * guard refuses unless a test allows it explicitly.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  addressProblem,
  BodyTooLarge,
  guardedGet,
  NetRefused,
  type NetPolicy,
  parseAllowHosts,
  RetriesExhausted,
  Transient,
  withRetries,
} from '../../common/net.ts';
import { type CanaryServer, startCanary } from '../fakes/canary.ts';

const servers: CanaryServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
const canary = async (...args: Parameters<typeof startCanary>) => {
  const server = await startCanary(...args);
  servers.push(server);
  return server;
};
const nothingAllowed: NetPolicy = { allowHosts: [], trustedOrigins: [] };
const allow = (...hosts: string[]): NetPolicy => ({ allowHosts: parseAllowHosts(hosts.join(',')), trustedOrigins: [] });
const get = (url: string, policy: NetPolicy, headers?: Record<string, string>, maxBytes?: number) =>
  guardedGet(url, { policy, headers, maxBytes, signal: AbortSignal.timeout(5_000) });
const refusalOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (err: Error) => err,
  );

describe('addresses', () => {
  it('refuses loopback, private, CGNAT, link-local, metadata, unspecified, multicast and reserved ones, in every IPv6 form', () => {
    const refused: Record<string, string> = {
      '127.0.0.1': 'loopback',
      '127.255.0.9': 'loopback',
      '10.1.2.3': 'private',
      '172.16.0.1': 'private',
      '172.31.255.255': 'private',
      '192.168.1.1': 'private',
      '100.64.0.1': 'CGNAT',
      '100.100.100.200': 'CGNAT',
      '169.254.169.254': 'metadata',
      '169.254.1.1': 'link-local',
      '0.0.0.0': 'unspecified',
      '224.0.0.1': 'multicast',
      '255.255.255.255': 'reserved',
      '::1': 'loopback',
      '::': 'unspecified',
      '::ffff:127.0.0.1': 'loopback address (IPv4-mapped)',
      '::ffff:7f00:1': 'loopback address (IPv4-mapped)',
      '::ffff:169.254.169.254': 'metadata address (IPv4-mapped)',
      '64:ff9b::a9fe:a9fe': 'metadata address (NAT64)',
      '2002:7f00:1::1': 'loopback address (6to4)',
      'fd00:ec2::254': 'metadata',
      'fc00::1': 'unique local',
      'fd12:3456::1': 'unique local',
      'fe80::1%eth0': 'link-local',
      'ff02::1': 'multicast',
      '2001:db8::1': 'reserved',
      '2001:0:4136:e378::1': 'Teredo',
      '::127.0.0.1': 'reserved',
    };
    for (const [address, what] of Object.entries(refused)) expect(addressProblem(address), address).toContain(what);
    for (const address of [
      '93.184.216.34',
      '8.8.8.8',
      '172.32.0.1',
      '100.128.0.1',
      '2606:4700:4700::1111',
      '::ffff:8.8.8.8',
      '2a00:1450:4001::200e',
    ]) {
      expect(addressProblem(address), address).toBeNull();
    }
  });

  it('parses BAKE_ALLOW_HOSTS and names a bad entry', () => {
    expect(parseAllowHosts(' cdn.example.org, 127.0.0.1:8080 ,[::1]:9000,,Assets.Internal')).toEqual([
      { host: 'cdn.example.org', port: null },
      { host: '127.0.0.1', port: 8080 },
      { host: '::1', port: 9000 },
      { host: 'assets.internal', port: null },
    ]);
    expect(parseAllowHosts(undefined)).toEqual([]);
    expect(() => parseAllowHosts('http://x.org/')).toThrow('BAKE_ALLOW_HOSTS: "http://x.org/" is not host or host:port');
    expect(() => parseAllowHosts('x.org:99999')).toThrow('BAKE_ALLOW_HOSTS: "x.org:99999" is not host or host:port');
  });
});

describe('guardedGet', () => {
  it('refuses a loopback address, literal or after DNS, without connecting; an explicit allowance reaches it', async () => {
    const inside = await canary();
    for (const url of [
      `${inside.url}/latest/meta-data/`,
      `http://localhost:${inside.port}/x`,
      `http://[::ffff:127.0.0.1]:${inside.port}/x`,
      `http://2130706433:${inside.port}/x`,
    ]) {
      const error = await refusalOf(get(url, nothingAllowed));
      expect(error, url).toBeInstanceOf(NetRefused);
      expect(error!.message, url).toMatch(
        /refused: .* (is|resolves to 127\.0\.0\.1,) a loopback address(?: \(IPv4-mapped\))? \(allow the host with BAKE_ALLOW_HOSTS\)$/,
      );
    }
    expect(inside.requests).toEqual([]);
    // Allowed by host:port (that port only) or by a trusted origin.
    expect(await (await get(`${inside.url}/ok`, allow(`127.0.0.1:${inside.port}`))).text()).toBe(inside.canary);
    expect(await (await get(`${inside.url}/ok`, { allowHosts: [], trustedOrigins: [inside.url] })).text()).toBe(inside.canary);
    expect(await refusalOf(get(`${inside.url}/x`, allow('127.0.0.1:1')))).toBeInstanceOf(NetRefused);
    expect(await refusalOf(get(`http://localhost:${inside.port}/x`, allow(`127.0.0.1:${inside.port}`)))).toBeInstanceOf(NetRefused);
    expect(inside.requests.map((r) => r.path)).toEqual(['/ok', '/ok']);
  });

  it('refuses other schemes', async () => {
    for (const url of ['file:///etc/passwd', 'ftp://example.org/x', 'data:text/plain,hi']) {
      expect((await refusalOf(get(url, nothingAllowed)))!.message, url).toContain('refused: only http and https are fetched');
    }
  });

  it('checks every redirect hop: an allowed host cannot redirect to a refused one', async () => {
    const metadata = await canary();
    const outside = await canary((_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${metadata.port}/latest/meta-data/iam` }).end();
    });
    const error = await refusalOf(get(`${outside.url}/preview.png`, allow(`127.0.0.1:${outside.port}`)));
    expect(error).toBeInstanceOf(NetRefused);
    expect(error!.message).toBe(
      `http://127.0.0.1:${metadata.port}/latest/meta-data/iam refused: 127.0.0.1:${metadata.port} is a loopback address (allow the ` +
        `host with BAKE_ALLOW_HOSTS)`,
    );
    expect(metadata.requests).toEqual([]);
  });

  it('follows a bounded number of redirects', async () => {
    const loop = await canary((req, res) => res.writeHead(307, { location: `/again${req.url}` }).end());
    const error = await refusalOf(get(`${loop.url}/x`, allow(`127.0.0.1:${loop.port}`)));
    expect(error!.message).toBe(`${loop.url}/x refused: more than 5 redirects`);
    expect(loop.requests).toHaveLength(6);
  });

  it('keeps credentials on the same origin and drops them when a redirect leaves it', async () => {
    const other = await canary();
    const store = await canary((req, res) => {
      if (req.url === '/same') res.writeHead(302, { location: '/final' }).end();
      else if (req.url === '/away') res.writeHead(302, { location: `${other.url}/stolen` }).end();
      else res.end('ok');
    });
    const policy = allow(`127.0.0.1:${store.port}`, `127.0.0.1:${other.port}`);
    const secret = { authorization: 'Bearer s3cret', 'x-api-key': 'museum_key', 'if-none-match': '"e1"' };
    await (await get(`${store.url}/same`, policy, secret)).text();
    expect(store.requests.map((r) => [r.path, r.headers.authorization])).toEqual([
      ['/same', 'Bearer s3cret'],
      ['/final', 'Bearer s3cret'],
    ]);
    await (await get(`${store.url}/away`, policy, secret)).text();
    expect(other.requests).toHaveLength(1);
    expect(other.requests[0]!.headers.authorization).toBeUndefined();
    expect(other.requests[0]!.headers['x-api-key']).toBeUndefined();
    expect(other.requests[0]!.headers['if-none-match']).toBe('"e1"');
  });

  it('bounds the body', async () => {
    const big = await canary((_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 1);
      let sent = 0;
      const pump = () => {
        while (sent < 64 && res.write(chunk)) sent++;
        if (sent < 64) res.once('drain', pump);
        else res.end();
      };
      pump();
    });
    const response = await get(`${big.url}/big`, allow(`127.0.0.1:${big.port}`), {}, 100_000);
    const error = await refusalOf(response.arrayBuffer());
    expect(error).toBeInstanceOf(BodyTooLarge);
    expect(error!.message).toBe('more than 100000 bytes, over the limit');
  });
});

describe('withRetries', () => {
  it('retries transient failures with backoff, and nothing else', async () => {
    let calls = 0;
    const retried: string[] = [];
    const value = await withRetries(
      async () => {
        if (++calls < 3) throw new Transient(`503 (${calls})`);
        return 'done';
      },
      { retries: 3, backoffMs: 1, onRetry: (p) => retried.push(p) },
    );
    expect([value, calls, retried]).toEqual(['done', 3, ['503 (1)', '503 (2)']]);
    const exhausted = await refusalOf(withRetries(() => Promise.reject(new Transient('timed out')), { retries: 2, backoffMs: 1 }));
    expect(exhausted).toBeInstanceOf(RetriesExhausted);
    expect(exhausted!.message).toBe('failed after 3 attempts: timed out');
    calls = 0;
    const permanent = await refusalOf(
      withRetries(
        async () => {
          calls++;
          throw new Error('404');
        },
        { retries: 3, backoffMs: 1 },
      ),
    );
    expect([permanent!.message, calls]).toEqual(['404', 1]);
  });
});
