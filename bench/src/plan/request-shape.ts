import { readFileSync, statSync } from 'node:fs';
import { usageError } from '../errors.js';
import type { SideName } from './report-schema.js';

/** What each request of a run looks like, the same on both sides. */
export interface RequestShape {
  method: string;
  /** One or more paths; each connection cycles through them in order. */
  paths: string[];
  /** Extra request headers, names lower-cased. Host is never among them: it follows the side's URL. */
  headers: Record<string, string>;
  /** The request body (read once from --body-file), or null. */
  body: Buffer | null;
  bodyFile: string | null;
  /** What counts as a good answer: status codes and classes such as `2xx`. */
  expectStatus: string[];
}

/** Where the load goes when the user names it; null fields fall back to the kit's own processes. */
export interface TargetChoice {
  /** --target: the user's service, the direct side, and what the kit's own agent forwards to. */
  targetUrl: string | null;
  /** --tunnel-url: an existing tunnel's public URL; no edge or agent is started. */
  tunnelUrl: string | null;
  sides: SideName[];
  request: RequestShape;
}

export interface TargetFlagValues {
  target?: string;
  'tunnel-url'?: string;
  only?: string;
  method?: string;
  path?: string[];
  header?: string[];
  'body-file'?: string;
  'expect-status'?: string;
}

/** A body is sent again with every request, so it is held in memory: bounded. */
export const MAX_BODY_BYTES = 8 * 2 ** 20;
/** The test backend's path when the kit runs its own. */
const TEST_BACKEND_PATH = '/loadtest/get';
/** Headers the load generator or the URL own; a user value would break framing or routing. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);
/** Header names whose values never reach a report or a log (they end up in CI summaries and artifacts). */
const SECRET_HEADER = /auth|cookie|token|secret|key|session|password|signature/i;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function httpUrl(flag: string, text: string): URL {
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw usageError(`${flag} ${JSON.stringify(text)} is not an http:// or https:// URL`);
  }
  if (url.username !== '' || url.password !== '') {
    throw usageError(`${flag} carries credentials: pass them as --header 'authorization: ...' instead`);
  }
  return url;
}

/** The path and query of a URL, or undefined when it names only the origin. */
function pathOf(url: URL | undefined): string | undefined {
  if (url === undefined) return undefined;
  const path = `${url.pathname}${url.search}`;
  return path === '/' ? undefined : path;
}

/** A status check: `200`, `2xx`, or a comma list of them. */
export function parseExpectStatus(text: string): string[] {
  const items = text.split(',').map((s) => s.trim().toLowerCase());
  for (const item of items) {
    const code = Number(item);
    if (/^[1-5]xx$/.test(item) || (/^\d{3}$/.test(item) && code >= 100 && code <= 599)) continue;
    throw usageError(
      `--expect-status ${JSON.stringify(text)} must be a status (200) or a class (2xx), or a list`,
    );
  }
  return items;
}

/** Whether an answer's status is one the run expects. */
export function statusMatcher(expect: readonly string[]): (status: number) => boolean {
  const codes = new Set(expect.filter((s) => !s.endsWith('xx')).map(Number));
  const classes = new Set(expect.filter((s) => s.endsWith('xx')).map((s) => Number(s[0])));
  return (status) => codes.has(status) || classes.has(Math.floor(status / 100));
}

function parseHeader(text: string): [string, string] {
  const colon = text.indexOf(':');
  const name = colon < 0 ? '' : text.slice(0, colon).trim().toLowerCase();
  if (!TOKEN.test(name)) throw usageError(`--header ${JSON.stringify(text)} is not "name: value"`);
  if (RESERVED_HEADERS.has(name)) {
    throw usageError(`--header ${name} is set by the kit (Host follows the URL of each side)`);
  }
  const value = text.slice(colon + 1).trim();
  if (/[\r\n]/.test(value)) throw usageError(`--header ${name} holds a line break`);
  return [name, value];
}

function readBody(file: string): Buffer {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    throw usageError(`--body-file ${JSON.stringify(file)} cannot be read`);
  }
  if (size > MAX_BODY_BYTES) {
    throw usageError(`--body-file ${JSON.stringify(file)} is ${size} bytes: the limit is ${MAX_BODY_BYTES}`);
  }
  return readFileSync(file);
}

function paths(values: TargetFlagValues, target: URL | undefined, tunnel: URL | undefined): string[] {
  if (values.path !== undefined && values.path.length > 0) {
    // A comma is legal in a path and common in a query (?ids=1,2): only one followed by / separates paths.
    const list = values.path.flatMap((p) => p.split(/,(?=\s*\/)/)).map((p) => p.trim());
    for (const p of list) {
      if (!p.startsWith('/')) throw usageError(`--path ${JSON.stringify(p)} must start with /`);
    }
    const inUrl = pathOf(target) ?? pathOf(tunnel);
    if (inUrl !== undefined) {
      throw usageError(`--path and a path in the URL (${inUrl}) both set the path: give one`);
    }
    return list;
  }
  const fromTarget = pathOf(target);
  const fromTunnel = pathOf(tunnel);
  if (fromTarget !== undefined && fromTunnel !== undefined && fromTarget !== fromTunnel) {
    throw usageError(
      `--target asks for ${fromTarget} and --tunnel-url for ${fromTunnel}: the path must match`,
    );
  }
  return [
    fromTarget ?? fromTunnel ?? (target === undefined && tunnel === undefined ? TEST_BACKEND_PATH : '/'),
  ];
}

/** Validates the target and request-shape flags; every mistake is a usage error naming its flag. */
export function parseTargetFlags(values: TargetFlagValues, resolveFile: (f: string) => string): TargetChoice {
  const target = values.target === undefined ? undefined : httpUrl('--target', values.target);
  const tunnel =
    values['tunnel-url'] === undefined ? undefined : httpUrl('--tunnel-url', values['tunnel-url']);

  let sides: SideName[] = target === undefined && tunnel !== undefined ? ['tunnel'] : ['direct', 'tunnel'];
  if (values.only !== undefined) {
    if (values.only !== 'direct' && values.only !== 'tunnel') {
      throw usageError(`--only ${JSON.stringify(values.only)} must be direct or tunnel`);
    }
    if (values.only === 'direct' && target === undefined && tunnel !== undefined) {
      throw usageError('--only direct measures --target: --tunnel-url alone has no direct side');
    }
    sides = [values.only];
  }

  const method = (values.method ?? 'GET').toUpperCase();
  if (!/^[A-Z]+$/.test(method))
    throw usageError(`--method ${JSON.stringify(values.method)} is not an HTTP method`);
  const headers: Record<string, string> = {};
  for (const text of values.header ?? []) {
    const [name, value] = parseHeader(text);
    headers[name] = value;
  }
  const bodyFile = values['body-file'] === undefined ? null : resolveFile(values['body-file']);
  return {
    targetUrl: target?.href ?? null,
    tunnelUrl: tunnel?.href ?? null,
    sides,
    request: {
      method,
      paths: paths(values, target, tunnel),
      headers,
      body: bodyFile === null ? null : readBody(bodyFile),
      bodyFile,
      expectStatus: parseExpectStatus(values['expect-status'] ?? '2xx'),
    },
  };
}

/** Header values as a report may show them: secrets replaced. */
export function redactHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name, SECRET_HEADER.test(name) ? '<redacted>' : value]),
  );
}

/** The command line with secret --header values replaced, for reports that end up in CI summaries. */
export function redactArgv(argv: readonly string[]): string[] {
  const out = [...argv];
  for (let i = 0; i < out.length; i++) {
    const arg = out[i]!;
    const inline = arg.startsWith('--header=');
    const text = inline ? arg.slice('--header='.length) : arg === '--header' ? out[i + 1] : undefined;
    if (text === undefined) continue;
    const colon = text.indexOf(':');
    if (colon < 0 || !SECRET_HEADER.test(text.slice(0, colon))) continue;
    const redacted = `${text.slice(0, colon)}: <redacted>`;
    if (inline) out[i] = `--header=${redacted}`;
    else out[i + 1] = redacted;
  }
  return out;
}
