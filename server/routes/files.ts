/**
 * `GET /files/<sha256>.<ext>` (public): the content-addressed artifact files — immutable, strong ETag
 * (the sha256), one `Range`, HEAD, CORS — and image transforms of raster images (`?width=` 16..4096,
 * snapped up to a ladder; `?format=` webp|jpeg|png|avif), made with sharp within bounds per client and in all, and cached
 * content-addressed under DATA_DIR/cache/variants with a bounded total size.
 *
 * Plain files known to the server are answered from memory, others streamed. Only names matching
 * `<sha256>.<ext>` with a known extension resolve, and only inside DATA_DIR/files: nothing else on
 * disk is reachable.
 */
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { FILE_NAME_PATTERN } from '../../artifacts/format.ts';
import type { RouteModule } from '../route-table.ts';
import { planFileResponse, type ArtifactFiles, fileResponse } from '../artifact-files.ts';
import { notFound } from '../errors.ts';
import { VARIANT_FORMATS, VARIANT_WIDTH } from '../image-variants.ts';
import { FILE_RESPONSE_HEADERS, FILES_PATH_PREFIX } from '../middleware/file-headers.ts';
import type { PreparedResponse } from '../types.ts';

/** The response to a plain file request (no transform): from memory when the file is known. */
async function plainFile(files: ArtifactFiles, name: string, req: IncomingMessage): Promise<PreparedResponse> {
  const file = files.cached(name) ?? (await files.byName(name));
  if (!file) throw notFound();
  return fileResponse(files, planFileResponse(file, req.method!, req.headers));
}

const widthParam = z
  .string()
  .regex(/^\d{1,4}$/, `width must be an integer from ${VARIANT_WIDTH.min} to ${VARIANT_WIDTH.max}`)
  .transform(Number)
  .refine((n) => n >= VARIANT_WIDTH.min && n <= VARIANT_WIDTH.max, `width must be from ${VARIANT_WIDTH.min} to ${VARIANT_WIDTH.max}`)
  .optional()
  .meta({
    type: 'integer',
    minimum: VARIANT_WIDTH.min,
    maximum: VARIANT_WIDTH.max,
    description:
      'raster images only: resize to this width, snapped up to 16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072 or 4096 pixels ' +
      '(never enlarged beyond the original); variants not cached yet are made at most 2 at a time per client, 4 in all (more: 503 BUSY)',
  } as Record<string, unknown>);

export const filesRoutes: RouteModule = (api, { files, variants }) => {
  // A path under /files/ that names no file (`/files/`, `/files/a/b`) is sandboxed too.
  api.area(FILES_PATH_PREFIX, FILE_RESPONSE_HEADERS);
  api.route({
    method: 'GET',
    path: '/files/{name}',
    operationId: 'getFile',
    summary: 'A content-addressed artifact file (GLB model, image, JSON), optionally an image variant',
    tag: 'files',
    access: 'public',
    params: z.object({
      name: z.string().regex(FILE_NAME_PATTERN).describe('`<sha256>.<ext>`, as in the URLs the API hands out'),
    }),
    query: z.object({
      width: widthParam,
      format: z.enum(VARIANT_FORMATS).optional().describe('raster images only: re-encode as webp, jpeg, png or avif'),
    }),
    response: {
      binary: '*/*',
      description:
        'The file (Content-Type from its extension; ETag = its sha256; Cache-Control: public, max-age=31536000, immutable; HEAD and a ' +
        'single byte Range supported). ' +
        'GLB and JSON files are sent Content-Encoding br or gzip when Accept-Encoding allows and it saves bytes (precompressed at ' +
        'bake; Vary: Accept-Encoding; ' +
        'ETag `"<sha256>.br"` / `"<sha256>.gz"` per representation); a Range request gets the identity bytes. With width/format: the ' +
        'transformed image, cached.',
      ranges: true,
    },
    errors: [304, 400, 404, 416, 503],
    headers: FILE_RESPONSE_HEADERS,
    async handler(ctx, { params, query }) {
      if (query.width === undefined && query.format === undefined) return plainFile(files, params.name, ctx.req);
      const file = await files.byName(params.name);
      if (!file) throw notFound();
      const target = await variants.variant(params.name, file, query, ctx.get('if-none-match'), ctx.state.clientIp);
      return fileResponse(files, 'status' in target ? target : planFileResponse(target, ctx.method, ctx.headers));
    },
  });
};
