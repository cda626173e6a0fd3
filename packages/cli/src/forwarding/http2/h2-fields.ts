import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { ErrorCode, type RawHeaders, withoutHopByHop } from '@tunnel2/protocol';

/**
 * HTTP/2 heads and codes as the agent's HTTP/2 exchange (h2-exchange.ts) translates them to and from the
 * tunnel's (PROTOCOL.md §13): pure functions, no stream in sight.
 */

/** RFC 9113 §8.2.2: connection-specific fields an HTTP/2 request must not carry (node:http2 throws on them). */
const notOnH2 = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
  'te',
  'host',
]);

/**
 * Fields node:http2 sends at most once (its kSingleValueHeaders): a second value makes it throw, where HTTP/1.1
 * clients may well send two. The first goes on, as node:http's own `headers` keeps it; the list-valued among
 * them are joined instead, as RFC 9110 §5.3 combines a repeated list field.
 */
const singleValue = new Set([
  'access-control-allow-credentials',
  'access-control-max-age',
  'access-control-request-method',
  'age',
  'authorization',
  'content-length',
  'content-location',
  'content-md5',
  'content-range',
  'content-type',
  'date',
  'dnt',
  'etag',
  'expires',
  'from',
  'if-modified-since',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'range',
  'referer',
  'retry-after',
  'tk',
  'upgrade-insecure-requests',
  'user-agent',
  'x-content-type-options',
]);
const joinedList = new Set(['content-encoding', 'content-language', 'if-match', 'if-none-match']);

/** Adds one field to a node:http2 header object, repeated names as lists except where node takes one. */
function addField(headers: OutgoingHttpHeaders, name: string, value: string): void {
  const previous = headers[name];
  if (previous === undefined) headers[name] = value;
  else if (singleValue.has(name)) return;
  else if (joinedList.has(name)) headers[name] = `${String(previous)}, ${value}`;
  else if (Array.isArray(previous)) previous.push(value);
  else headers[name] = [String(previous), value];
}

// RST_STREAM codes of RFC 9113 §7 the mapping keeps apart (node:http2's constants, without loading it here).
export const H2_NO_ERROR = 0x0;
export const H2_REFUSED_STREAM = 0x7;
export const H2_CANCEL = 0x8;
/** A response ended by the backend's HEADERS carrying END_STREAM: a trailers-only answer. */
export const FLAG_END_STREAM = 0x1;

/**
 * The tunnel's RESET for a backend's RST_STREAM (PROTOCOL.md "HTTP/2 and gRPC", resets): CANCEL and
 * REFUSED_STREAM keep their meaning (the edge passes them on as the same HTTP/2 codes), anything else is
 * the backend's failure.
 */
export function resetCodeOfRst(rstCode: number): number {
  if (rstCode === H2_CANCEL) return ErrorCode.CANCEL;
  if (rstCode === H2_REFUSED_STREAM) return ErrorCode.REFUSED_STREAM;
  return ErrorCode.BACKEND_ERROR;
}

/**
 * A request head for an HTTP/2 backend: pseudo-header fields from the method, path and the Host the
 * backend is to see (`forwarded` is forwardHeaders' output, Host first), the other fields lower-cased with
 * repeated names as lists, and `te: trailers` for a gRPC call (gRPC servers refuse a call without it).
 */
export function h2RequestHeaders(
  method: string,
  path: string,
  scheme: 'http' | 'https',
  forwarded: readonly string[],
  grpc: boolean,
): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { ':method': method, ':path': path, ':scheme': scheme };
  for (let i = 0; i < forwarded.length; i += 2) {
    const name = forwarded[i]!.toLowerCase();
    const value = forwarded[i + 1]!;
    if (name === 'host') {
      headers[':authority'] ??= value;
      continue;
    }
    if (notOnH2.has(name) || name.startsWith(':')) continue;
    addField(headers, name, value);
  }
  if (grpc) headers.te = 'trailers';
  return headers;
}

/** Raw name/value pairs of a response or trailer block, without pseudo-header and hop-by-hop fields. */
export function responseFields(raw: readonly string[] | undefined, headers: IncomingHttpHeaders): RawHeaders {
  const out: RawHeaders = [];
  if (raw !== undefined) {
    for (let i = 0; i < raw.length; i += 2) {
      if (!raw[i]!.startsWith(':')) out.push(raw[i]!, raw[i + 1]!);
    }
  } else {
    for (const [name, value] of Object.entries(headers)) {
      if (name.startsWith(':') || value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [String(value)]) out.push(name, v);
    }
  }
  return withoutHopByHop(out);
}

/** Trailer fields as node:http2 sends them: lower-cased, without pseudo-header and hop-by-hop fields. */
export function trailerObject(raw: RawHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const fields = withoutHopByHop(raw);
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!.toLowerCase();
    if (name.startsWith(':') || notOnH2.has(name)) continue;
    addField(out, name, fields[i + 1]!);
  }
  return out;
}

/** node:http2's error for a stream the peer reset (the code is the stream's rstCode). */
export function isStreamError(error: Error): boolean {
  return (error as { code?: unknown }).code === 'ERR_HTTP2_STREAM_ERROR';
}
