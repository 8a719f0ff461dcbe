/** Error text for logs and one-line reports: never a stack, never a second line an upstream slipped in. */
import type { z } from 'zod';

/** The first line of an error's message (of the value itself when it is not an Error), trimmed. */
export const oneLine = (err: unknown): string => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.trim();

/** What a failed network call ran into: its cause's code (ECONNREFUSED…) or message, else its first line. */
export function causeOf(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } } | null | undefined)?.cause;
  return cause?.code ?? cause?.message ?? oneLine(err);
}

/**
 * A failed zod parse on one line: `path: message` for its first `max` issues, then how many more
 * (`at` words a path, e.g. a record's index as "record 3 (id 7)"; default the dotted path).
 */
export function issuesLine(error: z.ZodError, options: { max?: number; at?: (path: PropertyKey[]) => string } = {}): string {
  const { max = 3, at = (path) => path.map(String).join('.') } = options;
  const shown = error.issues.slice(0, max).map((issue) => {
    const where = at(issue.path);
    return where ? `${where}: ${issue.message}` : issue.message;
  });
  const more = error.issues.length - shown.length;
  return `${shown.join('; ')}${more > 0 ? ` (and ${more} more problem${more > 1 ? 's' : ''})` : ''}`;
}
