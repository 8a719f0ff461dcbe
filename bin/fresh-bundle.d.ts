/** `{ url }` of dist/museum.mjs when it was built from the sources now on disk, else `{ problem }` (one line). */
export function checkBundle(): { url: string; problem?: undefined } | { url?: undefined; problem: string };
/** The URL of dist/museum.mjs when it was built from the sources now on disk, else null. */
export function freshBundle(): string | null;
