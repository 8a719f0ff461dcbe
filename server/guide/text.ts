/** Text helpers shared by the guide: cleaning, clamping, matching keys, hashing. */
import { createHash } from 'node:crypto';

/** Control characters and bidi overrides: never useful in names or answers, sometimes hostile. */
export const CONTROL_CHARS = /[\p{Cc}\u202A-\u202E\u2066-\u2069]/u;
const CONTROL_CHARS_G = /[\p{Cc}\u202A-\u202E\u2066-\u2069]/gu;
/** The start of an HTML/XML tag, comment or declaration (a lone `<3` is not markup). */
export const MARKUP = /<\s*[a-zA-Z!/?]/;
/**
 * Invisible characters that make identical-looking names differ or hide text: zero-width space and
 * non-joiner, direction marks, word joiner and invisible operators, BOM, soft hyphen, Mongolian
 * vowel separator. A zero-width joiner is kept only between two emoji (it joins them into one).
 */
const INVISIBLE_G = new RegExp(
  [
    String.raw`[\u00AD\u180E\u200B\u200C\u200E\u200F\u2060-\u2064\uFEFF]`,
    String.raw`(?<!\p{Extended_Pictographic}[\u{FE0F}\u{1F3FB}-\u{1F3FF}]?)\u200D`,
    String.raw`\u200D(?!\p{Extended_Pictographic})`,
  ].join('|'),
  'gu',
);
/** Tags, comments and declarations (`<b>`, `</a>`, `<!-- -->`, `<img src=x>`). */
const TAGS_G = /<\s*[a-zA-Z!/?][^>]*>?/g;

/** Control characters, bidi overrides and invisible characters removed (nothing put in their place). */
export const withoutInvisibles = (text: string): string => text.replace(CONTROL_CHARS_G, '').replace(INVISIBLE_G, '');

/** At most `max` code points (never half a surrogate pair), with an ellipsis when cut. */
export function clamp(text: string, max: number): string {
  if (text.length <= max) return text;
  const points = Array.from(text);
  if (points.length <= max) return text;
  return `${points
    .slice(0, max - 1)
    .join('')
    .trimEnd()}…`;
}

/** Visitor or upstream text made safe to store and show: no control or invisible characters, single spaces, clamped. */
export function cleanText(text: string, max: number): string {
  return clamp(text.replace(CONTROL_CHARS_G, ' ').replace(INVISIBLE_G, '').replace(/\s+/g, ' ').trim(), max);
}

/** A name shown to visitors (a character's, a persona's): `cleanText` without markup — tags and stray angle brackets removed. */
export function cleanName(text: string, max: number): string {
  return cleanText(text.replace(TAGS_G, ' ').replace(/[<>]/g, ''), max);
}

/** Lower-case, accent-free words joined by single spaces: the key names are matched on. */
export function matchKey(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

/** `a`, `a and b`, `a, b and c`. */
export function listing(items: string[]): string {
  if (items.length <= 1) return items[0] ?? '';
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

export const sha256Hex = (text: string): string => createHash('sha256').update(text).digest('hex');
