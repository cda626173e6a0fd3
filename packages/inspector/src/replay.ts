import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ExchangeRecorder } from './capture.js';
import type { EntryStore } from './entry-store.js';
import { InspectorError, InspectorErrorCode } from './errors.js';
import type { StoredEntry } from './stored-entry.js';

/** The local target replays go to (not through the tunnel). */
export interface ReplayTarget {
  /** `http://host:port` */
  origin: string;
  /** A path prefix the agent adds to every request target ('' when none). */
  basePath: string;
}

export interface ReplayEdits {
  method?: string;
  path?: string;
  headers?: [string, string][];
  bodyBase64?: string;
}

/** Not sent again: hop-by-hop fields, and the framing, which the replayed body sets anew. */
const DROPPED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'transfer-encoding',
  'content-length',
  'expect',
  'host',
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REPLAY_HEAD_TIMEOUT_MS = 30_000;

/** Validates the edits a client sent (the JSON body of `POST /api/entries/:id/replay`). */
export function parseEdits(value: unknown): ReplayEdits {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw bad('the body must be a JSON object');
  const v = value as Record<string, unknown>;
  const edits: ReplayEdits = {};
  if (v.method !== undefined) {
    if (typeof v.method !== 'string' || !TOKEN.test(v.method)) throw bad('method: an HTTP method token');
    edits.method = v.method;
  }
  if (v.path !== undefined) {
    if (typeof v.path !== 'string' || !/^\/[\x21-\x7e]*$/.test(v.path)) {
      throw bad('path: starts with / and holds visible ASCII only');
    }
    edits.path = v.path;
  }
  if (v.headers !== undefined) {
    const ok =
      Array.isArray(v.headers) &&
      v.headers.every(
        (h: unknown) =>
          Array.isArray(h) &&
          h.length === 2 &&
          typeof h[0] === 'string' &&
          TOKEN.test(h[0]) &&
          typeof h[1] === 'string' &&
          !/[\r\n\0]/.test(h[1]),
      );
    if (!ok) throw bad('headers: [name, value] pairs of a field name and a value without CR, LF or NUL');
    edits.headers = v.headers as [string, string][];
  }
  if (v.bodyBase64 !== undefined) {
    if (typeof v.bodyBase64 !== 'string') throw bad('bodyBase64: a base64 string');
    edits.bodyBase64 = v.bodyBase64;
  }
  return edits;
}

function bad(message: string): InspectorError {
  return new InspectorError(InspectorErrorCode.BAD_REQUEST, message);
}

/**
 * Sends an entry's request (with edits) straight to the local target and records the exchange as a new
 * entry with `replayOf`. Resolves with it once the response ended; the response streams into the capture
 * (kept up to the body limit), never buffered whole.
 */
export function replay(
  original: StoredEntry,
  edits: ReplayEdits,
  target: ReplayTarget,
  store: EntryStore,
  bodyLimit: number,
): Promise<StoredEntry> {
  const method = edits.method ?? original.method;
  const path = edits.path ?? original.target;
  const source = edits.headers?.flat() ?? (original.requestHeaders as string[]);
  const body =
    edits.bodyBase64 !== undefined ? Buffer.from(edits.bodyBase64, 'base64') : original.request.bytes();
  const origin = new URL(target.origin);
  const headers: string[] = ['Host', origin.host];
  for (let i = 0; i + 1 < source.length; i += 2) {
    if (!DROPPED.has(source[i]!.toLowerCase())) headers.push(source[i]!, source[i + 1]!);
  }
  if (body.length > 0 || !['GET', 'HEAD', 'DELETE', 'OPTIONS'].includes(method)) {
    headers.push('Content-Length', String(body.length));
  }
  const recorder = new ExchangeRecorder(
    store,
    { method, target: path, headers, clientAddress: 'replay', replayOf: original.id },
    bodyLimit,
  );
  if (body.length > 0) recorder.requestData(body);
  return new Promise((resolve, reject) => {
    const finish = (entry: StoredEntry | undefined): void => {
      if (entry !== undefined) resolve(entry);
    };
    const req = (origin.protocol === 'https:' ? httpsRequest : httpRequest)({
      hostname: origin.hostname.replace(/^\[|\]$/g, ''),
      port: origin.port,
      method,
      path: target.basePath + path,
      headers,
      setHost: false,
      agent: false,
      timeout: REPLAY_HEAD_TIMEOUT_MS,
    });
    req.on('timeout', () => req.destroy(new Error('no answer from the local target in 30 s')));
    req.on('response', (res) => {
      req.setTimeout(0);
      recorder.responseHead(res.statusCode ?? 0, res.rawHeaders);
      res.on('data', (chunk: Buffer) => recorder.responseData(chunk));
      res.on('end', () => finish(recorder.finish()));
      res.on('error', (err) => finish(recorder.finish({ code: 'response_aborted', message: err.message })));
    });
    req.on('error', (err) => {
      const entry = recorder.finish({ code: 'replay_failed', message: err.message });
      if (entry !== undefined) resolve(entry);
      else reject(new InspectorError(InspectorErrorCode.REPLAY_FAILED, err.message, { cause: err }));
    });
    req.end(body);
  });
}
