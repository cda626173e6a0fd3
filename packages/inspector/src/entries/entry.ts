/** The shapes the API answers with (documented in the package README; fields are only ever added). */

export interface EntryError {
  /** The `x-tunnel2-error` code when the agent or edge answered one, else a short stable word. */
  code: string;
  message: string;
}

export interface WebSocketTraffic {
  /** Bytes from the client to the backend. */
  bytesIn: number;
  /** Bytes from the backend to the client. */
  bytesOut: number;
  messagesIn?: number;
  messagesOut?: number;
}

export interface EntrySummary {
  id: string;
  startedAt: string;
  durationMs: number;
  /** Time to the response head, or null when none came. */
  ttfbMs: number | null;
  clientAddress: string | null;
  method: string;
  path: string;
  /** The query string without `?`, '' when none. */
  query: string;
  /** 0 when no response head was sent. */
  status: number;
  requestBytes: number;
  responseBytes: number;
  kind: 'http' | 'websocket';
  /** The `key` its exchange had in `GET /api/inflight` while it ran: the in-flight row this entry ends. */
  flightKey: string;
  error?: EntryError;
  replayOf?: string;
  ws?: WebSocketTraffic;
}

/**
 * An exchange still running: no entry until it ends (its bodies are kept up to the limit meanwhile). Its
 * duration and byte counts are so far; status 0 while no response head came.
 */
export type InFlightExchange = Pick<
  EntrySummary,
  | 'startedAt'
  | 'durationMs'
  | 'method'
  | 'path'
  | 'query'
  | 'status'
  | 'requestBytes'
  | 'responseBytes'
  | 'kind'
  | 'replayOf'
>;

/**
 * What `GET /api/inflight` lists: the exchange so far, with a key that stays the same while it runs (the page
 * keeps its row and selection across polls), is never given to another exchange, and is its entry's
 * `flightKey` once it ends; and the request head as received.
 */
export interface InFlightSummary extends InFlightExchange {
  key: string;
  requestHeaders: [string, string][];
}

export interface Body {
  /** The captured bytes (at most the body limit). */
  base64: string;
  /** Total bytes the body had. */
  size: number;
  /** Bytes kept. */
  captured: number;
  /** True when size > captured ("truncated at captured bytes of size"). */
  truncated: boolean;
  contentType: string | null;
  /** The content-encoding, or null. */
  encoding: string | null;
  /** The decoded bytes, when encoded, captured whole and decodable. */
  decodedBase64?: string;
}

/** The Host of each side of the agent (they differ as --host-header says: rewrite, preserve or a value). */
export interface EntryHosts {
  /** The Host the public client sent (null when it sent none, and for a replay, which had no public client). */
  public: string | null;
  /** The Host your backend received. */
  backend: string | null;
}

export interface Entry extends EntrySummary {
  requestHeaders: [string, string][];
  responseHeaders: [string, string][];
  /** The response's trailers (an HTTP/2 backend's, gRPC's `grpc-status`), when it had any. */
  responseTrailers?: [string, string][];
  /** The reason phrase of the response head ('' when none). */
  responseStatusText: string;
  /** Given by `GET /api/entries/:id` (which knows how the agent forwards). */
  hosts?: EntryHosts;
  requestBody: Body;
  responseBody: Body;
}
