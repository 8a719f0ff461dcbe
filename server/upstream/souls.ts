/**
 * The signed-identity service (souls; decisions: upstream services):
 *   GET /api/souls/{chainId}/{contract}?page&limit → { data: { souls, page, limit, total, agentRegistryAddress? } }
 *   GET /api/souls/{chainId}/{contract}/{tokenId}  → { data: Soul } (404 when there is none)
 * A bare body without the `data` envelope is accepted too. Soul documents are passed on as signed:
 * fields we do not know are kept, because the signed record's full field list is not ours to trim.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { UpstreamHttp } from './http.ts';

export const SOULS_SERVICE = 'signed-identity service';

const SoulDocument = z
  .looseObject({
    content: z.string().describe('markdown identity document'),
    contentHash: z.string().describe('keccak256 of content'),
    signature: z.string().describe('EIP-191 personal_sign signature of verification.message'),
    signerAddress: z.string(),
    ipfsCid: z.string().nullable().optional().describe('IPFS CID of the pinned document'),
    mintedAgentId: z.union([z.string(), z.number()]).nullable().optional().describe('reserved for registry registration'),
    ownerAddress: z.string().nullable().optional().describe('cached owner'),
  })
  .meta({ id: 'SoulDocument' });

export const Soul = z
  .looseObject({
    chainId: z.number().int().optional(),
    contractAddress: z.string().optional(),
    tokenId: z.union([z.string(), z.number()]).transform(String).pipe(z.string()).optional(),
    soul: SoulDocument,
    verification: z
      .looseObject({ message: z.string().describe('{contentHash}|{chainId}:{contractAddress}:{tokenId}|codex-v{version}') })
      .describe('the signed message and what it binds'),
  })
  .meta({ id: 'Soul' });
export type Soul = z.output<typeof Soul>;

export const SoulList = z
  .looseObject({
    souls: z.array(Soul),
    page: z.number().int(),
    limit: z.number().int(),
    total: z.number().int(),
    agentRegistryAddress: z.string().nullable().optional().describe('collection-level agent registry'),
  })
  .meta({ id: 'SoulList' });
export type SoulList = z.output<typeof SoulList>;

/** Accept `{ data: X }` or a bare X. */
const UpstreamList = z.union([z.object({ data: SoulList }).transform((v) => v.data), SoulList]);
const UpstreamOne = z.union([z.object({ data: Soul }).transform((v) => v.data), Soul]);

export interface SoulsClientOptions {
  url: string;
  timeoutMs: number;
  log?: Logger;
}

export class SoulsClient {
  private readonly http: UpstreamHttp;

  constructor(options: SoulsClientOptions) {
    this.http = new UpstreamHttp({ service: SOULS_SERVICE, baseUrl: options.url, timeoutMs: options.timeoutMs, log: options.log });
  }

  /** The souls of one collection, paged; null when the upstream does not know the collection. */
  async list(chainId: number, contract: string, page: number, limit: number, signal?: AbortSignal): Promise<SoulList | null> {
    const path = `/api/souls/${chainId}/${contract}`;
    const result = await this.http.json(path, { query: { page, limit }, accept: [404], signal });
    if (result.body === null) return null;
    const parsed = UpstreamList.safeParse(result.body);
    if (!parsed.success) throw this.http.failure('body', `${path}: unexpected response shape`);
    return parsed.data;
  }

  /** The latest signed document of one token; null when there is none. */
  async get(chainId: number, contract: string, tokenId: string, signal?: AbortSignal): Promise<Soul | null> {
    const path = `/api/souls/${chainId}/${contract}/${encodeURIComponent(tokenId)}`;
    const result = await this.http.json(path, { accept: [404], signal });
    if (result.body === null) return null;
    const parsed = UpstreamOne.safeParse(result.body);
    if (!parsed.success) throw this.http.failure('body', `${path}: unexpected response shape`);
    return parsed.data;
  }
}
