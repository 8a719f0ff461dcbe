/**
 * HTTP errors and the error envelope (spec: `{ errors: [ { message, extensions: { code } } ] }`).
 * Route code throws HttpError; the errors middleware turns anything else into a generic 500.
 */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'RANGE_NOT_SATISFIABLE'
  | 'RATE_LIMITED'
  | 'INTERNAL'
  | 'UPSTREAM'
  | 'UNCONFIGURED'
  | 'BUSY'
  | 'UNAVAILABLE';

const DEFAULT_CODE: Record<number, ErrorCode> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  416: 'RANGE_NOT_SATISFIABLE',
  429: 'RATE_LIMITED',
  500: 'INTERNAL',
  502: 'UPSTREAM',
  503: 'UNCONFIGURED',
};

/** One thing wrong with a request's input: what, and which field (a parameter name or a dotted body path). */
export interface Problem {
  message: string;
  field: string;
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
    /** Input problems (400): each is an error object of its own, with its field. */
    readonly problems: readonly Problem[] = [],
  ) {
    super(message);
  }
}

export const codeForStatus = (status: number): ErrorCode => DEFAULT_CODE[status] ?? (status >= 500 ? 'INTERNAL' : 'BAD_REQUEST');

export const envelope = (message: string, code: ErrorCode) => ({ errors: [{ message, extensions: { code } }] });

/** The envelope of an error: one error object per input problem, or the error's own message. */
export const envelopeOf = (error: HttpError) =>
  error.problems.length === 0
    ? envelope(error.message, error.code)
    : { errors: error.problems.map(({ message, field }) => ({ message, extensions: { code: error.code, field } })) };

export const badRequest = (message: string) => new HttpError(400, 'BAD_REQUEST', message);
export const notFound = (message = 'Not found') => new HttpError(404, 'NOT_FOUND', message);
/** A store the server needs (PostgreSQL) does not answer: 503 UNAVAILABLE, never a 401 or a 500. */
export const unavailable = (what: string) =>
  new HttpError(503, 'UNAVAILABLE', `The ${what} is temporarily unavailable; try again shortly`, { 'Retry-After': '5' });
export const unconfigured = (service: string) => new HttpError(503, 'UNCONFIGURED', `The ${service} is not configured on this deployment`);
