/** GET /v1/souls/{chainId}/{contractAddress}[/{tokenId}]: signed identity documents, live from upstream. */
import { z } from 'zod';
import { limitParam, pageParam, type RouteModule } from '../route-table.ts';
import { badRequest, notFound, unconfigured } from '../errors.ts';
import { Soul, SoulList, SOULS_SERVICE } from '../upstream/souls.ts';

const CHAIN_ID = /^[1-9]\d{0,15}$/;
const CONTRACT = /^0x[0-9a-fA-F]{40}$/;
const TOKEN_ID = /^\d{1,78}$/; // a uint256 in decimal

// Path parts are validated in the handler: the spec answers 400 (not 404) for malformed ones.
const collectionParams = {
  chainId: z
    .string()
    .describe('EVM chain id (positive integer)')
    .meta({ type: 'integer', minimum: 1 } as Record<string, unknown>),
  contractAddress: z
    .string()
    .describe('ERC-721 contract address: 0x followed by 40 hex digits')
    .meta({ pattern: CONTRACT.source } as Record<string, unknown>),
};

function parseCollection(params: { chainId: string; contractAddress: string }): { chainId: number; contract: string } {
  const chainId = Number(params.chainId);
  if (!CHAIN_ID.test(params.chainId) || !Number.isSafeInteger(chainId)) throw badRequest('chainId must be a positive integer');
  if (!CONTRACT.test(params.contractAddress)) throw badRequest('contractAddress must be 0x followed by 40 hex digits');
  return { chainId, contract: params.contractAddress };
}

export const soulRoutes: RouteModule = (api, { souls: client }) => {
  const configured = () => {
    if (!client) throw unconfigured(SOULS_SERVICE);
    return client;
  };

  api.route({
    method: 'GET',
    path: '/v1/souls/{chainId}/{contractAddress}',
    operationId: 'listSouls',
    summary: 'Signed identity documents of one NFT collection, paged',
    tag: 'souls',
    access: 'key',
    params: z.object(collectionParams),
    query: z.object({ page: pageParam(), limit: limitParam(50, 100) }),
    response: { json: z.object({ data: SoulList }) },
    errors: [400, 404, 502, 503],
    async handler(ctx, { params, query }) {
      const { chainId, contract } = parseCollection(params);
      const list = await configured().list(chainId, contract, query.page, query.limit);
      if (!list) throw notFound(`No souls for ${chainId}:${contract}`);
      ctx.body = { data: list };
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/souls/{chainId}/{contractAddress}/{tokenId}',
    operationId: 'getSoul',
    summary: 'The latest signed identity document of one token, with its verification block',
    tag: 'souls',
    access: 'key',
    params: z.object({ ...collectionParams, tokenId: z.string().describe('token id (decimal)') }),
    response: { json: z.object({ data: Soul }) },
    errors: [400, 404, 502, 503],
    async handler(ctx, { params }) {
      const { chainId, contract } = parseCollection(params);
      if (!TOKEN_ID.test(params.tokenId)) throw badRequest('tokenId must be a decimal token id');
      const soul = await configured().get(chainId, contract, params.tokenId);
      if (!soul) throw notFound(`No soul for token ${params.tokenId}`);
      ctx.body = { data: soul };
    },
  });
};
