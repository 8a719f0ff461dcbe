/**
 * The exhibition guide (public, no key; paths per decisions.md "Guide"):
 *   POST /v1/guide/exhibitions                     register / refresh (6/min per IP)
 *   GET  /v1/guide/exhibitions/{id}                GuideContext
 *   GET  /v1/guide/exhibitions/{id}/suggestions    seeded visitor questions
 *   GET  /v1/guide/exhibitions/{id}/tour           the walking route through its hung artworks
 *   POST /v1/guide/ask                             GuideAnswer (20/min per IP)
 *   GET  /v1/guide/followup                        the real answer after `consulting: true` (40/min per IP)
 *   GET  /v1/guide/tts/{id}.mp3                    a spoken chunk (404 once expired)
 */
import { z } from 'zod';
import { type RouteTable, limitParam, type RouteModule } from '../route-table.ts';
import type { ContentStore } from '../content.ts';
import { notFound } from '../errors.ts';
import { clientGone } from '../response.ts';
import { buildContext, EXHIBITION_ID, ExhibitionDocument, GuideContext, LIMITS } from '../guide/exhibitions.ts';
import { type Guide, QUESTION_CHARS } from '../guide/guide.ts';
import { CLIP_ID, type SpeechClips } from '../guide/speech.ts';
import { type StarterJobs, suggest } from '../guide/suggestions.ts';
import { cleanText } from '../guide/text.ts';
import type { ExhibitionStore } from '../state/exhibitions.ts';
import { PUBLIC_CACHE_CONTROL } from '../snapshot-response.ts';
import { VersionedResponses } from '../versioned-responses.ts';
import type { ContentSnapshot } from '../content.ts';
import { SnapshotResponse } from '../snapshot-response.ts';
import { Tour, tourOf } from '../guide/tour.ts';

const SESSION_ID = /^[\w.:-]{1,64}$/;

const Registration = z
  .object({
    data: z.object({
      id: z.string(),
      name: z.string(),
      counts: z.object({ rooms: z.number().int(), artworks: z.number().int(), artists: z.number().int() }),
      architects: z.array(z.string()),
      artists: z.array(z.string()),
      suggestions: z.array(z.string()).describe('three visitor questions'),
      owner_token: z
        .string()
        .optional()
        .describe('first registration only, shown once: send it as X-Exhibition-Token to change the content later'),
    }),
  })
  .meta({ id: 'ExhibitionRegistration' });

const AskRequest = z
  .object({
    exhibition: z.string().regex(EXHIBITION_ID, 'an exhibition id (1-64 word characters, dots, colons or hyphens)'),
    question: z
      .string()
      .max(QUESTION_CHARS * 4, `question is longer than ${QUESTION_CHARS * 4} characters`)
      .refine((q) => cleanText(q, QUESTION_CHARS) !== '', 'question must not be empty'),
    session: z.string().regex(SESSION_ID, '1-64 word characters, dots, colons or hyphens').optional(),
    roomUid: z.string().max(128).optional().describe('placement uid of the room the visitor is in'),
    focus: z
      .object({ title: z.string().max(1_000).nullable().optional(), artist: z.string().max(1_000).nullable().optional() })
      .optional()
      .describe('the artwork the visitor is looking at'),
    persona: z
      .object({
        character: z.number().int().min(1).max(10_000).optional().describe('answer as this character (knowledge base id)'),
        soul: z.string().max(20_000).optional().describe('answer as the identity this soul document describes'),
      })
      .optional(),
    history: z
      .array(z.object({ role: z.enum(['user', 'assistant']), content: z.string().max(QUESTION_CHARS * 4) }))
      .max(100)
      .optional()
      .describe('earlier turns, used when the session has none'),
    speak: z.boolean().optional().describe('false: no audio for this answer'),
  })
  .meta({ id: 'GuideAskRequest' });

const GuideAnswer = z
  .object({
    answer: z.string(),
    persona: z.string().describe('name of the persona that answered'),
    suggestions: z.array(z.string()),
    sources: z.array(z.string()).describe('Library document titles the answer drew on'),
    fallback: z.boolean().describe('built from the exhibition context alone'),
    mode: z.enum(['fast', 'cortex']).optional().describe('absent on a context-only fallback'),
    consulting: z.boolean().describe('a holding line: the real answer comes from GET /v1/guide/followup'),
    audioUrl: z.string().optional(),
    audioUrls: z.array(z.string()).optional(),
    session: z.string().describe('send it back with the next question and to GET /v1/guide/followup'),
  })
  .meta({ id: 'GuideAnswer' });

const FollowupResponse = z
  .object({
    data: z
      .object({
        text: z.string(),
        sources: z.array(z.string()),
        fallback: z.boolean(),
        audioUrls: z.array(z.string()).optional(),
      })
      .nullable(),
    meta: z.object({ pending: z.boolean().describe('another answer is still being prepared') }),
  })
  .meta({ id: 'GuideFollowup' });

const exhibitionParam = z.object({ id: z.string().regex(EXHIBITION_ID) });

export const guideRoutes: RouteModule = (api, { content, guide: { exhibitions: store, guide, starters, speech } }) => {
  registrationRoute(api, store, content, starters);
  exhibitionReadRoutes(api, store, content);
  tourRoute(api, store, content);
  guideQuestionRoutes(api, guide);
  speechRoutes(api, speech);
};

/** Registering an exhibition (its suggested questions are generated after the answer). */
function registrationRoute(api: RouteTable, store: ExhibitionStore, content: ContentStore, starters: StarterJobs): void {
  api.route({
    method: 'POST',
    path: '/v1/guide/exhibitions',
    operationId: 'registerExhibition',
    summary: 'Register or refresh an exhibition for the guide (museum-exhibition@1)',
    tag: 'guide',
    access: 'public',
    ipLimit: { name: 'guide-register', perMinute: 6 },
    body: ExhibitionDocument,
    bodyMaxDepth: LIMITS.depth,
    response: { json: Registration },
    errors: [409, 413, 429, 503],
    async handler(ctx, { body }) {
      const token = ctx.get('x-exhibition-token').trim() || undefined;
      const result = await store.register(body, token, (times, kept) => buildContext(body, content.snapshot, times, kept), {
        ip: ctx.state.clientIp,
      });
      const { context } = result;
      if (result.outcome !== 'unchanged' || context.starters.length === 0) {
        // Starters are generated once the response has gone out.
        ctx.res.once('close', () => starters.schedule(context.id, result.contentHash));
      }
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { data: registrationData(context, result.ownerToken) };
    },
  });
}

/** An exhibition's guide context and its suggested questions: responses made once per version (VersionedResponses). */
function exhibitionReadRoutes(api: RouteTable, store: ExhibitionStore, content: ContentStore): void {
  const responses = new VersionedResponses({ cacheControl: PUBLIC_CACHE_CONTROL });
  const bake = bakeVersion(content);
  api.route({
    method: 'GET',
    path: '/v1/guide/exhibitions/{id}',
    operationId: 'getExhibition',
    summary: 'The guide context of an exhibition (starters appear shortly after registration)',
    tag: 'guide',
    access: 'public',
    params: exhibitionParam,
    ipLimit: { name: 'guide-read', perMinute: 60 },
    response: { json: z.object({ data: GuideContext }), precompressed: true },
    errors: [404],
    async handler(ctx, { params }) {
      const found = await store.get(params.id);
      if (!found) throw notFound('No exhibition with this id is registered');
      const version = `${bake.version}:${found.context.updatedAt}`;
      return responses.get(`context:${params.id}`, version, () => ({ data: found.context })).responseTo(ctx.req);
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/guide/exhibitions/{id}/suggestions',
    operationId: 'getExhibitionSuggestions',
    summary: 'Visitor question suggestions (the same seed gives the same questions)',
    tag: 'guide',
    access: 'public',
    params: exhibitionParam,
    ipLimit: { name: 'guide-read', perMinute: 60 },
    query: z.object({
      seed: z.string().max(200).optional().describe('any string; the same seed gives the same suggestions for the same context'),
      limit: limitParam(3, 10),
    }),
    response: { json: z.object({ data: z.object({ seed: z.string(), suggestions: z.array(z.string()) }) }), precompressed: true },
    errors: [404],
    async handler(ctx, { params, query }) {
      const found = await store.get(params.id);
      if (!found) throw notFound('No exhibition with this id is registered');
      const seed = query.seed ?? '';
      const version = `${bake.version}:${found.context.updatedAt}`;
      const key = `suggestions:${params.id}:${query.limit}:${seed}`;
      return responses
        .get(key, version, () => ({ data: { seed, suggestions: suggest(found.context, seed, query.limit) } }))
        .responseTo(ctx.req);
    },
  });
}

/** A number that changes with every bake picked up (a cached response of the previous bake is made again). */
function bakeVersion(content: ContentStore): { version: number } {
  const counter = { version: 0 };
  content.onChange(() => {
    counter.version++;
  });
  return counter;
}

/** The registration's response: the exhibition at a glance, and its owner token the first time. */
function registrationData(context: GuideContext, ownerToken: string | undefined): z.infer<typeof Registration>['data'] {
  return {
    id: context.id,
    name: context.name,
    counts: { rooms: context.rooms.length, artworks: context.artworks.length, artists: context.artists.length },
    architects: context.architects,
    artists: context.artists,
    suggestions: suggest(context, 'registration', 3),
    ...(ownerToken ? { owner_token: ownerToken } : {}),
  };
}

/** A visitor's questions and the follow-up answers of a session. */
function guideQuestionRoutes(api: RouteTable, guide: Guide): void {
  api.route({
    method: 'POST',
    path: '/v1/guide/ask',
    operationId: 'askGuide',
    summary: "Ask the guide a visitor's question (answered in persona; never an error page)",
    tag: 'guide',
    access: 'public',
    ipLimit: { name: 'guide-ask', perMinute: 20 },
    body: AskRequest,
    response: { json: z.object({ data: GuideAnswer }) },
    errors: [404],
    async handler(ctx, { body }) {
      // The visitor hanging up cancels upstream work done for this answer.
      const answer = await guide.ask(body, clientGone(ctx.res));
      if (!answer) throw notFound('No exhibition with this id is registered');
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { data: answer };
    },
  });

  api.route({
    method: 'GET',
    path: '/v1/guide/followup',
    operationId: 'getGuideFollowup',
    summary: 'The real answer after a `consulting: true` reply (data null until it is ready)',
    tag: 'guide',
    access: 'public',
    ipLimit: { name: 'guide-followup', perMinute: 40 },
    query: z.object({
      exhibition: z.string().regex(EXHIBITION_ID),
      session: z.string().regex(SESSION_ID),
    }),
    response: { json: FollowupResponse },
    async handler(ctx, { query }) {
      const { followup, pending } = await guide.followup(query.exhibition, query.session);
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { data: followup, meta: { pending } };
    },
  });
}

/** The spoken chunks of answers (none when speech is off). */
function speechRoutes(api: RouteTable, speech: SpeechClips | null): void {
  api.route({
    method: 'GET',
    path: '/v1/guide/tts/{id}.mp3',
    operationId: 'getGuideSpeech',
    summary: 'A spoken chunk of a guide answer (mp3; 404 once expired)',
    tag: 'guide',
    access: 'public',
    params: z.object({ id: z.string().regex(CLIP_ID) }),
    ipLimit: { name: 'guide-speech', perMinute: 60 },
    response: { binary: 'audio/mpeg', description: 'mp3 audio' },
    errors: [404, 502, 503],
    async handler(ctx, { params }) {
      const audio = speech ? await speech.audio(params.id) : null;
      if (!audio) throw notFound('This audio has expired or never existed');
      ctx.set('Cache-Control', 'private, max-age=300');
      ctx.type = 'audio/mpeg';
      ctx.body = audio;
    },
  });
}

/** Tours answered per bake and exhibition content: computed once, then its bytes and strong ETag (304). */
const TOUR_CACHE_ENTRIES = 256;
const tourResponses = new WeakMap<ContentSnapshot, Map<string, Promise<SnapshotResponse>>>();

function tourRoute(api: RouteTable, store: ExhibitionStore, content: ContentStore): void {
  api.route({
    method: 'GET',
    path: '/v1/guide/exhibitions/{id}/tour',
    operationId: 'getExhibitionTour',
    summary: "The walking route through an exhibition's hung artworks, room by room, on each room's navmesh",
    tag: 'guide',
    access: 'public',
    params: exhibitionParam,
    response: { json: z.object({ data: Tour }), precompressed: true },
    errors: [304, 404],
    async handler(ctx, { params }) {
      const found = await store.get(params.id);
      if (!found) throw notFound('No exhibition with this id is registered');
      const snapshot = content.snapshot;
      const responses = tourResponses.get(snapshot) ?? new Map<string, Promise<SnapshotResponse>>();
      tourResponses.set(snapshot, responses);
      const key = `${params.id}\n${found.contentHash}`;
      let response = responses.get(key);
      if (!response) {
        if (responses.size >= TOUR_CACHE_ENTRIES) responses.delete(responses.keys().next().value!);
        response = tourOf(found.context, snapshot, content.dataDir).then((data) =>
          SnapshotResponse.of({ data }, { cacheControl: 'no-cache' }),
        );
        responses.set(key, response);
        response.catch(() => responses.delete(key));
      }
      return (await response).responseTo(ctx.req);
    },
  });
}
