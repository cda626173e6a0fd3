import { isUtf8 } from 'node:buffer';
import { pairs } from './entry-view.js';
import type { StoredEntry } from './stored-entry.js';
import { clientOf, headerValue } from './stored-entry.js';

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
function text(bytes: Buffer): { text: string; encoding?: 'base64' } {
  if (isUtf8(bytes)) return { text: bytes.toString('utf8') };
  return { text: bytes.toString('base64'), encoding: 'base64' };
}

function harEntry(entry: StoredEntry, options: HarOptions): Record<string, unknown> {
  const redact = options.redact === true;
  const url = new URL(entry.target, options.baseUrl);
  const requestBody = entry.request.bytes();
  const responseBody = entry.response.bytes();
  const wait = entry.ttfbMs ?? entry.durationMs;
  const request: Record<string, unknown> = {
    method: entry.method,
    url: url.href,
    httpVersion: 'HTTP/1.1',
    cookies: [],
    headers: harHeaders(entry.requestHeaders, redact),
    queryString: [...url.searchParams].map(([name, value]) => ({ name, value })),
    headersSize: headersSize(entry.requestHeaders),
    bodySize: entry.request.size,
  };
  if (entry.request.size > 0) {
    const body = text(requestBody);
    request.postData = {
      mimeType: headerValue(entry.requestHeaders, 'content-type') ?? '',
      text: body.text,
      ...(body.encoding ? { comment: 'base64' } : {}),
    };
  }
  const comment: string[] = [];
  if (entry.request.truncated)
    comment.push(`request body truncated at ${entry.request.captured} bytes of ${entry.request.size}`);
  if (entry.response.truncated)
    comment.push(`response body truncated at ${entry.response.captured} bytes of ${entry.response.size}`);
  if (entry.error) comment.push(`error ${entry.error.code}: ${entry.error.message}`);
  if (entry.replayOf !== undefined) comment.push(`replay of entry ${entry.replayOf}`);
  return {
    startedDateTime: new Date(entry.startedAt).toISOString(),
    time: entry.durationMs,
    request,
    response: {
      status: entry.status,
      statusText: '',
      httpVersion: 'HTTP/1.1',
      cookies: [],
      headers: harHeaders(entry.responseHeaders, redact),
      content: {
        size: entry.response.size,
        mimeType: headerValue(entry.responseHeaders, 'content-type') ?? '',
        ...text(responseBody),
      },
      redirectURL: headerValue(entry.responseHeaders, 'location') ?? '',
      headersSize: headersSize(entry.responseHeaders),
      bodySize: entry.response.size,
    },
    cache: {},
    timings: { send: 0, wait, receive: Math.max(0, entry.durationMs - wait) },
    ...(clientOf(entry) === null ? {} : { _clientAddress: clientOf(entry) }),
    _id: entry.id,
    ...(comment.length > 0 ? { comment: comment.join('; ') } : {}),
  };
}

/** A HAR 1.2 log of the entries, oldest first. */
export function toHar(entries: readonly StoredEntry[], options: HarOptions): Record<string, unknown> {
  return {
    log: {
      version: '1.2',
      creator: { name: 'tunnel2', version: options.version },
      pages: [],
      entries: entries.map((entry) => harEntry(entry, options)),
    },
  };
}
