/**
 * The guide: answers a visitor's question about an exhibition, in persona.
 *
 * Modes (spec GuideAnswer):
 *  - Library configured and the question is not about the exhibition itself → a brief holding
 *    line (`consulting: true`, mode `fast`); the Library is asked in the background and the
 *    real answer (voiced in persona by the LLM when there is one) waits in the session for
 *    GET /v1/guide/followup.
 *  - LLM configured → the model answers in persona from the exhibition context (mode `fast`).
 *  - Neither, or a failing upstream → an answer built from the exhibition context alone
 *    (`fallback: true`, no mode): the matching artwork, room, artist or architect, else a
 *    summary of the exhibition.
 * A question never produces a 5xx: whatever fails after the exhibition is found ends in the
 * context-only answer.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { CharactersClient } from '../upstream/characters.ts';
import type { LibraryClient } from '../upstream/library.ts';
import type { ChatMessage, LlmClient } from '../upstream/llm.ts';
import type { ExhibitionStore } from '../state/exhibitions.ts';
import type { GuideContext } from './exhibitions.ts';
import type { Followup, GuideSessionStore, Turn } from './sessions.ts';
import type { SpeechClips } from './speech.ts';
import { describeForPrompt, suggest } from './suggestions.ts';
import { clamp, cleanName, cleanText, listing, matchKey } from './text.ts';

export const QUESTION_CHARS = 1_000;
const ANSWER_CHARS = 1_500;
const HISTORY_TURNS = 8;
const MAX_CONSULTS = 64;

export interface Persona {
  name: string;
  kind: 'guide' | 'character' | 'soul';
  /** How to speak, for the model. */
  brief: string;
}

const DEFAULT_PERSONA: Persona = {
  name: 'Museum Guide',
  kind: 'guide',
  brief: "The museum's own guide: warm, precise and brief, glad to point visitors to what is worth seeing.",
};

export interface AskInput {
  exhibition: string;
  question: string;
  session?: string;
  roomUid?: string;
  focus?: { title?: string | null; artist?: string | null };
  persona?: { character?: number; soul?: string };
  history?: Turn[];
  speak?: boolean;
}

export interface GuideAnswer {
  answer: string;
  persona: string;
  suggestions: string[];
  sources: string[];
  fallback: boolean;
  mode?: 'fast' | 'cortex';
  consulting: boolean;
  audioUrl?: string;
  audioUrls?: string[];
  session: string;
}

export interface GuideDeps {
  store: ExhibitionStore;
  sessions: GuideSessionStore;
  llm: LlmClient | null;
  library: LibraryClient | null;
  characters: CharactersClient | null;
  speech: SpeechClips | null;
  log: Logger;
}

// ---------------------------------------------------------------------------------------------
// What the question is about

interface Match {
  kind: 'artwork' | 'artist' | 'room' | 'architect' | 'none';
  /** Indices into context.artworks. */
  artworks: number[];
  /** Placement uids. */
  rooms: string[];
  name?: string;
  /** A focus the visitor gave that the exhibition does not list. */
  outside?: { title: string; artist: string | null };
}

interface MatchIndex {
  artworks: Array<[string, number]>;
  artists: Array<[string, string]>;
  rooms: Array<[string, string]>;
  architects: Array<[string, string]>;
}

const indexes = new WeakMap<GuideContext, MatchIndex>();

/** Match keys of every name in the context, longest first (built once per stored context). */
function indexOf(context: GuideContext): MatchIndex {
  let index = indexes.get(context);
  if (!index) {
    const byLength = <T>(list: Array<[string, T]>) => list.filter(([k]) => k.length >= 3).sort((a, b) => b[0].length - a[0].length);
    index = {
      artworks: byLength(context.artworks.map((a, i) => [matchKey(a.title), i])),
      artists: byLength(context.artists.map((a) => [matchKey(a), a])),
      rooms: byLength(context.rooms.map((r) => [matchKey(r.title), r.uid])),
      architects: byLength(context.architects.map((a) => [matchKey(a), a])),
    };
    indexes.set(context, index);
  }
  return index;
}

function findMatch(context: GuideContext, question: string, roomUid?: string, focus?: AskInput['focus']): Match {
  const q = ` ${matchKey(question)} `;
  const index = indexOf(context);
  const mentioned = <T>(list: Array<[string, T]>): T | undefined => list.find(([key]) => q.includes(` ${key} `))?.[1];
  const artwork = mentioned(index.artworks);
  if (artwork !== undefined) return { kind: 'artwork', artworks: [artwork], rooms: [context.artworks[artwork]!.roomUid] };
  if (focus?.title) {
    const title = matchKey(focus.title);
    const artist = focus.artist ? matchKey(focus.artist) : null;
    const i = context.artworks.findIndex((a) => matchKey(a.title) === title && (!artist || !a.artist || matchKey(a.artist) === artist));
    if (i >= 0) return { kind: 'artwork', artworks: [i], rooms: [context.artworks[i]!.roomUid] };
    return {
      kind: 'artwork',
      artworks: [],
      rooms: [],
      outside: { title: cleanText(focus.title, 160), artist: focus.artist ? cleanText(focus.artist, 120) : null },
    };
  }
  const artist = mentioned(index.artists);
  if (artist !== undefined) {
    const works = context.artworks.flatMap((a, i) => (a.artist === artist ? [i] : []));
    return { kind: 'artist', artworks: works, rooms: [...new Set(works.map((i) => context.artworks[i]!.roomUid))], name: artist };
  }
  const room =
    mentioned(index.rooms) ??
    (roomUid && context.rooms.some((r) => r.uid === roomUid) && /\b(room|here|this|space)\b/.test(q) ? roomUid : undefined);
  if (room !== undefined)
    return { kind: 'room', artworks: context.artworks.flatMap((a, i) => (a.roomUid === room ? [i] : [])), rooms: [room] };
  const architect = mentioned(index.architects);
  if (architect !== undefined) {
    return {
      kind: 'architect',
      artworks: [],
      rooms: context.rooms.filter((r) => r.architect === architect).map((r) => r.uid),
      name: architect,
    };
  }
  return { kind: 'none', artworks: [], rooms: roomUid && context.rooms.some((r) => r.uid === roomUid) ? [roomUid] : [] };
}

const VISIT_WORDS = 'exhibition|exhibit|show|room|rooms|gallery|here|this|these|that|artworks?|works?|pieces?|paintings?';
const ABOUT_THE_VISIT = new RegExp(`\\b(${VISIT_WORDS}|museum|visit|start|begin|see|look)\\b`);

/** Library-routed: nothing in the exhibition matches and the question is a real question, not about the visit. */
function routesToLibrary(question: string, match: Match): boolean {
  if (match.kind !== 'none') return false;
  const key = matchKey(question);
  return key.split(' ').length >= 3 && !ABOUT_THE_VISIT.test(key);
}

// ---------------------------------------------------------------------------------------------
// Answers from the context alone

const quoted = (titles: string[], max = 4) =>
  listing(titles.slice(0, max).map((t) => `"${t}"`)) + (titles.length > max ? ` and ${titles.length - max} more` : '');
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
/** What a follow-up says first when the Library could not answer it. */
const LIBRARY_UNREACHABLE = 'The Library could not be reached just now, so here is what the exhibition itself tells me.';

function contextAnswer(context: GuideContext, match: Match): string {
  const roomOf = (uid: string) => context.rooms.find((r) => r.uid === uid);
  const parts: string[] = [];
  if (match.kind === 'artwork' && match.artworks.length) {
    const a = context.artworks[match.artworks[0]!]!;
    const room = roomOf(a.roomUid);
    const byWhom = a.artist ? ` is by ${a.artist}` : ' is part of this exhibition';
    parts.push(`"${a.title}"${byWhom}${a.collection ? `, from the ${a.collection} collection` : ''}.`);
    if (room) parts.push(`You will find it in ${room.title}${room.architect ? `, a room designed by ${room.architect}` : ''}.`);
    if (a.description) parts.push(a.description);
    const more = a.artist ? context.artworks.filter((w) => w.artist === a.artist && w !== a).map((w) => w.title) : [];
    if (more.length) parts.push(`${a.artist} also shows ${quoted(more, 3)} here.`);
  } else if (match.kind === 'artwork' && match.outside) {
    const { title, artist } = match.outside;
    parts.push(`"${title}"${artist ? ` by ${artist}` : ''} is not among the works I know in ${context.name}.`);
    parts.push(summary(context));
  } else if (match.kind === 'artist' && match.name) {
    const titles = match.artworks.map((i) => context.artworks[i]!.title);
    parts.push(`${match.name} has ${plural(titles.length, 'work')} in ${context.name}: ${quoted(titles)}.`);
    const rooms = match.rooms.map((uid) => roomOf(uid)?.title).filter((t): t is string => !!t);
    if (rooms.length) parts.push(`You will find ${titles.length === 1 ? 'it' : 'them'} in ${listing(rooms.slice(0, 4))}.`);
  } else if (match.kind === 'room' && match.rooms.length) {
    const room = roomOf(match.rooms[0]!)!;
    const byWhom = room.architect ? ` was designed by ${room.architect}` : ' is one of the rooms of this exhibition';
    parts.push(`${room.title}${byWhom}${room.series ? `, part of the ${room.series} series` : ''}.`);
    if (room.description) parts.push(room.description);
    const works = match.artworks.map((i) => context.artworks[i]!);
    const artists = [...new Set(works.map((w) => w.artist).filter((a): a is string => !!a))];
    const byArtists = artists.length ? ` by ${listing(artists.slice(0, 3))}${artists.length > 3 ? ' and others' : ''}` : '';
    if (works.length)
      parts.push(
        `It shows ${plural(works.length, 'work')}${byArtists}, among them ${quoted(
          works.map((w) => w.title),
          2,
        )}.`,
      );
  } else if (match.kind === 'architect' && match.name) {
    const rooms = match.rooms.map((uid) => roomOf(uid)!);
    parts.push(`${match.name} designed ${listing(rooms.map((r) => r.title).slice(0, 4))} in this exhibition.`);
    if (rooms[0]?.description) parts.push(rooms[0].description);
  } else {
    parts.push(summary(context));
  }
  return clamp(parts.join(' '), ANSWER_CHARS);
}

function summary(context: GuideContext): string {
  const parts = [
    `${context.name} brings together ${plural(context.artworks.length, 'work')} by ${plural(context.artists.length, 'artist')}` +
      ` across ${plural(context.rooms.length, 'room')}.`,
  ];
  if (context.rooms.length) {
    const rooms = context.rooms.slice(0, 4).map((r) => (r.architect ? `${r.title} (designed by ${r.architect})` : r.title));
    parts.push(`The rooms: ${listing(rooms)}${context.rooms.length > 4 ? ' and more' : ''}.`);
  }
  if (context.artists.length) parts.push(`Artists include ${listing(context.artists.slice(0, 4))}.`);
  parts.push('Ask me about any work, artist or room.');
  return parts.join(' ');
}

// ---------------------------------------------------------------------------------------------
// Personas

/** The display name of a character record (`name` is a list whose first element is the name). */
function characterName(record: Record<string, unknown>): string | null {
  const name = Array.isArray(record.name) ? record.name[0] : record.name;
  const cleaned = typeof name === 'string' ? cleanName(name, 80) : '';
  return cleaned === '' ? null : cleaned;
}

function characterPersona(record: Record<string, unknown>, name: string): Persona {
  const field = (k: string) => {
    const v = record[k];
    const s = Array.isArray(v) ? v.filter((x) => typeof x === 'string').join(' ') : typeof v === 'string' ? v : '';
    return s ? cleanText(s, 500) : '';
  };
  const lines = [
    `${name} is a character of the museum's knowledge base.`,
    field('description'),
    field('characterization') && `Character: ${field('characterization')}`,
    field('biography') && `Biography: ${field('biography')}`,
    field('writing_flavor') && `Voice: ${field('writing_flavor')}`,
  ].filter(Boolean);
  return { name, kind: 'character', brief: clamp(lines.join('\n'), 2_000) };
}

/** A supplied soul document: its first `# Heading` (or `name:` line) names the persona. */
function soulPersona(soul: string): Persona {
  const heading = /^\s*#{1,3}\s+(.+)$/m.exec(soul)?.[1] ?? /^\s*name\s*:\s*(.+)$/im.exec(soul)?.[1];
  const name = heading ? cleanName(heading.replace(/[#*_`]/g, ''), 80) : '';
  return {
    name: name || 'Soul',
    kind: 'soul',
    brief: `Speak as the identity described in this document:\n${clamp(
      soul.replace(/[\p{Cc}]/gu, (c) => (c === '\n' ? c : ' ')),
      4_000,
    )}`,
  };
}

// ---------------------------------------------------------------------------------------------
// The guide

const HOLDING_LINES = [
  'Let me consult the Library on that; I will have an answer for you in a moment.',
  'Good question. I am asking the Library and will be right back with what it says.',
  'One moment: I am looking that up in the Library for you.',
];

export class Guide {
  private consults = 0;
  private readonly abort = new AbortController();
  private readonly background = new Set<Promise<void>>();

  constructor(private readonly deps: GuideDeps) {}

  async ask(input: AskInput, signal?: AbortSignal): Promise<GuideAnswer | null> {
    const found = await this.deps.store.get(input.exhibition);
    if (!found) return null;
    const { context } = found;
    const session = input.session ?? randomBytes(12).toString('base64url');
    const key = `${input.exhibition}\n${session}`;
    const question = cleanText(input.question, QUESTION_CHARS);
    let persona = DEFAULT_PERSONA;
    let match: Match = { kind: 'none', artworks: [], rooms: [] };
    try {
      match = findMatch(context, question, input.roomUid, input.focus);
      persona = await this.persona(input.persona, signal);
      const history = await this.history(key, input.history);
      const speak = this.deps.speech !== null && input.speak !== false;

      let answer: Omit<GuideAnswer, 'session' | 'suggestions' | 'persona'>;
      if (this.deps.library && this.consults < MAX_CONSULTS && routesToLibrary(question, match)) {
        await this.deps.sessions.beginFollowup(key);
        this.track(this.consult(key, context, question, persona, history, match, speak));
        const holding = HOLDING_LINES[(question.length + session.length) % HOLDING_LINES.length]!;
        answer = { answer: holding, sources: [], fallback: false, mode: 'fast', consulting: true };
        await this.deps.sessions.addTurns(key, [{ role: 'user', content: question }]);
      } else {
        const text = (this.deps.llm && (await this.llmAnswer(context, question, persona, history, match, input, signal))) || null;
        answer = text
          ? { answer: text, sources: [], fallback: false, mode: 'fast', consulting: false }
          : { answer: contextAnswer(context, match), sources: [], fallback: true, consulting: false };
        await this.deps.sessions.addTurns(key, [
          { role: 'user', content: question },
          { role: 'assistant', content: answer.answer },
        ]);
      }
      const audio = speak ? this.deps.speech!.prepare(answer.answer) : [];
      return {
        ...answer,
        persona: persona.name,
        suggestions: this.suggestions(context, session, question, match),
        ...(audio.length ? { audioUrl: audio[0], audioUrls: audio } : {}),
        session,
      };
    } catch (err) {
      // Never an error page for a visitor's question: the context still answers.
      this.deps.log.error({ err, exhibition: input.exhibition }, 'guide answer failed; answering from the context');
      return {
        answer: contextAnswer(context, match),
        persona: persona.name,
        suggestions: this.suggestions(context, session, question, match),
        sources: [],
        fallback: true,
        consulting: false,
        session,
      };
    }
  }

  /** The next ready follow-up of a session (delivered once), and whether more are coming. */
  followup(exhibition: string, session: string): Promise<{ followup: Followup | null; pending: boolean }> {
    return this.deps.sessions.takeFollowup(`${exhibition}\n${session}`);
  }

  /** Stop background work (shutdown). */
  async close(): Promise<void> {
    this.abort.abort();
    await Promise.allSettled([...this.background]);
  }

  /** Resolves when no background consultation is running (tests). */
  async idle(): Promise<void> {
    while (this.background.size) await Promise.allSettled([...this.background]);
  }

  private suggestions(context: GuideContext, session: string, question: string, match: Match): string[] {
    const prefer = { artworks: new Set(match.artworks), rooms: new Set(match.rooms) };
    return suggest(context, `${session}\n${question}`, 4, prefer)
      .filter((q) => q !== question)
      .slice(0, 3);
  }

  private track(work: Promise<void>): void {
    this.consults++;
    this.background.add(work);
    void work.finally(() => {
      this.consults--;
      this.background.delete(work);
    });
  }

  private async persona(input: AskInput['persona'], signal?: AbortSignal): Promise<Persona> {
    let persona = DEFAULT_PERSONA;
    if (input?.character !== undefined && this.deps.characters) {
      try {
        const record = await this.deps.characters.get(input.character, [], { signal });
        const name = record && characterName(record);
        if (record && name) persona = characterPersona(record, name);
      } catch {
        // Unreachable knowledge base: the default guide answers (the client sees who answered).
      }
    }
    if (input?.soul?.trim()) {
      const soul = soulPersona(input.soul);
      persona = persona.kind === 'character' ? { ...persona, brief: `${persona.brief}\n${soul.brief}` } : soul;
    }
    return persona;
  }

  private async history(key: string, supplied?: Turn[]): Promise<Turn[]> {
    const stored = await this.deps.sessions.turns(key);
    const turns = stored.length ? stored : (supplied ?? []);
    return turns.slice(-HISTORY_TURNS).map((t) => ({ role: t.role, content: cleanText(t.content, QUESTION_CHARS) }));
  }

  private systemPrompt(context: GuideContext, persona: Persona, match: Match, input?: Pick<AskInput, 'roomUid' | 'focus'>): string {
    const where: string[] = [];
    const room = input?.roomUid && context.rooms.find((r) => r.uid === input.roomUid);
    if (room) where.push(`The visitor is in the room "${room.title}".`);
    const focus = input?.focus;
    if (focus?.title)
      where.push(`The visitor is looking at "${cleanText(focus.title, 160)}"${focus.artist ? ` by ${cleanText(focus.artist, 120)}` : ''}.`);
    return [
      `You are ${persona.name}, guiding a visitor through the museum exhibition "${context.name}". Stay in character.`,
      persona.brief,
      'Answer in at most four short sentences of plain text (no markdown, no lists). ' +
        'Use the facts below; if they do not say, answer briefly and honestly.',
      ...where,
      'Facts:',
      describeForPrompt(context, 4_000, { artworks: match.artworks, rooms: match.rooms }),
    ].join('\n');
  }

  private async llmAnswer(
    context: GuideContext,
    question: string,
    persona: Persona,
    history: Turn[],
    match: Match,
    input: AskInput,
    signal?: AbortSignal,
  ): Promise<string | null> {
    const messages: ChatMessage[] = [
      { role: 'system', content: this.systemPrompt(context, persona, match, input) },
      ...history,
      { role: 'user', content: question },
    ];
    try {
      const text = cleanText(await this.deps.llm!.chat(messages, { signal }), ANSWER_CHARS);
      return text || null;
    } catch {
      return null; // logged by the client; the context answers
    }
  }

  /** Ask the Library in the background; the answer (or a context-only one) becomes the follow-up. */
  private async consult(
    key: string,
    context: GuideContext,
    question: string,
    persona: Persona,
    history: Turn[],
    match: Match,
    speak: boolean,
  ): Promise<void> {
    let followup: Followup;
    try {
      const library = await this.deps.library!.ask(
        { question, top_k: 5, use_graph: true, use_agentic: false, conversation_history: history },
        { signal: this.abort.signal },
      );
      const notes = cleanText(library.answer, 4_000);
      if (!notes) throw new Error('empty Library answer');
      let text = clamp(notes, ANSWER_CHARS);
      if (this.deps.llm) {
        try {
          const voiced = await this.deps.llm.chat(
            [
              { role: 'system', content: `${this.systemPrompt(context, persona, match)}\nLibrary notes for this question:\n${notes}` },
              ...history,
              { role: 'user', content: question },
            ],
            { signal: this.abort.signal },
          );
          text = cleanText(voiced, ANSWER_CHARS) || text;
        } catch {
          // The Library's own words are still the answer.
        }
      }
      const sources = [
        ...new Set(
          library.sources.map((s) => {
            const title = s.metadata.title ?? s.metadata.filename;
            return cleanText(typeof title === 'string' && title ? title : String(s.document_id), 160);
          }),
        ),
      ];
      followup = { text, sources, fallback: false };
    } catch {
      if (this.abort.signal.aborted) return;
      followup = {
        text: clamp(`${LIBRARY_UNREACHABLE} ${contextAnswer(context, match)}`, ANSWER_CHARS),
        sources: [],
        fallback: true,
      };
    }
    try {
      if (speak) {
        const audio = this.deps.speech!.prepare(followup.text);
        if (audio.length) followup.audioUrls = audio;
      }
      await this.deps.sessions.putFollowup(key, followup);
      await this.deps.sessions.addTurns(key, [{ role: 'assistant', content: followup.text }]);
    } catch (err) {
      this.deps.log.error({ err }, 'could not store a guide follow-up');
    }
  }
}
