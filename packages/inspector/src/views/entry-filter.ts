import type { StoredEntry } from '../entries/stored-entry.js';
import { InspectorError, InspectorErrorCode } from '../errors.js';
import { searchedBytes } from './entry-view.js';
import { TimeSlicer } from './time-slicer.js';

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

/** Bytes of a body searched per step: a step stays well under a time slice (see TimeSlicer). */
export const SEARCH_SLICE_BYTES = 64 * 1024;

/**
 * `i` moved back to the first byte of the UTF-8 character it falls in: at most 3 bytes back, as far as a
 * character's start can be. Bytes that are not UTF-8 (a long run of continuation bytes) stop it there; an
 * unbounded walk took every window back to the run's start, and a 1 MiB body of 0x80 bytes cost 178 ms in
 * 12 ms steps (ASCII: 1.2 ms). What decodes as U+FFFD matches no needle a person types anyway.
 */
function charStart(bytes: Buffer, i: number): number {
  let at = i;
  while (at > 0 && at > i - 3 && at < bytes.length && (bytes[at]! & 0xc0) === 0x80) at--;
  return at;
}

/**
 * The byte ranges a search of `bytes` for a needle of `needleLength` characters decodes, in order: windows
 * of SEARCH_SLICE_BYTES, each overlapping the next by as many bytes as a match can take (4 per character),
 * so a match across two windows is found whole in the first.
 */
export function searchWindows(bytes: Buffer, needleLength: number): [from: number, to: number][] {
  const overlap = 4 * needleLength + 4;
  const windows: [number, number][] = [];
  for (let start = 0; start < bytes.length; start += SEARCH_SLICE_BYTES) {
    windows.push([
      charStart(bytes, start),
      charStart(bytes, Math.min(bytes.length, start + SEARCH_SLICE_BYTES + overlap)),
    ]);
  }
  return windows;
}

/**
 * Whether the text of `bytes`, lowercased, contains `needle` (lowercase), read window by window
 * (searchWindows); the slicer may yield between windows.
 */
async function contains(bytes: Buffer, needle: string, slicer: TimeSlicer): Promise<boolean> {
  for (const [from, to] of searchWindows(bytes, needle.length)) {
    await slicer.yield();
    if (bytes.toString('utf8', from, to).toLowerCase().includes(needle)) return true;
  }
  return false;
}

/**
 * The cheap tests first; body search (which may decompress) last, window by window: the slicer yields to
 * the event loop between steps, so one search of a full store never holds it for long.
 */
export async function matches(
  entry: StoredEntry,
  filter: EntryFilter,
  slicer: TimeSlicer = new TimeSlicer(),
): Promise<boolean> {
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
  const needle = filter.body;
  if (needle === undefined) return true;
  if (await contains(searchedBytes(entry.request, entry.requestHeaders), needle, slicer)) return true;
  await slicer.yield();
  return contains(searchedBytes(entry.response, entry.responseHeaders), needle, slicer);
}
