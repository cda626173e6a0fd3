import { isUtf8 } from 'node:buffer';
import { withoutHopByHop } from '@tunnel2/protocol';
import type { StoredEntry } from '../entries/stored-entry.js';

/** Fields the edge adds to every request: sent again they would only be replaced (or refused). */
const EDGE_ADDED = new Set([
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-prefix',
  'forwarded',
  'x-real-ip',
  'x-request-id',
]);
/** Fields curl adds on its own unless the command names them (an empty value removes them). */
const CURL_DEFAULTS = ['user-agent', 'accept', 'expect'];

export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}

/** True when the bytes survive as a shell string: valid UTF-8 without NUL. */
function isShellText(bytes: Buffer): boolean {
  return !bytes.includes(0) && isUtf8(bytes);
}

export interface CurlOptions {
  /** Origin (and base path) the request target is appended to. */
  baseUrl: string;
  /** Keep the edge's X-Forwarded-* fields (a request to the local target that looks like what it received). */
  keepForwarded?: boolean;
}

/**
 * A curl command that sends the captured request again: method, target (byte for byte: no path squashing,
 * no globbing), the headers in their order with repeats, and the body exactly (base64-decoded through a pipe
 * when it is not text). Only Host comes first whatever its place was: curl always writes it there.
 */
export function toCurl(entry: StoredEntry, options: CurlOptions): string {
  const base = options.baseUrl.replace(/\/$/, '');
  const args: string[] = ['curl', '--http1.1', '--path-as-is', '--globoff'];
  if (entry.method === 'HEAD') args.push('--head');
  else args.push('-X', shellQuote(entry.method));
  args.push(shellQuote(base + entry.target));
  const present = new Set<string>();
  for (let i = 0; i + 1 < entry.requestHeaders.length; i += 2) {
    present.add(entry.requestHeaders[i]!.toLowerCase());
  }
  // Hop-by-hop fields (with those Connection names) are not sent again; Host comes from the URL, first.
  const headers = withoutHopByHop([...entry.requestHeaders]);
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i]!;
    const lower = name.toLowerCase();
    if (lower === 'host' || (!options.keepForwarded && EDGE_ADDED.has(lower))) continue;
    // `Name;` is curl's spelling of a field with an empty value (`Name:` would remove it).
    const value = headers[i + 1]!;
    args.push('-H', shellQuote(value === '' ? `${name};` : `${name}: ${value}`));
  }
  for (const name of CURL_DEFAULTS) if (!present.has(name)) args.push('-H', shellQuote(`${name}:`));
  const body = entry.request.bytes();
  let prefix = '';
  if (entry.request.size > 0) {
    if (!present.has('content-type')) args.push('-H', shellQuote('content-type:'));
    if (isShellText(body)) args.push('--data-raw', shellQuote(body.toString('utf8')));
    else {
      prefix = `printf %s ${shellQuote(body.toString('base64'))} | base64 -d | `;
      args.push('--data-binary', '@-');
    }
  }
  const note = entry.request.truncated
    ? `# the body was truncated at ${entry.request.captured} bytes of ${entry.request.size}: this sends the captured part\n`
    : '';
  return `${note}${prefix}${args.join(' ')}\n`;
}
