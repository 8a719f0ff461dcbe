/**
 * The viewer's HTML (server/view/pages.ts): hostile text from content (a room title, an exhibition
 * name) is escaped in markup and cannot end the page-data block; scripts are only same-origin files.
 */
import { describe, expect, it } from 'vitest';
import { messagePage, VIEWER_CSP, viewerPage } from '../../../server/view/pages.ts';
import type { PageAssets } from '../../../server/view/assets.ts';

const assets: PageAssets = {
  viewer: { js: '/view/assets/viewer-AAAA.js', css: '/view/assets/viewer-BBBB.css' },
  docs: { js: '/view/assets/docs-CCCC.js' },
  decoders: {
    draco: { js: '/view/assets/draco_wasm_wrapper-1.js', wasm: '/view/assets/draco_decoder-2.wasm' },
    meshopt: '/view/assets/meshopt_decoder-5.js',
    basis: { js: '/view/assets/basis_transcoder-6.js', wasm: '/view/assets/basis_transcoder-7.wasm' },
  },
  swagger: { js: '/view/assets/swagger-ui-bundle-3.js', css: '/view/assets/swagger-ui-4.css' },
};
const hostile = `</script><script>alert(1)</script><!-- "' &amp; \u2028`;

describe('viewer pages', () => {
  it('escape hostile titles and keep them inside the JSON data block', () => {
    const html = viewerPage(
      assets,
      {
        kind: 'room',
        decoders: assets.decoders,
        variant: hostile,
        room: {
          id: 1,
          title: hostile,
          architect: hostile,
          modelUrl: '/files/a.glb',
          modelOptimized: true,
          sourceModelUrl: '/files/b.glb',
          slotsUrl: '/v1/rooms/1/slots',
          navmeshUrl: null,
          spawn: null,
          variants: [],
        },
      },
      `Room 1 — ${hostile}`,
    );
    expect(html).not.toContain('<script>alert(1)');
    expect(html).toContain('&lt;/script&gt;&lt;script&gt;alert(1)');
    // Every script element is either the non-executed data block or a same-origin file.
    const scripts = [...html.matchAll(/<script([^>]*)>/g)].map((m) => m[1]!.trim());
    expect(scripts).toEqual(['type="application/json" id="view-data"', `type="module" src="${assets.viewer.js}"`]);
    // The data block parses back to the exact title.
    const data = /<script type="application\/json" id="view-data">([\s\S]*?)<\/script>/.exec(html)![1]!;
    expect(data).not.toMatch(/[<>]/);
    expect(JSON.parse(data).room.title).toBe(hostile);
    expect(JSON.parse(data).variant).toBe(hostile);
    expect(VIEWER_CSP).toMatch(/script-src 'self' 'wasm-unsafe-eval'/);
    expect(VIEWER_CSP).not.toMatch(/'unsafe-inline'|'unsafe-eval'/);
  });

  it('say what is missing on a message page, escaped', () => {
    const html = messagePage(null, 'Exhibition not found', `No exhibition with id ${hostile} is registered.`);
    expect(html).toContain('<h1>Exhibition not found</h1>');
    expect(html).not.toContain('<script');
  });
});
