/**
 * What went wrong, as a string union: the kinds of idmint-client's `ErrorKind` that a
 * JavaScript caller can meet.
 *
 * - `Rejected`: the server refused the request (any 4xx, a 5xx other than 502–504); never
 *   retried. `status`, `code` and `message` are the server's.
 * - `Unavailable`: every attempt failed with a retryable failure (no connection, a timeout,
 *   502, 503, 504); `cause` is the last one.
 * - `Timeout`: one request took longer than `timeoutMs` (only as the `cause` of
 *   `Unavailable`).
 * - `NotMonotonic`: a batch was not in the order the namespace promises, or repeated an ID;
 *   none of its IDs was handed out.
 * - `LayoutMismatch`: the endpoints describe the namespace with different layouts.
 * - `NotJsSafe`: `ids: "number"` was asked for a namespace whose IDs do not fit a JavaScript
 *   number (only `js53` namespaces do).
 * - `BadResponse`: an answer that is not what the API promises.
 * - `Closed`: the client was closed.
 * - `InvalidOptions`: the options are wrong.
 */
export type ErrorKind =
  | "Rejected"
  | "Unavailable"
  | "Timeout"
  | "NotMonotonic"
  | "LayoutMismatch"
  | "NotJsSafe"
  | "BadResponse"
  | "Closed"
  | "InvalidOptions";

/** The one error type of the client. */
export class IdMintError extends Error {
  /** What went wrong. */
  readonly kind: ErrorKind;
  /** The HTTP status, when a server answered. */
  readonly status: number | undefined;
  /** The server's error code (`unauthorized`, `bad_request`, ...), when it sent one. */
  readonly code: string | undefined;
  /** The endpoint that answered or failed, when there was one. */
  readonly endpoint: string | undefined;

  constructor(
    kind: ErrorKind,
    message: string,
    extra: { status?: number; code?: string; endpoint?: string; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = "IdMintError";
    this.kind = kind;
    this.status = extra.status;
    this.code = extra.code;
    this.endpoint = extra.endpoint;
  }
}
