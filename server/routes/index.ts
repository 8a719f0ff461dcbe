/** Every route group of the API, in registration order. */
import type { RouteModule } from '../route-table.ts';
import { artworkRoutes } from './artworks.ts';
import { collectionRoutes } from './collections.ts';
import { filesRoutes } from './files.ts';
import { roomRoutes } from './rooms.ts';
import { characterRoutes } from './characters.ts';
import { libraryRoutes } from './library.ts';
import { metaRoutes } from './meta.ts';
import { searchRoutes } from './search.ts';
import { soulRoutes } from './souls.ts';
import { presenceRoutes } from './presence.ts';
import { guideRoutes } from './guide.ts';
import { viewRoutes } from '../view/routes.ts';

export const ROUTE_MODULES: RouteModule[] = [
  // Content (baked artifacts)
  collectionRoutes,
  artworkRoutes,
  roomRoutes,
  filesRoutes,
  // Live upstreams
  characterRoutes,
  libraryRoutes,
  soulRoutes,
  searchRoutes,
  // Presence and guide
  presenceRoutes,
  guideRoutes,
  // Pages outside /v1: the 3D viewer, /docs, /report
  viewRoutes,
  metaRoutes, // last: the index lists every route registered before it
];
