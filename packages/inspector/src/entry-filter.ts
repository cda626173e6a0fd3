import { searchedBytes } from './entry-view.js';
import { InspectorError, InspectorErrorCode } from './errors.js';
import type { StoredEntry } from './stored-entry.js';

export interface EntryFilter {
  method?: string;
  /** `2xx`..`5xx`, or one status such as `404`. */
  status?: string;
  /** Substring of the path and query (case-insensitive). */
  path?: string;
  /** A header name (exact, case-insensitive) and a substring of one of its values, request or response. */
  header?: { name: string; value: string };
  /** Substring of the decoded request or response body (case-insensitive). */
  body?: string;
}

/** The list filters of `GET /api/entries`, from its query string. */
export function parseFilter(params: URLSearchParams): EntryFilter {
  const filter: EntryFilter = {};
  const method = params.get('method');
  if (method) filter.method = method.toUpperCase();
  const status = params.get('status');
  if (status) {
    if (!/^[1-5](xx|\d\d)$/i.test(status)) {
      throw new InspectorError(InspectorErrorCode.BAD_REQUEST, 'status: expected 1xx..5xx or a status code');
    }
    filter.status = status.toLowerCase();
  }
  const path = params.get('path');
  if (path) filter.path = path.toLowerCase();
  const header = params.get('header');
  if (header) {
    const colon = header.indexOf(':');
    const name = (colon < 0 ? header : header.slice(0, colon)).trim().toLowerCase();
    if (name === '') throw new InspectorError(InspectorErrorCode.BAD_REQUEST, 'header: expected name:value');
    filter.header = {
      name,
      value:
        colon < 0
          ? ''
          : header
              .slice(colon + 1)
              .trim()
              .toLowerCase(),
    };
  }
  const body = params.get('body');
  if (body) filter.body = body.toLowerCase();
  return filter;
}

function statusMatches(status: number, wanted: string): boolean {
  if (wanted.endsWith('xx')) return Math.floor(status / 100) === Number(wanted[0]);
  return status === Number(wanted);
}

function headersMatch(headers: readonly string[], name: string, value: string): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() === name && headers[i + 1]!.toLowerCase().includes(value)) return true;
  }
  return false;
}

/** The cheap tests first; body search (which may decompress) last. */
export function matches(entry: StoredEntry, filter: EntryFilter): boolean {
  if (filter.method !== undefined && entry.method.toUpperCase() !== filter.method) return false;
  if (filter.status !== undefined && !statusMatches(entry.status, filter.status)) return false;
  if (filter.path !== undefined && !entry.target.toLowerCase().includes(filter.path)) return false;
  const header = filter.header;
  if (
    header !== undefined &&
    !headersMatch(entry.requestHeaders, header.name, header.value) &&
    !headersMatch(entry.responseHeaders, header.name, header.value)
  ) {
    return false;
  }
  if (filter.body !== undefined) {
    const needle = filter.body;
    const found = (bytes: Buffer): boolean => bytes.toString('utf8').toLowerCase().includes(needle);
    if (
      !found(searchedBytes(entry.request, entry.requestHeaders)) &&
      !found(searchedBytes(entry.response, entry.responseHeaders))
    ) {
      return false;
    }
  }
  return true;
}
