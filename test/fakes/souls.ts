/**
 * A fake signed-identity service (souls, real HTTP):
 *   GET /api/souls/{chainId}/{contract}?page&limit → { data: { souls, page, limit, total, agentRegistryAddress } }
 *   GET /api/souls/{chainId}/{contract}/{tokenId}  → { data: Soul }; 404 { error } when unknown
 * Every document is signed for real: a secp256k1 key (viem) signs, with EIP-191 personal_sign,
 * the message `{contentHash}|{chainId}:{contract}:{tokenId}|codex-v{version}`, where contentHash
 * is keccak256 of the markdown content. The message format is written out here independently of
 * the server's verifier, so a test that verifies what we serve checks both against the spec.
 */
import { type Hex, keccak256, toBytes } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type FakeServer, sendJson, startFakeServer } from './faults.ts';

/** A fixed test key (never used anywhere real). */
export const SOULS_TEST_PRIVATE_KEY: Hex = '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba';

export interface SoulsFakeOptions {
  privateKey?: Hex;
  chainId?: number;
  contract?: string;
  /** Number of tokens with a soul (ids 1..n, default 30). */
  tokens?: number;
  version?: number;
}

export interface SoulsFake extends FakeServer {
  chainId: number;
  contract: string;
  signerAddress: string;
  agentRegistryAddress: string;
  /** The served documents by token id; tests may replace one to serve a tampered document. */
  souls: Map<string, SoulRecord>;
}

export interface SoulRecord {
  chainId: number;
  contractAddress: string;
  tokenId: string;
  soul: {
    content: string;
    contentHash: Hex;
    signature: Hex;
    signerAddress: string;
    ipfsCid: string;
    mintedAgentId: string | null;
    ownerAddress: string | null;
    version: number;
    updatedAt: string;
  };
  verification: { message: string; version: number; standard: 'EIP-191' };
}

export async function signSoul(
  privateKey: Hex,
  doc: { chainId: number; contract: string; tokenId: string; content: string; version: number; ownerAddress?: string | null },
): Promise<SoulRecord> {
  const account = privateKeyToAccount(privateKey);
  const contentHash = keccak256(toBytes(doc.content));
  const message = `${contentHash}|${doc.chainId}:${doc.contract}:${doc.tokenId}|codex-v${doc.version}`;
  const signature = await account.signMessage({ message });
  return {
    chainId: doc.chainId,
    contractAddress: doc.contract,
    tokenId: doc.tokenId,
    soul: {
      content: doc.content,
      contentHash,
      signature,
      signerAddress: account.address,
      ipfsCid: `bafkrei${contentHash.slice(2, 54)}`,
      mintedAgentId: null,
      ownerAddress: doc.ownerAddress ?? null,
      version: doc.version,
      updatedAt: new Date(Date.UTC(2025, 0, 1) + Number(doc.tokenId) * 60_000).toISOString(),
    },
    verification: { message, version: doc.version, standard: 'EIP-191' },
  };
}

const soulContent = (tokenId: string) =>
  `# Soul of token ${tokenId}\n\nI am the keeper of room ${tokenId}. I speak softly about light, and I remember every visitor.\n\n- ` +
  `temperament: curious\n- codex: v1\n`;

export async function startFakeSouls(options: SoulsFakeOptions = {}): Promise<SoulsFake> {
  const privateKey = options.privateKey ?? SOULS_TEST_PRIVATE_KEY;
  const chainId = options.chainId ?? 8453;
  const contract = options.contract ?? '0x5Af0D9827E0c53E4799BB226655A1de152A425a5';
  const version = options.version ?? 1;
  const agentRegistryAddress = '0x000000000000000000000000000000000000dEaD';
  const souls = new Map<string, SoulRecord>();
  for (let t = 1; t <= (options.tokens ?? 30); t++) {
    const tokenId = String(t);
    souls.set(
      tokenId,
      await signSoul(privateKey, {
        chainId,
        contract,
        tokenId,
        content: soulContent(tokenId),
        version,
        ownerAddress: `0x${tokenId.padStart(40, '0')}`,
      }),
    );
  }

  const fake = await startFakeServer((req, res) => {
    const m = /^\/api\/souls\/(\d+)\/(0x[0-9a-fA-F]{40})(?:\/(\d+))?$/.exec(req.path);
    if (req.method !== 'GET' || !m || Number(m[1]) !== chainId || m[2]!.toLowerCase() !== contract.toLowerCase()) {
      return sendJson(res, 404, { error: 'Not found' });
    }
    if (m[3] !== undefined) {
      const soul = souls.get(m[3]);
      return soul ? sendJson(res, 200, { data: soul }) : sendJson(res, 404, { error: 'Soul not found' });
    }
    const page = Math.max(1, Number(req.query.get('page') ?? 1) || 1);
    const limit = Math.min(100, Math.max(1, Number(req.query.get('limit') ?? 50) || 50));
    const all = [...souls.values()].sort((a, b) => Number(a.tokenId) - Number(b.tokenId));
    sendJson(res, 200, {
      data: { souls: all.slice((page - 1) * limit, page * limit), page, limit, total: all.length, agentRegistryAddress },
    });
  });
  return Object.assign(fake, { chainId, contract, signerAddress: privateKeyToAccount(privateKey).address, agentRegistryAddress, souls });
}
