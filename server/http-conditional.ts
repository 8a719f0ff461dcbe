/**
 * Conditional and range requests, shared by the routes: strong ETags with
 * If-None-Match, one `bytes=` Range, and the caching policies of what we serve.
 */
export const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable';
/** Slot data changes with a bake under the same URL: always revalidate (a 304 costs almost nothing). */
export const SLOTS_CACHE_CONTROL = 'public, no-cache';
export const JSON_TYPE = 'application/json; charset=utf-8';

/** If-None-Match against a strong ETag (weak comparison, as RFC 9110 prescribes for this header). */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch === etag) return true;
  for (const candidate of ifNoneMatch.split(',')) {
    const tag = candidate.trim();
    if (tag === '*' || tag === etag || (tag.startsWith('W/') && tag.slice(2) === etag)) return true;
  }
  return false;
}

export interface ByteRange {
  start: number;
  end: number;
}

/**
 * One `bytes=` range of a body of `size` bytes. Null means "serve the whole body": no header, a
 * syntactically invalid one, or several ranges (RFC 9110 lets a server ignore those).
 */
export function parseRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | null {
  if (!header) return null;
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match) return null;
  const [, first, last] = match as unknown as [string, string, string];
  if (first === '' && last === '') return null;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return null;
  if (!(start < size)) return 'unsatisfiable';
  return { start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1) };
}
