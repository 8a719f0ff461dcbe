/** The URL of dist/museum.mjs when it was built from the sources now on disk, else null. */
export function freshBundle(): string | null;
