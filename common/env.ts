/**
 * Environment parsing shared by the server and the bake (decisions: one set of variable names).
 * The bake never imports server/: what both read from the environment is defined here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnv } from 'node:util';
import { z } from 'zod';
import { issuesLine } from './errors.ts';

export const url = z
  .string()
  .trim()
  .url()
  .transform((u) => u.replace(/\/+$/, ''));
export const optionalUrl = z.preprocess((v) => (v === '' ? undefined : v), url.optional());
export const optionalString = z.preprocess((v) => (v === '' ? undefined : v), z.string().optional());
export const flag = z.preprocess(
  (v) => (typeof v === 'string' ? !['', '0', 'false', 'no', 'off'].includes(v.toLowerCase()) : v),
  z.boolean(),
);
export const int = (def: number, min: number, max: number) =>
  z.preprocess((v) => (v === '' || v === undefined ? def : Number(v)), z.number().int().min(min).max(max));

/** The content store `bake sync` pulls from (and the server may link to). */
export const ContentStoreEnv = z.object({
  CONTENT_UPSTREAM_URL: optionalUrl,
  CONTENT_UPSTREAM_TOKEN: optionalString,
});

class EnvError extends Error {
  override name = 'EnvError';
}

/** The content store's URL and token, or undefined when CONTENT_UPSTREAM_URL is not set. */
export function contentStoreFromEnv(env: Record<string, string | undefined> = process.env): { url: string; token?: string } | undefined {
  const parsed = ContentStoreEnv.safeParse(env);
  if (!parsed.success) {
    throw new EnvError(`invalid configuration: ${issuesLine(parsed.error)}`);
  }
  const e = parsed.data;
  return e.CONTENT_UPSTREAM_URL ? { url: e.CONTENT_UPSTREAM_URL, token: e.CONTENT_UPSTREAM_TOKEN } : undefined;
}

/**
 * `.env` in `dir` (the working directory), when there is one, into `env` (decisions: `museum` reads
 * it; the process environment wins). Parsed by node's own dotenv parser. Returns the names it set.
 */
export function loadDotEnv(dir: string, env: Record<string, string | undefined> = process.env): string[] {
  const path = join(dir, '.env');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new EnvError(`${path} is not readable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const set: string[] = [];
  for (const [name, value] of Object.entries(parseEnv(text))) {
    if (env[name] !== undefined) continue;
    env[name] = value;
    set.push(name);
  }
  return set;
}
