import { isUtf8 } from 'node:buffer';
import type { StoredEntry } from '../entries/stored-entry.js';
import { clientOf, headerValue } from '../entries/stored-entry.js';
import { pairs } from './entry-view.js';

export interface HarOptions {
  /** Replace Authorization, Cookie and Set-Cookie values with "[redacted]". */
  redact?: boolean;
  /** Public URL the entries' targets are resolved against. */
  baseUrl: string;
  version: string;
}

const REDACTED = new Set(['authorization', 'cookie', 'set-cookie', 'proxy-authorization']);

interface HarHeader {
  name: string;
  value: string;
}

/**
 * A piece of a HAR document: JSON text as is, or a body to write as the contents of a JSON string (without
 * its quotes), as UTF-8 text or as base64 — encoded slice by slice when written, never whole.
 */
export type HarPart = string | HarBody;
export interface HarBody {
  bytes: Buffer;
  base64: boolean;
}

function harHeaders(flat: readonly string[], redact: boolean): HarHeader[] {
  return pairs(flat).map(([name, value]) => ({
    name,
    value: redact && REDACTED.has(name.toLowerCase()) ? '[redacted]' : value,
  }));
}

function headersSize(flat: readonly string[]): number {
  let size = 0;
  for (let i = 0; i + 1 < flat.length; i += 2) size += flat[i]!.length + 2 + flat[i + 1]!.length + 2;
  return size;
}

/** Text when the bytes are valid UTF-8, else base64 (HAR's `encoding` field). */
function bodyOf(bytes: Buffer): HarBody {
  return { bytes, base64: !isUtf8(bytes) };
}

/** `{"a":1,"b":2}` without its closing brace, for more members to follow (`value` has at least one). */
function openObject(value: object): string {
  return JSON.stringify(value).slice(0, -1);
}

/** The pieces of one HAR entry, its bodies left as bytes (see HarPart); members in HAR 1.2's names. */
export function harEntryParts(entry: StoredEntry, options: HarOptions): HarPart[] {
  const redact = options.redact === true;
  const url = new URL(entry.target, options.baseUrl);
  const wait = entry.ttfbMs ?? entry.durationMs;
  const parts: HarPart[] = [];
  parts.push(
    `{"startedDateTime":${JSON.stringify(new Date(entry.startedAt).toISOString())},"time":${JSON.stringify(entry.durationMs)},"request":`,
    openObject({
      method: entry.method,
      url: url.href,
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: harHeaders(entry.requestHeaders, redact),
      queryString: [...url.searchParams].map(([name, value]) => ({ name, value })),
      headersSize: headersSize(entry.requestHeaders),
      bodySize: entry.request.size,
    }),
  );
  if (entry.request.size > 0) {
    const body = bodyOf(entry.request.bytes());
    const mimeType = headerValue(entry.requestHeaders, 'content-type') ?? '';
    parts.push(`,"postData":{"mimeType":${JSON.stringify(mimeType)},"text":"`, body);
    parts.push(body.base64 ? '","comment":"base64"}' : '"}');
  }
  parts.push(
    '},"response":',
    openObject({
      status: entry.status,
      statusText: '',
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: harHeaders(entry.responseHeaders, redact),
      redirectURL: headerValue(entry.responseHeaders, 'location') ?? '',
      headersSize: headersSize(entry.responseHeaders),
      bodySize: entry.response.size,
    }),
  );
  const response = bodyOf(entry.response.bytes());
  const mimeType = headerValue(entry.responseHeaders, 'content-type') ?? '';
  parts.push(
    `,"content":{"size":${entry.response.size},"mimeType":${JSON.stringify(mimeType)},"text":"`,
    response,
    response.base64 ? '","encoding":"base64"}},' : '"}},',
  );
  const comment: string[] = [];
  if (entry.request.truncated)
    comment.push(`request body truncated at ${entry.request.captured} bytes of ${entry.request.size}`);
  if (entry.response.truncated)
    comment.push(`response body truncated at ${entry.response.captured} bytes of ${entry.response.size}`);
  if (entry.error) comment.push(`error ${entry.error.code}: ${entry.error.message}`);
  if (entry.replayOf !== undefined) comment.push(`replay of entry ${entry.replayOf}`);
  const client = clientOf(entry);
  const rest = {
    cache: {},
    timings: { send: 0, wait, receive: Math.max(0, entry.durationMs - wait) },
    ...(client === null ? {} : { _clientAddress: client }),
    _id: entry.id,
    ...(comment.length > 0 ? { comment: comment.join('; ') } : {}),
  };
  // `{"cache":...}` without its opening brace: the entry's object is open since its first part.
  parts.push(JSON.stringify(rest).slice(1));
  return parts;
}

/** The HAR document's text before its entries (joined by `,`) and after them. */
export function harPrologue(options: HarOptions): string {
  const creator = JSON.stringify({ name: 'tunnel2', version: options.version });
  return `{"log":{"version":"1.2","creator":${creator},"pages":[],"entries":[\n`;
}
export const HAR_EPILOGUE = '\n]}}\n';

/** Bytes of a body encoded per slice: a multiple of 3, so base64 slices join without padding between. */
export const HAR_BODY_SLICE = 48 * 1024;

/**
 * The text of `body.bytes[start, end)` inside a JSON string, and where the next slice starts: `end` moves
 * back to a UTF-8 character's first byte so a character is never cut in two.
 */
export function encodeSlice(body: HarBody, start: number): { text: string; next: number } {
  const { bytes } = body;
  let end = Math.min(bytes.length, start + HAR_BODY_SLICE);
  if (body.base64) return { text: bytes.toString('base64', start, end), next: end };
  while (end < bytes.length && end > start && (bytes[end]! & 0xc0) === 0x80) end--;
  return { text: JSON.stringify(bytes.toString('utf8', start, end)).slice(1, -1), next: end };
}

/** A HAR 1.2 log of the entries, oldest first, as an object (the API streams the same text: har-stream.ts). */
export function toHar(entries: readonly StoredEntry[], options: HarOptions): Record<string, unknown> {
  let text = harPrologue(options);
  entries.forEach((entry, i) => {
    if (i > 0) text += ',\n';
    for (const part of harEntryParts(entry, options)) {
      if (typeof part === 'string') {
        text += part;
        continue;
      }
      for (let at = 0; at < part.bytes.length; ) {
        const slice = encodeSlice(part, at);
        text += slice.text;
        at = slice.next;
      }
    }
  });
  return JSON.parse(text + HAR_EPILOGUE) as Record<string, unknown>;
}
