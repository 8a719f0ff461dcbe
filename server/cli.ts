/** `museum serve`, `museum keys …`, `museum souls verify`. */
import { existsSync } from 'node:fs';
import { lstat, readFile } from 'node:fs/promises';
import { emptyManifest, writeFileAtomic } from '../artifacts/store.ts';
import { dirname, join, resolve } from 'node:path';
import { Command } from 'commander';
import { printable } from '../common/terminal.ts';
import type { MuseumServer } from './app.ts';
import { type Config, loadConfig } from './config.ts';
import { sampleExhibitionLine } from './sample-exhibition.ts';
import type { ApiKeyInfo, KeyStore } from './state/keys.ts';

export function serveCommand(): Command {
  return new Command('serve')
    .description('Serve the baked artifacts (DATA_DIR) and the /v1 API (configuration from the environment)')
    .option('--port <port>', 'port to listen on (overrides PORT)')
    .option('--dev-key', 'issue a fresh development API key named "dev" and print it')
    .action(async (options: { port?: string; devKey?: boolean }) => {
      const config = loadConfig({ ...process.env, ...(options.port ? { PORT: options.port } : {}) });
      // A long-running server's logged stacks should name source lines, also when it runs from the
      // bundle; a one-off command does not pay for reading source maps at start.
      process.setSourceMapsEnabled(true);
      const { startServer, SHUTDOWN } = await import('./app.ts');
      const server = await startServer(config);
      const lines = [
        `museum: serving ${config.dataDir} at ${server.url} (public URL ${config.publicUrl})`,
        `museum: open   ${server.url}/report (QA report → 3D views) · ${server.url}/docs (API reference)`,
      ];
      lines.push(...startupNotes(config, server).map((note) => `museum: note   ${note}`));
      if (options.devKey) {
        const { key, path } = await developmentKey(server.services.keys, config.stateDb);
        lines.push(
          `museum: development key: ${key} (kept in ${path}, the same on every start)`,
          `museum: try  curl -H 'X-API-Key: ${key}' ${server.url}/v1/rooms`,
        );
      }
      // A ready exhibition to open (registered on the first start, only linked afterwards).
      if (options.devKey) lines.push(await sampleExhibitionLine(server));
      process.stderr.write(`${lines.join('\n')}\n`);
      // SIGTERM/SIGINT: the graceful sequence (startServer's `shutdown`), bounded; a second signal
      // stops at once.
      let stopping = false;
      const stop = (signal: NodeJS.Signals) => {
        if (stopping) process.exit(1);
        stopping = true;
        server.services.log.info({ signal }, 'shutting down: finishing requests in flight');
        setTimeout(() => process.exit(1), SHUTDOWN.drainDelayMs + SHUTDOWN.graceMs + 5_000).unref();
        void server.shutdown().then(
          () => process.exit(0),
          (err: unknown) => {
            server.services.log.error({ err }, 'shutdown failed');
            process.exit(1);
          },
        );
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
}

/** What an operator starting this server should know, a line each. */
function startupNotes(config: Config, server: MuseumServer): string[] {
  const notes: string[] = [];
  const missing = missingServerFlags(process.execArgv);
  if (missing.length > 0) {
    notes.push(
      `node runs without ${missing.join(' ')} (bin/museum passes it: npx museum, make run): a server that idled ` +
        'after start measured ~25 % more CPU per request',
    );
  }
  // An empty DATA_DIR is served (the first bake is picked up when it is published), but a mistyped one should not pass unseen.
  if (server.services.content.snapshot.manifest.bake_id === emptyManifest().bake_id) {
    notes.push(
      `no bake is published in ${config.dataDir} yet: ` +
        `the museum is empty until \`museum bake rooms --out ${config.dataDir}\` publishes one`,
    );
  }
  // The server never builds the viewer bundle (production has no esbuild): say once that the pages answer 503.
  const unbuiltPages = server.services.view.assets.problem();
  if (unbuiltPages) notes.push(unbuiltPages);
  if (!process.env.PUBLIC_URL?.trim() && !isLoopbackHost(config.host)) {
    notes.push(
      `PUBLIC_URL is not set: the URLs handed out name ${config.publicUrl}, which clients on other machines cannot reach (set PUBLIC_URL)`,
    );
  }
  return notes;
}

/**
 * The node flags `museum serve` is meant to run with (bin/museum passes them): V8's
 * memory reducer, on by default, runs full GCs once a process idles after start, and a server that
 * met them before its traffic stayed ~25 % dearer per request (bench/RESULTS.md, "A server that idled first").
 */
export const SERVER_NODE_FLAGS = ['--no-memory-reducer'] as const;

/** Of SERVER_NODE_FLAGS, those this process was not started with. */
export const missingServerFlags = (execArgv: readonly string[]): string[] => SERVER_NODE_FLAGS.filter((flag) => !execArgv.includes(flag));

/** HOST values that only this machine can reach. */
const isLoopbackHost = (host: string): boolean => /^(localhost|127(\.\d{1,3}){3}|::1|\[::1\])$/i.test(host.trim());

/**
 * The development key of `serve --dev-key`: one key kept across restarts in `dev-key` beside
 * STATE_DB (mode 0600), so a client's saved key keeps working; a new one only when that key is
 * missing or no longer valid (revoked, another database).
 */
async function developmentKey(keys: KeyStore, stateDb: string): Promise<{ key: string; path: string }> {
  const path = join(dirname(stateDb === ':memory:' ? resolve('state/museum.db') : stateDb), 'dev-key');
  // Only a regular file of our own is read back: a link planted at `dev-key` is not a saved key.
  const saved = (await lstat(path).catch(() => null))?.isFile() ? (await readFile(path, 'utf8').catch(() => '')).trim() : '';
  const dev = await keys.find('dev');
  if (saved && dev?.status === 'active' && (await keys.verify(saved)) === dev.id) return { key: saved, path };
  const { key } = await keys.replace('dev');
  // A fresh random name created with O_EXCL, mode 0600; the rename replaces whatever `dev-key` was, a link included.
  await writeFileAtomic(path, `${key}\n`, 0o600);
  return { key, path };
}

/**
 * Run `fn` against the configured key store (STATE_DB, or PostgreSQL with DATABASE_URL). A read-only
 * command (`readOnly`) never creates a database: a STATE_DB that does not exist is an error (a typo
 * in the path would otherwise list the keys of a new, empty database).
 */
async function withKeys<T>(fn: (keys: KeyStore) => Promise<T>, { readOnly = false } = {}): Promise<T> {
  const config = loadConfig();
  if (readOnly && !config.databaseUrl && config.stateDb !== ':memory:' && !existsSync(config.stateDb)) {
    throw new Error(`STATE_DB ${config.stateDb} does not exist (no keys yet: \`museum keys create\` makes it)`);
  }
  const { openStateStore } = await import('./state/store.ts');
  const { default: pino } = await import('pino');
  const store = await openStateStore(config, pino({ level: 'warn', base: undefined }, pino.destination(2)));
  try {
    return await fn(store.keys);
  } finally {
    await store.close();
  }
}

const keyLine = (k: ApiKeyInfo) =>
  [String(k.id).padEnd(4), printable(k.name).padEnd(24), `${k.prefix}…`.padEnd(16), k.status.padEnd(8), k.last_used_at ?? 'never'].join(
    ' ',
  );

export function keysCommand(): Command {
  const keys = new Command('keys').description(
    'Manage API keys in STATE_DB, or in PostgreSQL when DATABASE_URL is set (stored as SHA-256 hashes)',
  );
  keys
    .command('create')
    .description('Create a key; it is printed once and cannot be shown again')
    .requiredOption('--name <name>', 'a unique name for the key (who or what uses it)')
    .option('--json', 'print one JSON document')
    .action(async (options: { name: string; json?: boolean }) => {
      const { key, info } = await withKeys((store) => store.create(options.name));
      if (options.json) process.stdout.write(`${JSON.stringify({ key, ...info })}\n`);
      else {
        process.stdout.write(`${key}\n`);
        process.stderr.write(`created key "${info.name}" (id ${info.id}); store it now, it is not shown again\n`);
      }
    });
  keys
    .command('list')
    .description('List keys: id, name, prefix, status, last use')
    .option('--json', 'print one JSON document')
    .action(async (options: { json?: boolean }) => {
      const list = await withKeys((store) => store.list(), { readOnly: true });
      if (options.json) {
        process.stdout.write(`${JSON.stringify(list)}\n`);
        return;
      }
      process.stdout.write(`${['id  ', 'name'.padEnd(24), 'prefix'.padEnd(16), 'status'.padEnd(8), 'last used'].join(' ')}\n`);
      for (const k of list) process.stdout.write(`${keyLine(k)}\n`);
    });
  keys
    .command('revoke')
    .description('Revoke a key by name or id; takes effect on the next request')
    .argument('<nameOrId>', 'key name or numeric id')
    .option('--json', 'print one JSON document')
    .action(async (nameOrId: string, options: { json?: boolean }) => {
      const info = await withKeys((store) => store.revoke(nameOrId));
      if (options.json) process.stdout.write(`${JSON.stringify(info)}\n`);
      else process.stderr.write(`revoked key "${info.name}" (id ${info.id})\n`);
    });
  return keys;
}

/** Largest soul document `museum souls verify` reads (a soul is a few KB). */
const SOUL_DOCUMENT_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Read a soul document from a file or an http(s) URL (a museum URL takes `--key`). Redirects are
 * followed by hand: the key is sent only to the origin the operator named, never to another one.
 */
async function readSoulDocument(source: string, key?: string): Promise<unknown> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    const { BodyTooLarge, guardedGet, NetRefused } = await import('../common/net.ts');
    const failed = (why: string) => new Error(`could not fetch ${source}: ${why}`);
    const cause = (err: unknown) => {
      if (err instanceof BodyTooLarge) return `the response is larger than ${SOUL_DOCUMENT_MAX_BYTES} bytes`;
      if ((err as Error).name === 'TimeoutError') return 'timed out';
      return (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    };
    let response: Response;
    try {
      response = await guardedGet(source, {
        // The operator named this URL: any address, but credentials stay on its origin.
        policy: { allowHosts: [], trustedOrigins: [], anyAddress: true },
        headers: key ? { 'x-api-key': key } : {},
        signal: AbortSignal.timeout(20_000),
        maxBytes: SOUL_DOCUMENT_MAX_BYTES,
      });
    } catch (err) {
      if (err instanceof NetRefused) throw failed(err.message.replace(/^\S+ refused: /, ''));
      throw failed(cause(err));
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw failed(`HTTP ${response.status}`);
    }
    const declared = Number(response.headers.get('content-length') ?? NaN);
    if (declared > SOUL_DOCUMENT_MAX_BYTES) {
      await response.body?.cancel();
      throw failed(`the response is larger than ${SOUL_DOCUMENT_MAX_BYTES} bytes`);
    }
    try {
      text = await response.text();
    } catch (err) {
      throw failed(cause(err));
    }
  } else {
    text = await readFile(source, 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new Error(`could not read ${source}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`);
    });
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${source} is not JSON`);
  }
}

export function soulsCommand(): Command {
  const souls = new Command('souls').description('Soul (signed identity document) tools');
  souls
    .command('verify')
    .description('Check a soul document (a single-soul response or a bare Soul): content hash, signature, message binding')
    .argument('<file|url>', 'a JSON file, or an http(s) URL such as <museum>/v1/souls/{chainId}/{contract}/{tokenId}')
    .option('--key <key>', 'API key sent as X-API-Key when fetching a URL')
    .option('--json', 'print one JSON document')
    .action(async (source: string, options: { key?: string; json?: boolean }) => {
      const { RULE_TITLES, verifySoul } = await import('./souls-verify.ts'); // viem loads only for this command
      const result = await verifySoul(await readSoulDocument(source, options.key));
      if (options.json) {
        process.stdout.write(`${JSON.stringify({ source, ...result })}\n`);
      } else {
        const who = result.tokenId === null ? 'soul' : `soul of token ${printable(result.tokenId)}`;
        const lines = [`${who}: ${result.ok ? 'valid' : 'INVALID'}`];
        for (const check of result.checks)
          lines.push(`  ${check.ok ? 'ok  ' : 'FAIL'}  ${RULE_TITLES[check.rule]} (${printable(check.detail)})`);
        process.stdout.write(`${lines.join('\n')}\n`);
      }
      if (!result.ok) process.exitCode = 1;
    });
  return souls;
}
