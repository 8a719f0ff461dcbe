/**
 * Input problems in plain words (decisions.md "Clients of the HTTP API"): one problem per zod issue,
 * each naming its field — a query parameter's name, or a dotted body path (`rooms.0.title`) — with a
 * sentence a client developer can act on ("q is required", "limit must be an integer"), never the
 * validator's own wording. A message a schema wrote itself (a refinement's, a regex's) is kept.
 */
import type { z } from 'zod';
import { HttpError, type Problem } from './errors.ts';

/** At most this many problems are reported for one request (a hostile body can have thousands). */
const MAX_PROBLEMS = 20;

/** zod's own messages start with these; anything else was written by a schema and is kept. */
const ZOD_WORDING = /^(Invalid|Too (small|big)|Expected|Unrecognized|Required)/;

const ARTICLE: Record<string, string> = { integer: 'an integer', int: 'an integer', object: 'an object', array: 'an array' };
const kind = (expected: string) => ARTICLE[expected] ?? `a ${expected}`;

type Issue = z.core.$ZodIssue;

/** A size bound in words: "at least 3 characters", "at most 25", "at least 1 item". */
function bound(issue: Issue & { origin?: string; inclusive?: boolean }, limit: number | bigint, side: 'least' | 'most'): string {
  const n = Number(limit);
  const plural = n === 1 ? '' : 's';
  if (issue.origin === 'string') return `must be at ${side} ${n} character${plural}`;
  if (issue.origin === 'array' || issue.origin === 'set') return `must have at ${side} ${n} item${plural}`;
  if (issue.inclusive === false) return `must be ${side === 'least' ? 'greater' : 'less'} than ${n}`;
  return `must be at ${side} ${n}`;
}

/** The value a path points at in the input as received (zod's issues do not carry it). */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) value = value !== null && typeof value === 'object' ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  return value;
}

/** One issue as a sentence about `field`. */
function sentence(issue: Issue, field: string, input: unknown): string {
  if (!ZOD_WORDING.test(issue.message)) return issue.message;
  switch (issue.code) {
    case 'invalid_type':
      return valueAt(input, issue.path) === undefined ? `${field} is required` : `${field} must be ${kind(issue.expected)}`;
    case 'too_small':
      return `${field} ${bound(issue, issue.minimum, 'least')}`;
    case 'too_big':
      return `${field} ${bound(issue, issue.maximum, 'most')}`;
    case 'invalid_value':
      if (issue.values.length === 1) return `${field} must be ${JSON.stringify(issue.values[0])}`;
      return `${field} must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_format':
      return `${field} is not a valid ${issue.format === 'regex' ? 'value' : issue.format}`;
    case 'not_multiple_of':
      return `${field} must be a multiple of ${String(issue.divisor)}`;
    default:
      return `${field} is not valid`;
  }
}

/** A problem's field: the parameter's name, or the dotted body path (`body` for the body as a whole). */
const fieldOf = (path: readonly PropertyKey[], where: 'query' | 'body'): string =>
  path.length === 0 ? (where === 'body' ? 'body' : 'query') : path.map(String).join('.');

/** Every problem of a failed parse of `input`, in plain words. */
function problemsOf(error: z.ZodError, where: 'query' | 'body', input: unknown): Problem[] {
  const problems: Problem[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const field = fieldOf([...issue.path, key], where);
        problems.push({ field, message: `${field} is not a known field` });
      }
    } else {
      const field = fieldOf(issue.path, where);
      problems.push({ field, message: sentence(issue, field, input) });
    }
    if (problems.length >= MAX_PROBLEMS) break;
  }
  return problems.slice(0, MAX_PROBLEMS);
}

/** The 400 for a failed parse of `input`: one error object per problem. */
export const invalidInput = (error: z.ZodError, where: 'query' | 'body', input: unknown): HttpError => {
  const problems = problemsOf(error, where, input);
  return new HttpError(400, 'BAD_REQUEST', problems[0]?.message ?? `Invalid ${where}`, {}, problems);
};
