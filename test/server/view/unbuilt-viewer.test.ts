/**
 * The server never builds the viewer bundle (esbuild is a devDependency): it serves the copy
 * `make build` wrote to dist/viewer, and while that copy is missing or older than a source the pages
 * answer 503 UNAVAILABLE naming `make build` (and `museum serve` says so once at start), instead of
 * pages without their scripts. Shown on copies of the built dist/viewer (test/global-setup.ts builds it).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HttpError } from '../../../server/errors.ts';
import { ViewerAssets } from '../../../server/view/assets.ts';
import { VIEWER_OUT } from '../../../scripts/viewer-build.mjs';

let dir: string;
const editMeta = (edit: (meta: { built_at: number; inputs: string[] }) => void) => {
  const meta = JSON.parse(readFileSync(join(dir, 'assets.json'), 'utf8'));
  edit(meta);
  writeFileSync(join(dir, 'assets.json'), JSON.stringify(meta));
};
/** What a page request gets: the asset set's entry names, or the error's status, code and message. */
const outcome = async (assets: ViewerAssets) =>
  assets.urls().then(
    (urls) => ({ viewer: urls.viewer.js.startsWith('/view/assets/viewer-') }),
    (err: unknown) => (err instanceof HttpError ? { status: err.status, code: err.code, message: err.message } : { thrown: String(err) }),
  );
const unavailable = (problem: string) => ({
  status: 503,
  code: 'UNAVAILABLE',
  message: `The pages are unavailable: ${problem}; run make build`,
});

beforeEach(() => {
  dir = join(mkdtempSync(join(tmpdir(), 'museum-viewer-')), 'viewer');
  cpSync(VIEWER_OUT, dir, { recursive: true });
});
afterEach(() => rmSync(join(dir, '..'), { recursive: true, force: true }));

describe('the viewer bundle, as the server finds it', () => {
  it('is served from the build while no source changed since', async () => {
    const assets = new ViewerAssets(dir);
    expect(assets.problem()).toBeNull();
    expect(await outcome(assets)).toEqual({ viewer: true });
  });

  it('is a 503 naming make build when it is older than a source', async () => {
    editMeta((meta) => {
      meta.inputs = ['viewer/main.ts'];
      meta.built_at = 0;
    });
    const assets = new ViewerAssets(dir);
    const stale = unavailable('the viewer bundle in dist/viewer is older than viewer/main.ts');
    expect(assets.problem()).toBe(stale.message);
    expect(await outcome(assets)).toEqual(stale);
  });

  it('is a 503 naming make build when it is not built, unreadable, incomplete, or a source is gone', async () => {
    editMeta((meta) => meta.inputs.push('viewer/gone.ts'));
    expect(await outcome(new ViewerAssets(dir))).toEqual(
      unavailable('viewer/gone.ts, a source of the viewer bundle in dist/viewer, is gone'),
    );
    editMeta((meta) => (meta.inputs = meta.inputs.filter((input) => input !== 'viewer/gone.ts')));
    const { entries } = JSON.parse(readFileSync(join(dir, 'assets.json'), 'utf8'));
    rmSync(join(dir, entries.viewer.js));
    expect(await outcome(new ViewerAssets(dir))).toEqual(unavailable('the viewer bundle in dist/viewer is incomplete'));
    writeFileSync(join(dir, 'assets.json'), '{not json');
    expect(await outcome(new ViewerAssets(dir))).toEqual(unavailable('dist/viewer/assets.json is unreadable'));
    rmSync(dir, { recursive: true });
    expect(await outcome(new ViewerAssets(dir))).toEqual(unavailable('the viewer bundle is not built (no dist/viewer/assets.json)'));
  });
});
