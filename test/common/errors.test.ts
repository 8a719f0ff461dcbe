/** common/errors.ts: the one-line error texts every bake and server report uses. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { causeOf, issuesLine, oneLine } from '../../common/errors.ts';

describe('oneLine', () => {
  it('keeps the first line of a message, trimmed, for errors and other thrown values', () => {
    expect(oneLine(new Error('  bad header \nat Object.<anonymous> (x.js:1:1)'))).toBe('bad header');
    expect(oneLine('plain text\nsecond')).toBe('plain text');
    expect(oneLine(42)).toBe('42');
  });
});

describe('causeOf', () => {
  it("names a failed call's cause by its code, else its message, else the error's first line", () => {
    const refused = new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
    expect(causeOf(refused)).toBe('ECONNREFUSED');
    expect(causeOf(new TypeError('fetch failed', { cause: new Error('other side closed') }))).toBe('other side closed');
    expect(causeOf(new Error('no cause\nstack'))).toBe('no cause');
    expect(causeOf(undefined)).toBe('undefined');
  });
});

describe('issuesLine', () => {
  const schema = z.object({ name: z.string(), size: z.number().int(), tags: z.array(z.string()) });
  const error = schema.safeParse({ name: 1, size: 1.5, tags: [2] }).error!;

  it('lists `path: message` for the first issues and counts the rest', () => {
    const line = issuesLine(error, { max: 2 });
    expect(line).toMatch(/^name: .+; size: .+ \(and 1 more problem\)$/);
    expect(line).not.toContain('\n');
    expect(issuesLine(error)).toMatch(/^name: .+; size: .+; tags\.0: [^(]+$/);
  });

  it('words a path as the caller says, and leaves an issue at the root without one', () => {
    expect(issuesLine(error, { max: 1, at: ([field]) => `field ${String(field)}` })).toMatch(/^field name: .+ \(and 2 more problems\)$/);
    expect(issuesLine(z.string().safeParse(3).error!)).toMatch(/^Invalid input: expected string/);
  });
});
