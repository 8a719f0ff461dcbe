/**
 * Pages outside /v1 (decisions: "Pages and operations"): the 3D viewer (`/view/rooms/{id}`,
 * `/view/exhibitions/{id}`), its assets and artwork textures, the API reference (`/docs`) and the
 * bake's QA report (`/report`). Public and read-only; the viewer reads the same artifacts and
 * public routes as any client. Pages answer HTML, including their 404s.
 */
import { promises as fs } from 'node:fs';
import { filePath } from '../../artifacts/format.ts';
import type { RouteContext, Services } from '../types.ts';
import type { RouteModule, RouteResponse, RouteTable } from '../route-table.ts';
import type { ContentSnapshot } from '../content.ts';
import { HttpError } from '../errors.ts';
import { EXHIBITION_ID, type GuideContext } from '../guide/exhibitions.ts';
import { VARIANT_PARAM_MAX, type ViewArtwork, type ViewPlacement, type ViewRoom } from '../../viewer/page-data.ts';
import { IMMUTABLE_CACHE_CONTROL } from '../http-conditional.ts';
import { ASSET_PREFIX, type ViewerAssets } from './assets.ts';
import { docsPage, DOCS_CSP, messagePage, PAGE_HEADERS, REPORT_CSP, VIEWER_CSP, viewerPage } from './pages.ts';
import { textureSource } from './textures.ts';

const ROOM_ID = /^[1-9]\d{0,15}$/;

/** What the page needs of a room, as same-origin paths (the page never sees PUBLIC_URL). */
function viewRoom(snapshot: ContentSnapshot, id: number): ViewRoom | null {
  const room = snapshot.roomsById.get(id);
  if (!room) return null;
  const path = (ref: { sha256: string; ext: string } | null) => (ref ? `/files/${ref.sha256}.${ref.ext}` : null);
  return {
    id: room.id,
    title: room.title,
    architect: room.architect,
    modelUrl: path(room.model_optimized) ?? path(room.model),
    modelOptimized: room.model_optimized !== null,
    sourceModelUrl: path(room.model),
    slotsUrl: room.slot_data ? `/v1/rooms/${room.id}/slots` : null,
    // A room baked before walkable rooms has none: the page builds its floor from the model.
    navmeshUrl: path(room.navmesh ?? null),
    spawn: room.spawn ?? null,
    variants: (room.model_variants ?? []).map((v) => ({
      name: v.name,
      url: `/files/${v.file.sha256}.${v.file.ext}`,
      bytes: v.file.bytes,
      extensionsRequired: v.extensions_required,
    })),
  };
}

/** The page's `?variant=` (shown back to the reader, so only its first VARIANT_PARAM_MAX characters), or null. */
function askedVariant(ctx: RouteContext): string | null {
  const asked = ctx.query.variant;
  const value = Array.isArray(asked) ? asked[0] : asked;
  return value ? value.slice(0, VARIANT_PARAM_MAX) : null;
}

const textureUrl = (artworkId: number) => `/view/textures/artworks/${artworkId}.webp`;

export const viewRoutes: RouteModule = (api, services) => {
  const { assets } = services.view;
  page(api, '/view/rooms/{id}', 'viewRoomPage', (ctx) => roomPage(ctx, services));
  page(api, '/view/exhibitions/{id}', 'viewExhibitionPage', (ctx) => exhibitionPage(ctx, services));
  page(api, `${ASSET_PREFIX}{name}`, 'viewerAsset', (ctx) => viewerAsset(ctx, services), {
    binary: '*/*',
    description: 'a script, style or decoder of the pages (content-hashed, immutable)',
  });
  page(api, '/view/textures/artworks/{name}', 'artworkTexture', (ctx) => artworkTexture(ctx, services), {
    binary: 'image/webp',
    description: 'a same-origin WebP texture of an artwork image',
  });
  page(api, '/docs', 'docsPage', async (ctx) => {
    html(ctx, 200, docsPage(await assets.urls(), '/v1/openapi.json'), DOCS_CSP);
  });
  page(api, '/report', 'reportPage', (ctx) => reportPage(ctx, services));
};

/** A page or one of its assets: public, GET, outside the OpenAPI document and the index. */
function page(
  api: RouteTable,
  path: string,
  operationId: string,
  handler: (ctx: RouteContext) => Promise<void>,
  response: RouteResponse = { html: 'an HTML page' },
): void {
  api.route({
    method: 'GET',
    path,
    operationId,
    summary: operationId,
    tag: 'pages',
    access: 'public',
    response,
    documented: false,
    handler,
  });
}

function html(ctx: RouteContext, status: number, body: string, csp = VIEWER_CSP): void {
  ctx.status = status;
  ctx.set(PAGE_HEADERS);
  ctx.set('Content-Security-Policy', csp);
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = body;
}

/** A page's 404, as a page (styled when the viewer's assets are at hand). */
async function notFoundPage(ctx: RouteContext, assets: ViewerAssets, what: string, detail: string): Promise<void> {
  html(ctx, 404, messagePage(await assets.urls().catch(() => null), `${what} not found`, detail));
}

/** `/view/rooms/{id}`: the 3D view of one room. */
async function roomPage(ctx: RouteContext, { content, view: { assets } }: Services): Promise<void> {
  const id = ROOM_ID.test(ctx.params.id ?? '') ? Number(ctx.params.id) : NaN;
  const room = Number.isSafeInteger(id) ? viewRoom(content.snapshot, id) : null;
  if (!room) return notFoundPage(ctx, assets, 'Room', `The museum has no room with id ${ctx.params.id}.`);
  const urls = await assets.urls();
  const page = { kind: 'room', decoders: urls.decoders, variant: askedVariant(ctx), room } as const;
  html(ctx, 200, viewerPage(urls, page, `Room ${room.id} — ${room.title}`));
}

/** `/view/exhibitions/{id}`: a registered exhibition's rooms with their artworks, and its visitors' presence. */
async function exhibitionPage(ctx: RouteContext, { content, config, log, state, view: { assets } }: Services): Promise<void> {
  const id = ctx.params.id ?? '';
  let found: Awaited<ReturnType<typeof state.exhibitions.get>> = null;
  try {
    found = EXHIBITION_ID.test(id) ? await state.exhibitions.get(id) : null;
  } catch (err) {
    // The state store is down (PostgreSQL): say so as a page, not as a JSON envelope.
    log.warn({ err }, 'exhibition view: state store unavailable');
    return html(
      ctx,
      503,
      messagePage(
        await assets.urls().catch(() => null),
        'Exhibition unavailable',
        'The exhibition store cannot be reached right now; try again shortly.',
      ),
    );
  }
  if (!found) return notFoundPage(ctx, assets, 'Exhibition', `No exhibition with id ${id} is registered.`);
  const { context } = found;
  const placements = placementsOf(context, content.snapshot, config.dataDir);
  const urls = await assets.urls();
  const page = {
    kind: 'exhibition',
    decoders: urls.decoders,
    variant: askedVariant(ctx),
    id: context.id,
    name: context.name,
    placements,
    presenceUrl: '/v1/presence/stream',
  } as const;
  html(ctx, 200, viewerPage(urls, page, `Exhibition — ${context.name}`));
}

/** The exhibition's rooms as the page shows them, each with the artworks placed in it. */
function placementsOf(context: GuideContext, snapshot: ContentSnapshot, dataDir: string): ViewPlacement[] {
  return context.rooms.map((r) => ({
    uid: r.uid,
    title: r.title,
    room: viewRoom(snapshot, r.id),
    artworks: context.artworks
      .filter((a) => a.roomUid === r.uid)
      .map((a): ViewArtwork => {
        const known = a.id !== null ? snapshot.artworksById.get(a.id) : undefined;
        return {
          id: a.id,
          title: a.title,
          artist: a.artist,
          ratio: known?.ratio ?? 1,
          textureUrl: known && textureSource(snapshot, known, dataDir) ? textureUrl(known.id) : null,
        };
      }),
  }));
}

/** A script, style or decoder of the pages: content-hashed, so immutable; gzip when the client takes it. */
async function viewerAsset(ctx: RouteContext, { view: { assets } }: Services): Promise<void> {
  const asset = await assets.get(ctx.params.name ?? '');
  if (!asset) throw new HttpError(404, 'NOT_FOUND', 'Not found');
  ctx.set({ 'Cache-Control': IMMUTABLE_CACHE_CONTROL, ETag: asset.etag, 'X-Content-Type-Options': 'nosniff', Vary: 'Accept-Encoding' });
  ctx.type = asset.type;
  if (ctx.get('if-none-match') === asset.etag) {
    ctx.status = 304;
    return;
  }
  const gzip = /\bgzip\b/.test(ctx.get('accept-encoding')) ? asset.gzip() : null;
  if (gzip) ctx.set('Content-Encoding', 'gzip');
  ctx.body = gzip ?? asset.body;
}

// Only artwork ids of the published snapshot, and only the media URL it holds for them.
async function artworkTexture(ctx: RouteContext, { content, config, view: { textures } }: Services): Promise<void> {
  const match = /^([1-9]\d{0,15})\.webp$/.exec(ctx.params.name ?? '');
  const artwork = match ? content.snapshot.artworksById.get(Number(match[1])) : undefined;
  const source = artwork ? textureSource(content.snapshot, artwork, config.dataDir) : null;
  if (!source) throw new HttpError(404, 'NOT_FOUND', 'No such artwork, or it has no still image');
  let bytes: Buffer;
  try {
    bytes = await textures.variant(source);
  } catch {
    throw new HttpError(502, 'UPSTREAM', "The artwork's image could not be fetched or decoded");
  }
  ctx.set({ 'Cache-Control': 'public, max-age=86400', 'X-Content-Type-Options': 'nosniff' });
  ctx.type = 'image/webp';
  ctx.body = bytes;
}

// The QA report of the published bake (self-contained HTML; served here rather than from /files,
// whose responses are sandboxed, so its links into the 3D views work).
async function reportPage(ctx: RouteContext, { content, config, view: { assets } }: Services): Promise<void> {
  const report = content.snapshot.manifest.report;
  const body = report ? await fs.readFile(filePath(config.dataDir, report)).catch(() => null) : null;
  if (!body) return notFoundPage(ctx, assets, 'QA report', 'No bake with a QA report has been published yet.');
  html(ctx, 200, body.toString('utf8'), REPORT_CSP);
}
