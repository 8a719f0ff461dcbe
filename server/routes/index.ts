/** Every route group of the API, in registration order. */
import type { RouteModule } from '../app.ts';
import { metaRoutes } from './meta.ts';

export const ROUTE_MODULES: RouteModule[] = [
  // Content (baked artifacts)
  // Live upstreams
  // Presence and guide
  metaRoutes, // last: the index lists every route registered before it
];
