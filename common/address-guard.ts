/**
 * Which network addresses a server-side fetch may reach on someone else's say-so: public ones only.
 * Loopback, private, link-local (cloud metadata), CGNAT, multicast and reserved ranges are refused,
 * checked on the resolved address (a DNS name pointing inside is refused too) and again on every
 * redirect, unless the `host[:port]` is listed explicitly by the operator (tests list their fakes).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['64:ff9b::', 96], ['100::', 64], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8],
] as const) blocked.addSubnet(net, prefix, 'ipv6');

/** Whether an IP address is publicly routable (IPv4-mapped IPv6 is judged as its IPv4). */
export function isPublicAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return isPublicAddress(mapped[1]!);
  const family = isIP(address);
  if (family === 0) return false;
  return !blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/** `host[:port]` entries (comma-separated) an operator allows even though they resolve inside. */
export function parseAllowHosts(value: string | undefined): Set<string> {
  return new Set((value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean));
}

export class BlockedAddressError extends Error {}

/**
 * The guard for one URL: throws for a refused IP-literal host, and returns the `lookup` to give
 * node's http(s).request so a resolved name is checked on the address actually connected to.
 */
export function guardUrl(url: URL, allowHosts: ReadonlySet<string>): LookupFunction | undefined {
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  if (allowHosts.has(host) || allowHosts.has(`${host}:${port}`)) return undefined;
  if (isIP(host)) {
    if (!isPublicAddress(host)) throw new BlockedAddressError(`${host} is not a public address`);
    return undefined;
  }
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as LookupAddress[];
      const refused = list.find((a) => !isPublicAddress(a.address));
      if (refused || list.length === 0) {
        return callback(new BlockedAddressError(`${hostname} resolves to a non-public address`), '', 0);
      }
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
}
