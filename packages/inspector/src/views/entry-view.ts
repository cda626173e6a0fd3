import type { Body, Entry, EntrySummary } from '../entries/entry.js';
import {
  clientOf,
  flightKeyOf,
  headerValue,
  type StoredBody,
  type StoredEntry,
  splitTarget,
} from '../entries/stored-entry.js';

export function toSummary(entry: StoredEntry): EntrySummary {
  const { path, query } = splitTarget(entry.target);
  const summary: EntrySummary = {
    id: entry.id,
    startedAt: new Date(entry.startedAt).toISOString(),
    durationMs: entry.durationMs,
    ttfbMs: entry.ttfbMs,
    clientAddress: clientOf(entry),
    method: entry.method,
    path,
    query,
    status: entry.status,
    requestBytes: entry.request.size,
    responseBytes: entry.kind === 'websocket' ? (entry.ws?.bytesOut ?? 0) : entry.response.size,
    kind: entry.kind,
    flightKey: flightKeyOf(entry.flightSeq),
  };
  if (entry.error !== undefined) summary.error = entry.error;
  if (entry.replayOf !== undefined) summary.replayOf = entry.replayOf;
  if (entry.ws !== undefined) summary.ws = entry.ws;
  return summary;
}

export function pairs(flat: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

/** A body's decoded bytes when it has a Content-Encoding that decodes (see StoredBody.decoded). */
export function decodedOf(body: StoredBody, headers: readonly string[]): Buffer | undefined {
  return body.decoded(headerValue(headers, 'content-encoding'));
}

/** The bytes body search looks into: decoded when it decodes, else as captured. */
export function searchedBytes(body: StoredBody, headers: readonly string[]): Buffer {
  return decodedOf(body, headers) ?? body.bytes();
}

function toBody(body: StoredBody, headers: readonly string[]): Body {
  const raw = body.bytes();
  const out: Body = {
    base64: raw.toString('base64'),
    size: body.size,
    captured: body.captured,
    truncated: body.truncated,
    contentType: headerValue(headers, 'content-type') ?? null,
    encoding: headerValue(headers, 'content-encoding') ?? null,
  };
  const decoded = decodedOf(body, headers);
  if (decoded !== undefined) out.decodedBase64 = decoded.toString('base64');
  return out;
}

export function toEntry(entry: StoredEntry): Entry {
  const trailers = entry.responseTrailers ?? [];
  return {
    ...toSummary(entry),
    requestHeaders: pairs(entry.requestHeaders),
    responseHeaders: pairs(entry.responseHeaders),
    ...(trailers.length === 0 ? {} : { responseTrailers: pairs(trailers) }),
    responseStatusText: entry.responseStatusText,
    requestBody: toBody(entry.request, entry.requestHeaders),
    responseBody: toBody(entry.response, entry.responseHeaders),
  };
}
