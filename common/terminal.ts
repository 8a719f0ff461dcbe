/**
 * Text from content (room titles, URIs, upstream messages) printed for people: control characters
 * would let it drive the terminal (ESC sequences move the cursor, retitle the window, hide lines;
 * bidi overrides reorder what is shown). They are shown as visible escapes instead: C0 and C1
 * controls and DEL as `\xNN`, bidi and direction marks as `\u{NNNN}`. JSON output needs none of this.
 */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}
