/**
 * The HTML of the viewer, docs, and not-found pages. Every text is escaped; data for the page
 * script travels as JSON in a non-executed `<script type="application/json">` with `<` escaped;
 * the pages load only same-origin, content-hashed assets, under a strict CSP (no inline script).
 */
import { escapeHtml as e } from '../../common/html.ts';
import { BASISU_EXTENSION, chooseModel, DRACO_EXTENSION, MESHOPT_EXTENSION, type ViewData } from '../../viewer/page-data.ts';
import type { PageAssets } from './assets.ts';

/**
 * CSP of the 3D pages: own scripts and the Draco decoder's and Basis transcoder's wasm, their blob workers, nothing inline.
 * The meshopt decoder instantiates its inlined wasm on the page's thread: 'wasm-unsafe-eval', no worker.
 * GLTFLoader reads a GLB's embedded images through `blob:` URLs of its own buffers: fetched
 * (ImageBitmapLoader: `connect-src blob:`; without it every textured model renders untextured), or
 * as an <img> where createImageBitmap is missing (Safari: `img-src blob:`).
 */
export const VIEWER_CSP = [
  "default-src 'none'",
  "script-src 'self' 'wasm-unsafe-eval'",
  'worker-src blob:',
  "connect-src 'self' blob:",
  "img-src 'self' blob: data:",
  "style-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** swagger-ui sets element styles and uses data: icons; still no inline or foreign script. */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "style-src 'self' 'unsafe-inline'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The QA report: no script at all, its own inline styles and data: pictures. */
export const REPORT_CSP =
  "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const PAGE_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-cache',
};

/** JSON that is safe inside a `<script>` element (no `</script>`, no comment or CDATA openers). */
const scriptJson = (value: unknown): string =>
  JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');

interface ShellOptions {
  title: string;
  bodyClass: string;
  head?: string[];
  body: string[];
}

const shell = (o: ShellOptions): string =>
  [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${e(o.title)}</title>`,
    '<link rel="icon" href="data:,">',
    ...(o.head ?? []),
    `</head><body class="${o.bodyClass}">`,
    ...o.body,
    '</body></html>',
    '',
  ].join('\n');

/** Hints that let the browser fetch the model, slot data and decoder while the script loads. */
function preloads(assets: PageAssets, data: Extract<ViewData, { kind: 'room' | 'exhibition' }>): string[] {
  const room = data.kind === 'room' ? data.room : data.placements.find((p) => p.room)?.room;
  // The model the page will pick (chooseModel, as the page does), and only the decoder it needs.
  const model = room ? chooseModel(room, data.variant) : null;
  const needs = (extension: string) => model?.extensionsRequired.includes(extension) ?? false;
  const { draco, meshopt, basis } = data.decoders;
  const links = [`<link rel="modulepreload" href="${e(assets.viewer.js)}">`];
  if (needs(MESHOPT_EXTENSION)) links.push(`<link rel="modulepreload" href="${e(meshopt)}">`);
  const fetches = [
    model?.url,
    room?.slotsUrl,
    ...(needs(DRACO_EXTENSION) ? [draco.js, draco.wasm] : []),
    ...(needs(BASISU_EXTENSION) ? [basis.js, basis.wasm] : []),
  ];
  for (const href of fetches) if (href) links.push(`<link rel="preload" href="${e(href)}" as="fetch" crossorigin>`);
  return links;
}

export function viewerPage(assets: PageAssets, data: Extract<ViewData, { kind: 'room' | 'exhibition' }>, heading: string): string {
  const exhibition = data.kind === 'exhibition';
  return shell({
    title: heading,
    bodyClass: 'viewer',
    head: [
      ...(assets.viewer.css ? [`<link rel="stylesheet" href="${e(assets.viewer.css)}">`] : []),
      ...preloads(assets, data),
      `<script type="application/json" id="view-data">${scriptJson(data)}</script>`,
      `<script type="module" src="${e(assets.viewer.js)}"></script>`,
    ],
    body: [
      '<header id="bar">',
      `<h1 id="title">${e(heading)}</h1>`,
      '<span id="status" role="status">Loading…</span>',
      '<span class="spacer"></span>',
      '<button type="button" id="home">Overview</button>',
      '<label><input type="checkbox" id="walk"> Walk</label>',
      ...(exhibition ? ['<button type="button" id="tour">Tour</button>'] : []),
      '<label><input type="checkbox" id="facing"> Facing</label>',
      '<span id="walk-note" hidden></span>',
      '</header>',
      '<div id="warning" role="alert" hidden></div>',
      '<main id="stage"></main>',
      '<aside id="panel">',
      ...(exhibition
        ? [
            '<p id="visitors">Connecting to the presence feed…</p>',
            '<h2 id="room-title">Rooms</h2>',
            '<p><button type="button" id="prev">◀ Previous room</button> <button type="button" id="next">Next room ▶</button></p>',
            '<nav id="rooms" aria-label="Rooms of the exhibition"></nav>',
            '<h2>Hanging</h2><p id="counts"></p>',
            '<div id="not-hung-box" hidden><h2>Not hung (more artworks than slots)</h2><ol id="not-hung"></ol></div>',
          ]
        : []),
      '<h2>Model</h2><p id="model"></p>',
      '<h2>Record</h2><div id="record"></div>',
      '<h2>Legend</h2><ul id="legend"></ul>',
      '<p class="help">Orbit: drag to turn, scroll to zoom, right-drag to pan. Walk: W A S D or arrows (Shift to hurry), drag to look. ' +
        'Click a frame for its record; in walk mode, a click on a frame walks there.</p>',
      '</aside>',
    ],
  });
}

export function docsPage(assets: PageAssets, openapiUrl: string): string {
  const data: ViewData = { kind: 'docs', openapiUrl };
  return shell({
    title: 'Museum Art Data API — reference',
    bodyClass: 'docs',
    head: [
      `<link rel="stylesheet" href="${e(assets.swagger.css)}">`,
      `<script type="application/json" id="view-data">${scriptJson(data)}</script>`,
      `<script src="${e(assets.swagger.js)}" defer></script>`,
      `<script src="${e(assets.docs.js)}" type="module"></script>`,
    ],
    body: ['<div id="swagger-ui"></div>'],
  });
}

/** A page that says one thing clearly: a 404 for an unknown room or exhibition, a 503. */
export function messagePage(assets: PageAssets | null, heading: string, detail: string): string {
  return shell({
    title: heading,
    bodyClass: 'notfound',
    head: assets?.viewer.css ? [`<link rel="stylesheet" href="${e(assets.viewer.css)}">`] : [],
    body: [
      '<main>',
      `<h1>${e(heading)}</h1>`,
      `<p>${e(detail)}</p>`,
      '<p><a href="/report">QA report</a> · <a href="/docs">API reference</a></p>',
      '</main>',
    ],
  });
}
