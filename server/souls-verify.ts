/**
 * Soul document verification (spec: Soul), used by `museum souls verify` and by the tests:
 *   rule 1  keccak256(soul.content) equals soul.contentHash;
 *   rule 2  the address recovered (EIP-191 personal_sign) from verification.message and
 *           soul.signature equals soul.signerAddress, case-insensitively;
 * plus the check that makes the two rules mean something together:
 *   binding verification.message is `{contentHash}|{chainId}:{contract}:{tokenId}|codex-v{version}`
 *           for *this* contentHash (and this token, when the document names it) — otherwise a
 *           document with new content, its new hash and an old signed message passes rules 1 and 2.
 */
import { isAddress, isHex, keccak256, recoverMessageAddress, toBytes } from 'viem';

export type SoulRule = 'content-hash' | 'signature' | 'binding';

interface SoulCheck {
  rule: SoulRule;
  ok: boolean;
  /** One line: what was compared, or why it failed. */
  detail: string;
}

export interface SoulVerification {
  ok: boolean;
  checks: SoulCheck[];
  tokenId: string | null;
  signerAddress: string | null;
}

export const RULE_TITLES: Record<SoulRule, string> = {
  'content-hash': 'rule 1: keccak256(content) = contentHash',
  signature: 'rule 2: signer recovered from the message = signerAddress',
  binding: 'binding: the signed message names this contentHash and token',
};

/** `{contentHash}|{chainId}:{contractAddress}:{tokenId}|codex-v{version}` */
const MESSAGE = /^(0x[0-9a-fA-F]{64})\|(\d+):(0x[0-9a-fA-F]{40}):(\d+)\|codex-v([\w.-]+)$/;

const record = (v: unknown): Record<string, unknown> | null =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
const stringOrNull = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The Soul inside a single-soul response `{ data: Soul }`, or the bare Soul. */
function soulOf(document: unknown): Record<string, unknown> | null {
  const top = record(document);
  if (!top) return null;
  const inner = record(top.data);
  return inner && record(inner.soul) ? inner : top;
}

export async function verifySoul(document: unknown): Promise<SoulVerification> {
  const soulRecord = soulOf(document);
  const soul = record(soulRecord?.soul);
  const verification = record(soulRecord?.verification);
  const contentHash = stringOrNull(soul?.contentHash);
  const signerAddress = stringOrNull(soul?.signerAddress);
  const message = stringOrNull(verification?.message);
  const tokenId = soulRecord?.tokenId === undefined ? null : String(soulRecord.tokenId);
  const checks: SoulCheck[] = [
    contentHashCheck(stringOrNull(soul?.content), contentHash),
    await signatureCheck(message, stringOrNull(soul?.signature), signerAddress),
    bindingCheck(message, contentHash, tokenId, soulRecord),
  ];
  return { ok: checks.every((c) => c.ok), checks, tokenId, signerAddress };
}

/** Rule 1: keccak256 of the content is its contentHash. */
function contentHashCheck(content: string | null, contentHash: string | null): SoulCheck {
  if (content === null || contentHash === null)
    return { rule: 'content-hash', ok: false, detail: 'soul.content or soul.contentHash is missing' };
  const actual = keccak256(toBytes(content));
  const ok = actual.toLowerCase() === contentHash.toLowerCase();
  return {
    rule: 'content-hash',
    ok,
    detail: ok ? `contentHash ${contentHash}` : `keccak256(content) is ${actual}, contentHash says ${contentHash}`,
  };
}

/** Rule 2: the message's signature recovers the signer address. */
async function signatureCheck(message: string | null, signature: string | null, signerAddress: string | null): Promise<SoulCheck> {
  if (message === null || signature === null || signerAddress === null)
    return { rule: 'signature', ok: false, detail: 'verification.message, soul.signature or soul.signerAddress is missing' };
  if (!isHex(signature)) return { rule: 'signature', ok: false, detail: 'soul.signature is not a hex string' };
  try {
    const recovered = await recoverMessageAddress({ message, signature });
    const ok = recovered.toLowerCase() === signerAddress.toLowerCase();
    return {
      rule: 'signature',
      ok,
      detail: ok ? `signed by ${signerAddress}` : `recovered ${recovered}, signerAddress says ${signerAddress}`,
    };
  } catch {
    return { rule: 'signature', ok: false, detail: 'soul.signature is not a valid secp256k1 signature' };
  }
}

/** The binding: the signed message names this content hash, token, chain and contract. */
function bindingCheck(
  message: string | null,
  contentHash: string | null,
  tokenId: string | null,
  soulRecord: Record<string, unknown> | null,
): SoulCheck {
  const match = message === null ? null : MESSAGE.exec(message);
  if (!match)
    return {
      rule: 'binding',
      ok: false,
      detail: 'verification.message is not {contentHash}|{chainId}:{contract}:{tokenId}|codex-v{version}',
    };
  const [, hash, chainId, contract, token] = match as unknown as [string, string, string, string, string];
  const problems: string[] = [];
  if (contentHash === null || hash.toLowerCase() !== contentHash.toLowerCase()) problems.push(`the message signs contentHash ${hash}`);
  if (tokenId !== null && token !== tokenId) problems.push(`the message names token ${token}, the document ${tokenId}`);
  const docChain = soulRecord?.chainId;
  if (docChain !== undefined && String(docChain) !== chainId)
    problems.push(`the message names chain ${chainId}, the document ${String(docChain)}`);
  const docContract = stringOrNull(soulRecord?.contractAddress);
  if (docContract !== null && isAddress(docContract, { strict: false }) && docContract.toLowerCase() !== contract.toLowerCase()) {
    problems.push(`the message names contract ${contract}, the document ${docContract}`);
  }
  return { rule: 'binding', ok: problems.length === 0, detail: problems.length ? problems.join('; ') : `${chainId}:${contract}:${token}` };
}
