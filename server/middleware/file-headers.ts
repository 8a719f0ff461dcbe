/**
 * Headers of every `/files/…` response, whatever its status (200, 206, 304, 4xx, image variants,
 * preflights): the files route declares them, and its area (paths under /files/ no route matches).
 * The files are public and come from content (models, preview images, the QA report): a browser must
 * never sniff one into HTML nor run script from one on the API's origin. The policy is sandboxed with no sources except what the QA report
 * needs (its inline style and data: pictures); a CSP on a subresource response does not affect its
 * use as a subresource, so GLB and image loads by clients are unchanged.
 */
export const FILES_PATH_PREFIX = '/files/';

export const FILE_RESPONSE_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': "default-src 'none'; img-src data:; style-src 'unsafe-inline'; sandbox",
} as const;
