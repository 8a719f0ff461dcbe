/**
 * `make client`: regenerate client/schema.d.ts from the OpenAPI document the server code produces.
 * No network: a museum server with an empty bake and a throwaway state store is started in this
 * process on a loopback port, its /v1/openapi.json read, and the server closed. The document does
 * not depend on the bake or on upstreams, only on the route declarations.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { startServer } from '../server/app.ts';
import { loadConfig } from '../server/config.ts';
import { SCHEMA_PATH, schemaSource } from './client-schema.ts';

const tmp = mkdtempSync(join(tmpdir(), 'museum-client-'));
try {
  const env = { PORT: '0', HOST: '127.0.0.1', DATA_DIR: join(tmp, 'data'), STATE_DB: join(tmp, 'state.db'), LOG_LEVEL: 'silent' };
  const config = loadConfig(env);
  const server = await startServer(config, { log: pino({ level: 'silent' }) });
  try {
    const document = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as Record<string, unknown>;
    writeFileSync(SCHEMA_PATH, await schemaSource(document));
    console.log(`wrote ${SCHEMA_PATH} (${Object.keys(document.paths as object).length} paths)`);
  } finally {
    await server.close();
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
