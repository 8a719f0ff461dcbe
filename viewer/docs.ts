/**
 * The API reference page: swagger-ui-dist (served by this server, no CDN) rendering the
 * generated OpenAPI document. A module of its own because the page's CSP allows no inline script.
 */
import type { ViewData } from './page-data.ts';

declare const SwaggerUIBundle: ((options: Record<string, unknown>) => unknown) | undefined;

const data = JSON.parse(document.getElementById('view-data')?.textContent ?? 'null') as Extract<ViewData, { kind: 'docs' }>;
if (typeof SwaggerUIBundle === 'function') {
  SwaggerUIBundle({
    url: data.openapiUrl,
    dom_id: '#swagger-ui',
    deepLinking: true,
    docExpansion: 'list',
    defaultModelsExpandDepth: 0,
    tryItOutEnabled: false,
    // No badge that would call out to the public validator.
    validatorUrl: null,
  });
}
