import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySoul } from '../../../server/souls-verify.ts';
import { startCanary } from '../../fakes/canary.ts';
import { type SoulRecord, type SoulsFake, signSoul, SOULS_TEST_PRIVATE_KEY, startFakeSouls } from '../../fakes/souls.ts';
import { type OpenApiDoc, validateAgainstOpenApi } from '../../helpers/openapi.ts';
import { errorOf, startTestServer, type TestServer } from '../../helpers/server.ts';

let fake: SoulsFake;
let server: TestServer;
let tmp: string;

beforeAll(async () => {
  fake = await startFakeSouls({ tokens: 30 });
  server = await startTestServer({ env: { SOULS_UPSTREAM_URL: fake.url, UPSTREAM_TIMEOUT_MS: '400' } });
  tmp = mkdtempSync(join(tmpdir(), 'souls-test-'));
});
afterAll(async () => {
  await server?.close();
  await fake?.close();
  rmSync(tmp, { recursive: true, force: true });
});

type SoulBody = { data: SoulRecord };
type ListBody = { data: { souls: SoulRecord[]; page: number; limit: number; total: number; agentRegistryAddress: string } };
const collectionPath = () => `/v1/souls/${fake.chainId}/${fake.contract}`;
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const failing = (result: Awaited<ReturnType<typeof verifySoul>>) => result.checks.filter((c) => !c.ok).map((c) => c.rule);

describe('souls routes', () => {
  it('lists a collection with pagination ({ souls, page, limit, total })', async () => {
    const first = (await (await server.get(collectionPath())).json()) as ListBody;
    expect(first.data).toMatchObject({ page: 1, limit: 50, total: 30, agentRegistryAddress: fake.agentRegistryAddress });
    expect(first.data.souls.map((s) => s.tokenId)).toEqual(Array.from({ length: 30 }, (_, i) => String(i + 1)));

    const page2 = (await (await server.get(`${collectionPath()}?page=2&limit=10`)).json()) as ListBody;
    expect(page2.data).toMatchObject({ page: 2, limit: 10, total: 30 });
    expect(page2.data.souls.map((s) => s.tokenId)).toEqual(Array.from({ length: 10 }, (_, i) => String(i + 11)));
    expect(
      fake
        .requestsTo(/^\/api\/souls/)
        .at(-1)!
        .query.get('limit'),
    ).toBe('10');

    // Lowercase addresses name the same contract.
    expect((await server.get(`/v1/souls/${fake.chainId}/${fake.contract.toLowerCase()}?limit=1`)).status).toBe(200);
  });

  it('serves documents whose signatures verify under both rules', async () => {
    const list = (await (await server.get(collectionPath())).json()) as ListBody;
    for (const soul of list.data.souls) {
      const result = await verifySoul(soul);
      expect(result.ok, JSON.stringify(result.checks)).toBe(true);
      expect(result.signerAddress).toBe(fake.signerAddress);
    }
    const one = (await (await server.get(`${collectionPath()}/17`)).json()) as SoulBody;
    expect(one.data).toEqual(fake.souls.get('17'));
    const result = await verifySoul(one); // the `{ data }` response as a whole
    expect(result).toMatchObject({ ok: true, tokenId: '17' });
    expect(result.checks.map((c) => c.rule)).toEqual(['content-hash', 'signature', 'binding']);
  });

  it('answers 404 for unknown tokens and collections', async () => {
    expect(await errorOf(await server.get(`${collectionPath()}/999`))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(await errorOf(await server.get(`/v1/souls/1/0x${'1'.repeat(40)}`))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it.each([
    ['chainId 0', `/v1/souls/0/0x${'a'.repeat(40)}`, 'chainId'],
    ['a negative chainId', `/v1/souls/-1/0x${'a'.repeat(40)}`, 'chainId'],
    ['a non-numeric chainId', `/v1/souls/base/0x${'a'.repeat(40)}`, 'chainId'],
    ['a short contract', '/v1/souls/1/0x1234', 'contractAddress'],
    ['a contract without 0x', `/v1/souls/1/${'a'.repeat(40)}`, 'contractAddress'],
    ['a non-hex contract', `/v1/souls/1/0x${'g'.repeat(40)}`, 'contractAddress'],
    ['a non-numeric token', `/v1/souls/1/0x${'a'.repeat(40)}/abc`, 'tokenId'],
  ])('rejects %s with 400 without asking the upstream', async (_name, path, field) => {
    const before = fake.requests.length;
    const error = await errorOf(await server.get(path));
    expect(error).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    expect(error.message).toContain(field);
    expect(fake.requests.length).toBe(before);
  });

  it.each([
    ['a 5xx', { kind: 'status', status: 500 } as const],
    ['a garbage body', { kind: 'garbage' } as const],
    ['a timeout', { kind: 'timeout' } as const],
  ])('answers 502 on %s', async (_name, fault) => {
    fake.fault(/^\/api\/souls/, fault);
    try {
      expect(await errorOf(await server.get(`${collectionPath()}/3`))).toMatchObject({ status: 502, code: 'UPSTREAM' });
      expect(await errorOf(await server.get(collectionPath()))).toMatchObject({ status: 502, code: 'UPSTREAM' });
    } finally {
      fake.clearFaults();
    }
  });

  it('answers 503 UNCONFIGURED without a souls upstream', async () => {
    const bare = await startTestServer();
    try {
      expect(await errorOf(await bare.get(`/v1/souls/1/0x${'a'.repeat(40)}/1`))).toMatchObject({ status: 503, code: 'UNCONFIGURED' });
    } finally {
      await bare.close();
    }
  });
});

describe('verification rules', () => {
  const original = () => clone(fake.souls.get('5')!);

  it('fails rule 1 alone when the content was edited', async () => {
    const doc = original();
    doc.soul.content += '\nI also own the moon.';
    expect(failing(await verifySoul(doc))).toEqual(['content-hash']);
  });

  it('fails rule 2 alone when the signer address is not the one that signed', async () => {
    const doc = original();
    doc.soul.signerAddress = '0x000000000000000000000000000000000000bEEF';
    expect(failing(await verifySoul({ data: doc }))).toEqual(['signature']);
    // Case does not matter.
    const lower = original();
    lower.soul.signerAddress = lower.soul.signerAddress.toLowerCase();
    expect((await verifySoul(lower)).ok).toBe(true);
  });

  it('fails rule 2 when the signed message was altered or the signature is broken', async () => {
    const doc = original();
    doc.verification.message = doc.verification.message.replace('|codex-v1', '|codex-v2');
    expect(failing(await verifySoul(doc))).toEqual(['signature']);
    const broken = original();
    broken.soul.signature = `0x${'00'.repeat(65)}`;
    expect(failing(await verifySoul(broken))).toEqual(['signature']);
  });

  it('fails the binding when new content and its hash reuse an old signed message', async () => {
    const doc = original();
    const other = await signSoul(SOULS_TEST_PRIVATE_KEY, {
      chainId: fake.chainId,
      contract: fake.contract,
      tokenId: '5',
      content: 'Forged soul',
      version: 1,
    });
    doc.soul.content = other.soul.content;
    doc.soul.contentHash = other.soul.contentHash;
    expect(failing(await verifySoul(doc))).toEqual(['binding']);
  });

  it('fails the binding when a valid document of another token is presented as this one', async () => {
    const doc = clone(fake.souls.get('6')!);
    doc.tokenId = '5';
    expect(failing(await verifySoul(doc))).toEqual(['binding']);
  });

  it('reports missing parts instead of throwing', async () => {
    expect(failing(await verifySoul({ nothing: true }))).toEqual(['content-hash', 'signature', 'binding']);
  });
});

describe('museum souls verify', () => {
  const run = (args: string[]) =>
    promisify(execFile)(process.execPath, ['bin/museum.js', 'souls', 'verify', ...args], { cwd: process.cwd() }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  it('passes a served document (by URL), fails a tampered file naming the rule, and says why it cannot read', async () => {
    const badFile = join(tmp, 'bad.json');
    const bad = clone(fake.souls.get('9')!);
    bad.soul.content = bad.soul.content.replace('curious', 'furious');
    writeFileSync(badFile, JSON.stringify(bad));

    const [tampered, url, missing] = await Promise.all([
      run([badFile]),
      run([`${server.url}${collectionPath()}/9`, '--key', server.key, '--json']),
      run([join(tmp, 'nope.json')]),
    ]);
    expect(tampered.code).toBe(1);
    expect(tampered.stdout).toMatch(/INVALID/);
    expect(tampered.stdout).toMatch(/FAIL\s+rule 1/);
    expect(tampered.stdout).toMatch(/ok\s+rule 2/);

    expect(url.code).toBe(0);
    expect(JSON.parse(url.stdout)).toMatchObject({ ok: true, tokenId: '9', signerAddress: fake.signerAddress });

    expect(missing.code).toBe(1);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toContain('no such file');
  });
});

describe('museum souls verify against hostile servers', () => {
  const run = (args: string[]) =>
    promisify(execFile)(process.execPath, ['bin/museum.js', 'souls', 'verify', ...args], { cwd: process.cwd(), maxBuffer: 1 << 20 }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
    );

  it('never sends the key to another host or port on a redirect; keeps it on the same origin', async () => {
    const document = JSON.stringify(fake.souls.get('9'));
    const elsewhere = await startCanary((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(document));
    const museum = await startCanary((req, res) => {
      if (req.url === '/moved') res.writeHead(302, { location: `${elsewhere.url}/soul` }).end();
      else if (req.url === '/here') res.writeHead(301, { location: '/soul' }).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end(document);
    });
    try {
      const [away, same] = [
        await run([`${museum.url}/moved`, '--key', 'museum_secretkey']),
        await run([`${museum.url}/here`, '--key', 'museum_secretkey']),
      ];
      expect(away.code).toBe(0);
      expect(same.code).toBe(0);
      expect(museum.requests.map((r) => [r.path, r.headers['x-api-key']])).toEqual([
        ['/moved', 'museum_secretkey'],
        ['/here', 'museum_secretkey'],
        ['/soul', 'museum_secretkey'],
      ]);
      expect(elsewhere.requests).toHaveLength(1);
      expect(elsewhere.requests[0]!.headers['x-api-key']).toBeUndefined();
    } finally {
      await Promise.all([elsewhere.close(), museum.close()]);
    }
  });

  it('stops reading a huge response at the cap: exit 1 with one line', async () => {
    const chunk = Buffer.alloc(256 * 1024, 0x20);
    const flood = await startCanary((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    try {
      const result = await run([`${flood.url}/soul`, '--key', 'k']);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toBe(`museum: could not fetch ${flood.url}/soul: the response is larger than 4194304 bytes\n`);
    } finally {
      await flood.close();
    }
  });

  it('refuses endless redirects with one line, and prints content with control characters escaped', async () => {
    const loop = await startCanary((req, res) => res.writeHead(302, { location: `/r${req.url}` }).end());
    const hostile = clone(fake.souls.get('9')!) as SoulRecord & { tokenId: string };
    hostile.tokenId = '9\u001b]0;pwned\u0007\u001b[2J\u009b31m';
    const file = join(tmp, 'hostile.json');
    writeFileSync(file, JSON.stringify(hostile));
    try {
      const redirects = await run([`${loop.url}/soul`]);
      expect(redirects.code).toBe(1);
      expect(redirects.stderr).toBe(`museum: could not fetch ${loop.url}/soul: more than 5 redirects\n`);
      const printed = await run([file]);
      expect(printed.code).toBe(1); // the message names token 9, the document this one
      expect(printed.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
      expect(printed.stdout).toContain('soul of token 9\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m: INVALID');
    } finally {
      await loop.close();
    }
  });
});

describe('OpenAPI', () => {
  it('documents every response of the souls routes', async () => {
    const doc = (await (await server.get('/v1/openapi.json')).json()) as OpenApiDoc;
    for (const path of [
      collectionPath(),
      `${collectionPath()}?page=2&limit=5`,
      `${collectionPath()}/3`,
      `${collectionPath()}/404`,
      `/v1/souls/0/${fake.contract}`,
      '/v1/souls/1/0x12/3',
    ]) {
      const res = await server.get(path);
      validateAgainstOpenApi(doc, 'GET', path, res.status, await res.json());
    }
  });
});
