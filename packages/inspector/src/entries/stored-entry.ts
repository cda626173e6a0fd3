import type { EntryError, WebSocketTraffic } from './entry.js';

/** A stored body: its first bytes up to the body limit, and how many it had. */
export interface StoredBody {
  /** Total bytes the body had. */
  readonly size: number;
  /** Bytes kept (at most the body limit). */
  readonly captured: number;
  readonly truncated: boolean;
  bytes(): Buffer;
  /**
   * The body decoded from its Content-Encoding (gzip, br, deflate), or undefined: no encoding, another one,
   * a truncated capture (it would not decode), or more than the body limit once decoded.
   */
  decoded(encoding: string | undefined): Buffer | undefined;
}

/** An entry as the store keeps it: headers flat (name, value, ...) as received, bodies as captured. */
export interface StoredEntry {
  id: string;
  /** Wall clock at the start, ms since the epoch. */
  startedAt: number;
  durationMs: number;
  ttfbMs: number | null;
  /** Given by the recorder's caller (a replay); else read from X-Forwarded-For when shown (clientOf). */
  clientAddress: string | null;
  method: string;
  /** Request target as received: path and query. */
  target: string;
  status: number;
  requestHeaders: readonly string[];
  responseHeaders: readonly string[];
  /** The response's trailers (HTTP/2, gRPC's grpc-status), flat; none when absent or empty. */
  responseTrailers?: readonly string[];
  /** The reason phrase the response head carried ('' when none, or no head). */
  readonly responseStatusText: string;
  request: StoredBody;
  response: StoredBody;
  kind: 'http' | 'websocket';
  error?: EntryError;
  replayOf?: string;
  ws?: WebSocketTraffic;
  /** What the entry costs the memory budget (bytes kept plus an estimate of its headers and fields). */
  cost: number;
  /** The number its exchange was listed in flight by while it ran (see flightKeyOf). */
  flightSeq: number;
}

/** The key `GET /api/inflight` lists an exchange by, from its slot's sequence number. */
export function flightKeyOf(seq: number): string {
  return `f${seq}`;
}

/** The first value of a header (case-insensitive name), or undefined. */
export function headerValue(headers: readonly string[], name: string): string | undefined {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.length === name.length && headers[i]!.toLowerCase() === name) return headers[i + 1];
  }
  return undefined;
}

/** Path and query of a request target (query without its `?`). */
export function splitTarget(target: string): { path: string; query: string } {
  const q = target.indexOf('?');
  return q < 0 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

/** The client: the address given at capture, else X-Forwarded-For's first hop (the edge sets it). */
export function clientOf(entry: StoredEntry): string | null {
  if (entry.clientAddress !== null) return entry.clientAddress;
  const xff = headerValue(entry.requestHeaders, 'x-forwarded-for');
  const first = xff?.split(',')[0]?.trim();
  return first === undefined || first === '' ? null : first;
}
